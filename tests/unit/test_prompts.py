"""Observer and Reflector prompts: what the models are told, how the history reads, and previousObserverTokens."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.extractors import Extractor
from om_stream.core.messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from om_stream.core.prompts.observer import build_observer_messages, truncate_previous
from om_stream.core.prompts.reflector import build_reflector_messages
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask, ThreadBatch
from om_stream.core.prompts.transcript import (
    attachment_allowed,
    outline_args,
    render_messages,
    truncate_to_tokens,
)

START = datetime(2026, 6, 6, 9, 14, tzinfo=UTC)
MOOD = Extractor(name="Mood", instructions="How the user feels, in one word.")
QUIET = Extractor(name="Scratch", instructions="Scratch notes.", include_previous_extraction=False)


@pytest.fixture(scope="module")
def count() -> TiktokenCounter:
    return TiktokenCounter()


def msg(n: int, role: str, *parts: Part, minutes: float = 0, thread: str = "t-1") -> Message:
    return Message(message_id=f"m-{n}", thread_id=thread, resource_id="r-1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=minutes), parts=parts)


def text(n: int, role: str, body: str, minutes: float = 0) -> Message:
    return msg(n, role, TextPart(text=body), minutes=minutes)


CHAT = (text(1, "user", "I am moving to Lyon next month."), text(2, "assistant", "Congratulations!"),
        text(3, "user", "Which movers insure pianos?", minutes=3))


# -- Observer prompt ------------------------------------------------------------------------------------------------

def test_observer_prompt_has_the_format_rules_in_the_system_role_and_instructions_last(count: TiktokenCounter) -> None:
    task = ObserverTask(messages=CHAT, instruction="Focus on travel plans.")
    system, task_message, history = build_observer_messages(task, count)
    assert (system.role, task_message.role, history.role) == ("system", "user", "user")
    for rule in ("<observations>", "Date: Mon D, YYYY", "(HH:MM)", "🔴", "🟡", "🟢", "✅", "->", "(meaning",
                 "Never write thread ids or <thread> tags"):
        assert rule in system.content
    assert system.content.rstrip().endswith("Focus on travel plans.")
    assert "Focus on travel" not in task_message.content + history.content


def test_observer_task_message_sections(count: TiktokenCounter) -> None:
    task = ObserverTask(messages=CHAT, previous_observations="Date: Jun 5, 2026\n* 🔴 (10:00) User stated X.",
                        buffered_observations="* 🟡 (09:00) Buffered line.", prior_current_task="Plan the move",
                        prior_suggested_response="Ask about dates", prior_thread_title="Moving to Lyon",
                        prior_extracted={"mood": "hopeful", "scratch": "hidden"}, inline_extractors=(MOOD, QUIET),
                        want_thread_title=True)
    _, task_message, history = build_observer_messages(task, count)
    body = task_message.content
    order = [body.index(h) for h in ("## Previous observations", "User stated X.", "## Buffered observations",
                                     "Buffered line.", "## Prior thread metadata", "## Your task")]
    assert order == sorted(order)
    for tag in ("<current-task>Plan the move</current-task>", "<suggested-response>Ask about dates",
                "<thread-title>Moving to Lyon</thread-title>", "<mood>hopeful</mood>"):
        assert tag in body
    assert "hidden" not in body  # include_previous_extraction=False
    assert history.content.startswith("## New message history to observe")
    assert "I am moving to Lyon next month." in history.content


def test_observer_without_previous_observations_says_none(count: TiktokenCounter) -> None:
    _, task_message, _ = build_observer_messages(ObserverTask(messages=CHAT), count)
    assert "## Previous observations\n\n(none yet)" in task_message.content
    assert "## Buffered observations" not in task_message.content
    assert "## Prior thread metadata" not in task_message.content


def test_hints_and_title_are_requested_only_when_asked(count: TiktokenCounter) -> None:
    plain, task_message, _ = build_observer_messages(ObserverTask(messages=CHAT, want_hints=False,
                                                                  prior_thread_title="Old"), count)
    assert "<current-task>" not in plain.content
    assert "<suggested-response>" not in plain.content
    assert "<thread-title>" not in plain.content
    assert "<thread-title>" not in task_message.content
    assert "Always output an <observations> block" in task_message.content
    hinted, _, _ = build_observer_messages(ObserverTask(messages=CHAT, want_thread_title=True), count)
    for tag in ("<current-task>:", "<suggested-response>:", "<thread-title>:"):
        assert tag in hinted.content


def test_inline_extractors_get_a_section_with_their_instructions(count: TiktokenCounter) -> None:
    structured = Extractor(name="Profile", instructions="Profile facts.", schema={"type": "object"})
    system, _, _ = build_observer_messages(ObserverTask(messages=CHAT, want_hints=False,
                                                        inline_extractors=(MOOD, structured)), count)
    assert "<mood>: How the user feels, in one word." in system.content
    assert "<profile>" not in system.content  # structured extractors get their own call


def test_multi_thread_observer_requires_a_block_per_thread(count: TiktokenCounter) -> None:
    threads = (ThreadBatch("a1", (text(1, "user", "Hello from A"),), prior_current_task="Task A"),
               ThreadBatch("b2", (text(2, "user", "Hello from B", minutes=1),)))
    system, task_message, history = build_observer_messages(ObserverTask(messages=(), threads=threads), count)
    assert "one <thread id=\"...\"> block per conversation" in system.content
    assert "Never write thread ids" not in system.content
    assert '<thread id="a1">\n<current-task>Task A</current-task>\n</thread>' in task_message.content
    assert '<thread id="a1">' in history.content
    assert '<thread id="b2">' in history.content
    assert history.content.index("Hello from A") < history.content.index('<thread id="b2">')


def test_previous_budget_truncates_and_says_so(count: TiktokenCounter) -> None:
    log = "Date: Jun 1, 2026\n" + "\n".join(f"* 🟡 (10:{i:02d}) Ordinary line {i}." for i in range(60))
    _, task_message, _ = build_observer_messages(ObserverTask(messages=CHAT, previous_observations=log), count,
                                                 previous_budget=100)
    assert "Ordinary line 59." in task_message.content
    assert "Ordinary line 0." not in task_message.content
    assert "observations truncated here]" in task_message.content
    assert "older observation lines were left out" in task_message.content


# -- Reflector prompt -----------------------------------------------------------------------------------------------

def test_reflector_prompt_levels_and_sections(count: TiktokenCounter) -> None:
    log = '<observation-group id="g1" range="m-1:m-9">\nDate: Jun 5, 2026\n* 🔴 (10:00) Kept.\n</observation-group>'
    task = ReflectorTask(observations=log, level=0, target_tokens=500, input_tokens=900, guidance="Keep moves.",
                         prior_extracted={"mood": {"now": "calm"}}, inline_extractors=(MOOD,),
                         instruction="Prefer travel facts.")
    system, user = build_reflector_messages(task, count)
    assert "IS the entire memory" in system.content
    assert "<observations>" in system.content
    assert system.content.rstrip().endswith("Prefer travel facts.")
    assert "observation-group" not in user.content
    assert "* 🔴 (10:00) Kept." in user.content
    assert "## Specific guidance\n\nKeep moves." in user.content
    assert '<mood>{"now": "calm"}</mood>' in user.content
    assert "<mood>: How the user feels" in user.content
    assert user.content.rstrip().endswith("Always output an <observations> block.")
    assert "too large" not in user.content
    words = {1: "8/10", 2: "6/10", 3: "4/10", 4: "2/10", 7: "2/10"}
    for level, ratio in words.items():
        _, leveled = build_reflector_messages(ReflectorTask(observations=log, level=level, target_tokens=500,
                                                            input_tokens=900), count)
        assert ratio in leveled.content
        assert "too large" in leveled.content
        assert "under 500 tokens" in leveled.content


def test_reflector_thread_sections_only_in_multi_thread_mode(count: TiktokenCounter) -> None:
    single, _ = build_reflector_messages(ReflectorTask(observations="x", level=0, target_tokens=1, input_tokens=1),
                                         count)
    multi, _ = build_reflector_messages(ReflectorTask(observations="x", level=0, target_tokens=1, input_tokens=1,
                                                      multi_thread=True), count)
    assert "<thread id" not in single.content
    assert "<thread id=\"...\"> sections" in multi.content


# -- transcript -----------------------------------------------------------------------------------------------------

def test_transcript_dates_times_and_roles(count: TiktokenCounter) -> None:
    messages = (*CHAT, text(4, "assistant", "Two companies do.", minutes=3),
                msg(5, "system", TextPart(text="<system-reminder>1 day later</system-reminder>"), minutes=1440),
                text(6, "user", "Back again.", minutes=1440))
    lines = render_messages(messages, count).text.splitlines()
    assert lines == ["Jun 6, 2026 (Saturday):", "User (09:14): I am moving to Lyon next month.",
                     "Assistant: Congratulations!", "User (09:17): Which movers insure pianos?",
                     "Assistant: Two companies do.", "", "Jun 7, 2026 (Sunday):", "1 day later",
                     "User (09:14): Back again."]


def test_transcript_uses_the_task_timezone(count: TiktokenCounter) -> None:
    rendered = render_messages(CHAT[:1], count, timezone="Asia/Tokyo").text
    assert rendered.startswith("Jun 6, 2026 (Saturday):\nUser (18:14):")


def test_tool_call_once_per_id_results_and_errors(count: TiktokenCounter) -> None:
    messages = (msg(1, "assistant", ReasoningPart(text="Look it up."),
                    ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "movers"})),
                msg(2, "tool", ToolResultPart(tool_call_id="c1", tool_name="search", result={"hits": 2})),
                msg(3, "assistant", ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "movers"}),
                    ToolResultPart(tool_call_id="c2", tool_name="book", result="no slot", is_error=True)))
    rendered = render_messages(messages, count).text
    assert rendered.count("Tool call search:") == 1
    assert 'Tool call search: {"q": "movers"}' in rendered
    assert "Reasoning: Look it up." in rendered
    assert 'Tool result search: {"hits": 2}' in rendered
    assert "Tool error book: no slot" in rendered


def test_tool_result_truncated_to_5000_tokens_shorter_ones_whole(count: TiktokenCounter) -> None:
    big = {"rows": [f"row {i} " + "lorem ipsum dolor " * 3 for i in range(2_000)]}
    small = {"rows": ["a", "b"]}
    messages = (msg(1, "tool", ToolResultPart(tool_call_id="c1", tool_name="dump", result=big),
                    ToolResultPart(tool_call_id="c2", tool_name="peek", result=small)),)
    rendered = render_messages(messages, count).text
    dump = rendered.split("Tool result dump: ", 1)[1].split("\nTool result peek: ")[0]
    assert count(dump) > 4_900
    assert count(dump.rsplit("\n", 1)[0]) <= 5_000
    assert dump.rsplit("\n", 1)[1].startswith("[… ")
    assert dump.endswith(" tokens truncated]")
    assert rendered.endswith("Tool result peek: " + json.dumps(small))


def test_truncation_never_splits_a_surrogate_pair() -> None:
    text_ = "ab\ud83d\ude00cd" * 10
    cut = truncate_to_tokens(text_, 5, len)
    kept = cut.split("\n")[0]
    assert not ("\ud800" <= kept[-1] <= "\udbff")


def test_argument_outline_limits(count: TiktokenCounter) -> None:
    deep: dict[str, object] = {"v": 1}
    for _ in range(8):
        deep = {"d": deep}
    outline = outline_args({"long": "x" * 500, "many": list(range(50)), "deep": deep}, count)
    decoded = json.loads(outline)
    assert decoded["long"].endswith("… (500 chars)")
    assert len(decoded["long"]) < 200
    assert len(decoded["many"]) == 21
    assert decoded["many"][-1] == "… 30 more items"
    assert "{… 1 key}" in outline
    huge = {f"k{i}": "word " * 30 for i in range(20)}
    assert count(outline_args({"a": huge, "b": huge, "c": huge, "d": huge, "e": huge}, count)) <= 2_020
    assert outline_args('{"q": 1}', count) == '{"q": 1}'


def test_attachments_placeholders_and_forwarding(count: TiktokenCounter) -> None:
    messages = (msg(1, "user", ImagePart(url="https://cdn.example/pics/my%20cat.jpg", mime_type="image/jpeg"),
                    FilePart(data="JVBER", mime_type="application/pdf", filename="lease.pdf"),
                    FilePart(data="UEsDB", mime_type="application/zip")),
                msg(2, "tool", ToolResultPart(tool_call_id="c1", tool_name="shot", result={"content": [
                    {"type": "image", "data": "iVBOR", "mimeType": "image/png"}, {"type": "text", "text": "ok"}]})))
    everything = render_messages(messages, count)
    for placeholder in ("[Image #1: my cat.jpg]", "[File #1: lease.pdf]", "[File #2: application/zip]",
                        "[Image #2: image/png]"):
        assert placeholder in everything.text
    assert "iVBOR" not in everything.text
    assert [a.mime_type for a in everything.attachments] == ["image/jpeg", "application/pdf", "application/zip",
                                                             "image/png"]
    assert render_messages(messages, count, attachments_policy=False).attachments == ()
    assert len(render_messages(messages, count, attachments_policy="auto").attachments) == 4
    images = render_messages(messages, count, attachments_policy=["IMAGE/*"])
    assert [a.mime_type for a in images.attachments] == ["image/jpeg", "image/png"]
    assert "[File #1: lease.pdf]" in images.text  # placeholders stay even when the binary is not forwarded
    _, _, history = build_observer_messages(ObserverTask(messages=messages), count,
                                            attachments_policy=["application/pdf"])
    assert [a.filename for a in history.attachments] == ["lease.pdf"]


@pytest.mark.parametrize(("mime", "policy", "allowed"), [
    ("image/png", ["image/*"], True), ("IMAGE/PNG", ["image/*"], True), ("application/pdf", ["image/*"], False),
    ("application/pdf", ["Application/PDF"], True), ("text/plain", ["*"], True), ("text/plain", [], False),
    ("image/png", True, True), ("image/png", False, False), ("image/png", "auto", True),
    ("imagery/png", ["image/*"], False),
])
def test_attachment_allowlist(mime: str, policy: bool | str | list[str], allowed: bool) -> None:
    assert attachment_allowed(mime, policy) is allowed  # type: ignore[arg-type]


# -- previousObserverTokens -----------------------------------------------------------------------------------------

def _log() -> str:
    lines = []
    for day in range(1, 6):
        lines.append(f"Date: Jun {day}, 2026")
        for i in range(20):
            mark = "🔴" if (day, i) in {(1, 3), (2, 7)} else "✅" if (day, i) == (3, 5) else "🟡"
            lines.append(f"* {mark} (10:{i:02d}) Day {day} observation number {i} about the move.")
    return "\n".join(lines)


def test_truncate_previous_none_zero_and_fitting(count: TiktokenCounter) -> None:
    log = _log()
    assert truncate_previous(log, None, count) == (log, 0)
    assert truncate_previous(log, 0, count) == ("", 100)
    assert truncate_previous(log, 100_000, count) == (log, 0)


def test_truncate_previous_keeps_newest_and_priority_lines_with_markers(count: TiktokenCounter) -> None:
    log = _log()
    text_, dropped = truncate_previous(log, 400, count)
    assert count(text_) <= 400
    lines = text_.splitlines()
    kept = [line for line in lines if line.startswith("* ")]
    assert dropped == 100 - len(kept)
    assert dropped > 50
    assert lines[-1] == "* 🟡 (10:19) Day 5 observation number 19 about the move."
    for needed in ("Day 1 observation number 3", "Day 2 observation number 7", "Day 3 observation number 5"):
        assert any(needed in line for line in kept)
    head = [line for line in kept if "Day 5" not in line and "Day 4" not in line]
    assert len(head) <= len(kept) / 2
    for line_index, line in enumerate(lines):  # every kept line sits under its own day's header
        if line.startswith("* "):
            day = line.split("Day ")[1].split()[0]
            header = next(h for h in reversed(lines[:line_index]) if h.startswith("Date:"))
            assert header == f"Date: Jun {day}, 2026"
    markers = [line for line in lines if line.endswith("observations truncated here]")]
    assert markers
    assert sum(int(m.strip("[").split()[0]) for m in markers) == dropped


def test_truncate_previous_budget_too_small_for_any_line(count: TiktokenCounter) -> None:
    assert truncate_previous(_log(), 3, count) == ("", 100)


def test_truncate_previous_keeps_thread_sections(count: TiktokenCounter) -> None:
    log = "\n".join(['<thread id="a">', "Date: Jun 1, 2026", *[f"* 🟡 (10:{i:02d}) A line {i}." for i in range(30)],
                     "</thread>", '<thread id="b">', "Date: Jun 2, 2026",
                     *[f"* 🟡 (11:{i:02d}) B line {i}." for i in range(5)], "</thread>"])
    text_, dropped = truncate_previous(log, 200, count)
    assert text_.startswith(f'<thread id="a">\n[{dropped} observations truncated here]\nDate: Jun 1, 2026\n')
    assert text_.endswith("B line 4.\n</thread>")
    assert 20 <= dropped <= 27
    assert count(text_) <= 200
    assert text_.count("<thread id=") == text_.count("</thread>") == 2
    text_, dropped = truncate_previous(log, 100, count)  # nothing of thread a left: its section disappears
    assert text_.startswith('[30 observations truncated here]\n<thread id="b">')
    assert dropped >= 30
    assert text_.endswith("B line 4.\n</thread>")
