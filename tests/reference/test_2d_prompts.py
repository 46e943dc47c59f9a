"""§2d of the reference: what the Observer and the Reflector are asked, and how their answers are read.

om-stream writes its own prompts; these tests check the structure and the rules they carry, through the requests a
``FunctionModel`` receives from the embedded ``Memory`` and through the prompt builders themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from om_stream import ImagePart, Memory, Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.events import OMEvent
from om_stream.core.extractors import Extractor
from om_stream.core.prompts.observer import build_observer_messages, truncate_previous
from om_stream.core.prompts.parsing import parse_observer_output, parse_reflector_output
from om_stream.core.prompts.reflector import build_reflector_messages
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask, ThreadBatch
from om_stream.core.prompts.transcript import render_messages
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START, START_MS, message, observe_all

COUNT = TiktokenCounter().count
OBSERVED = "<observations>\nDate: Mar 2, 2026\n* 🔴 (09:00) User stated their name is Ada.\n</observations>"


def observer_prompt(**task: object) -> tuple[str, str, str]:
    messages = build_observer_messages(ObserverTask(messages=(message(1, "hello"),), **task), COUNT)  # type: ignore[arg-type]
    assert [m.role for m in messages] == ["system", "user", "user"]
    return messages[0].content, messages[1].content, messages[2].content


async def run(options: dict[str, object], answer: Callable[[ChatRequest], str], count: int = 2, *,
              force: bool = True, reflect: bool = False) -> tuple[FunctionModel, list[OMEvent]]:
    model = FunctionModel(answer)
    seen: list[OMEvent] = []
    async with Memory(options, model=model, clock=ManualClock(START_MS), on_event=lambda e, _i: seen.append(e)) as om:
        for i in range(1, count + 1):
            await om.add_message(message(i, f"line {i} about the trip", "user" if i % 2 else "assistant"))
        if force:
            await om.observe("t1", force=True)
            await om.settle()
        if reflect:
            await om.reflect("t1", guidance="keep the dates")
            await om.settle()
    return model, seen


# -- 2d.1 the Observer's call ---------------------------------------------------------------------------------------

async def test_the_observer_gets_its_instructions_then_the_task_then_the_history() -> None:
    model, _ = await run({"model": "openai/gpt-5-mini"}, observe_all)
    (call,) = model.calls("observer")
    system, task, history = call.messages
    assert (system.role, task.role, history.role) == ("system", "user", "user")
    assert "<observations>" in system.content and "Your task" in task.content
    assert history.content.startswith("## New message history to observe")
    assert "line 1 about the trip" in history.content and "line 1 about the trip" not in task.content


def test_the_task_shows_the_previous_log_and_says_not_to_repeat_it() -> None:
    _, task, _ = observer_prompt(previous_observations="* 🔴 (08:00) User stated they live in Porto.")
    assert "User stated they live in Porto." in task
    assert "Do not repeat them" in task
    assert "(none yet)" in observer_prompt()[1]


def test_the_task_shows_the_threads_prior_metadata_and_extracted_values() -> None:
    mood = Extractor(name="mood", instructions="The user's mood.")
    hidden = Extractor(name="secret", instructions="x", include_previous_extraction=False)
    _, task, _ = observer_prompt(prior_current_task="book the flight", prior_suggested_response="ask the dates",
                                 prior_thread_title="Lisbon trip", want_thread_title=True,
                                 inline_extractors=(mood, hidden), prior_extracted={"mood": "cheerful", "secret": "s"})
    assert "<current-task>book the flight</current-task>" in task
    assert "<suggested-response>ask the dates</suggested-response>" in task
    assert "<thread-title>Lisbon trip</thread-title>" in task
    assert "<mood>cheerful</mood>" in task and "<secret>" not in task


def test_the_prior_title_is_shown_only_when_titles_are_on() -> None:
    _, task, _ = observer_prompt(prior_thread_title="Lisbon trip", want_thread_title=False)
    assert "Lisbon trip" not in task


def test_without_hints_the_observer_is_told_to_always_write_an_observations_block() -> None:
    assert "Always output an <observations> block" in observer_prompt(want_hints=False)[1]
    assert "Always output an <observations> block" not in observer_prompt(want_hints=True)[1]


async def test_the_observer_call_carries_the_resolved_model_settings() -> None:
    model, _ = await run({"model": "openai/gpt-5-mini", "observation": {
        "modelSettings": {"temperature": 0.1, "maxOutputTokens": 900},
        "providerOptions": {"openai": {"reasoningEffort": "low"}}}}, observe_all)
    (call,) = model.calls("observer")
    assert (call.temperature, call.max_output_tokens) == (0.1, 900)
    assert call.provider_options == {"openai": {"reasoningEffort": "low"}}
    assert (call.thread_id, call.resource_id) == ("t1", "r1")


# -- 2d.2 how messages are shown to the Observer --------------------------------------------------------------------

def test_the_history_is_chronological_with_a_date_line_per_day_and_times_only_when_they_change() -> None:
    messages = [message(1, "first"), message(2, "second", "assistant", minutes=1.5),
                message(3, "next day", minutes=24 * 60 + 5)]
    text = render_messages(list(reversed(messages)), COUNT).text
    lines = text.splitlines()
    assert lines[0].startswith("Mar 2, 2026")
    assert lines[1] == "User (09:01): [id=m1] first"
    assert lines[2] == "Assistant: [id=m2] second"  # same minute: no time again
    assert any(line.startswith("Mar 3, 2026") for line in lines)
    assert lines[-1] == "User (09:05): [id=m3] next day"


def test_a_tool_call_and_its_result_are_shown_once_each() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="weather", args={"city": "Lisbon"})
    result = ToolResultPart(tool_call_id="c1", tool_name="weather", result={"sky": "clear"})
    error = ToolResultPart(tool_call_id="c2", tool_name="book", result="no seats", is_error=True)
    parts = (Message(message_id="a", thread_id="t", resource_id="r", role="assistant", created_at=START,
                     parts=(call, call)),
             Message(message_id="b", thread_id="t", resource_id="r", role="tool", created_at=START,
                     parts=(result, result, error)))
    text = render_messages(parts, COUNT).text
    assert text.count("Tool call weather") == 1 and '"city": "Lisbon"' in text
    assert text.count("Tool result weather") == 1 and "clear" in text
    assert "Tool error book: no seats" in text


def test_attachments_become_numbered_placeholders_and_are_forwarded_as_allowed() -> None:
    images = Message(message_id="a", thread_id="t", resource_id="r", role="user", created_at=START,
                     parts=(ImagePart(url="https://x/photos/beach.jpg", mime_type="image/jpeg"),
                            ImagePart(data="aGVsbG8=", mime_type="image/png", filename="shot.png"),
                            TextPart(text="look")))
    forwarded = render_messages([images], COUNT, attachments_policy=True)
    assert "[Image #1: beach.jpg]" in forwarded.text and "[Image #2: shot.png]" in forwarded.text
    assert len(forwarded.attachments) == 2
    only_png = render_messages([images], COUNT, attachments_policy=("IMAGE/PNG",))
    assert [a.filename for a in only_png.attachments] == ["shot.png"]
    none = render_messages([images], COUNT, attachments_policy=False)
    assert none.attachments == () and "[Image #1: beach.jpg]" in none.text  # placeholders stay


def test_media_inside_a_tool_result_is_shown_as_a_placeholder_and_forwarded() -> None:
    result = ToolResultPart(tool_call_id="c1", tool_name="screenshot",
                            result={"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]})
    shown = render_messages([Message(message_id="b", thread_id="t", resource_id="r", role="tool", created_at=START,
                                     parts=(result,))], COUNT)
    assert "[Image #1: image/png]" in shown.text and "aGVsbG8=" not in shown.text
    assert [a.mime_type for a in shown.attachments] == ["image/png"]


def test_the_transcript_shows_times_in_utc_whatever_the_messages_offset() -> None:
    from datetime import datetime, timedelta, timezone

    lisbon_evening = datetime(2026, 3, 2, 23, 30, tzinfo=timezone(timedelta(hours=-2)))  # 01:30 UTC next day
    late = Message(message_id="m1", thread_id="t", resource_id="r", role="user", created_at=lisbon_evening,
                   parts=(TextPart(text="still up"),))
    lines = render_messages([late], COUNT).text.splitlines()
    assert lines[0].startswith("Mar 3, 2026") and lines[1] == "User (01:30): still up"


# -- 2d.3 the Observer's instructions -------------------------------------------------------------------------------

def test_the_observer_instructions_carry_the_observation_rules_and_the_output_format() -> None:
    system, _, _ = observer_prompt()
    for rule in ("User stated", "User asked", "(meaning", "supersedes", "✅", "waiting for user", "->"):
        assert rule in system, rule
    for mark in ("🔴", "🟡", "🟢"):
        assert mark in system
    assert re.search(r"Date: [A-Z][a-z]{2} \d{1,2}, \d{4}", system) and "(HH:MM)" in system


def test_the_observer_is_told_what_it_is_and_how_to_observe_beyond_the_format() -> None:
    """The rules of 2d.3 no other test holds (the reference sample of 2026-12-05, D1, D4, D6-D9, D16): each must
    stay in the instructions, whatever their wording becomes."""
    system = observer_prompt()[0]
    rules = {
        "D1 the role": ("memory of an AI assistant", "only record it keeps"),
        "D4 an assertion outranks a later question": ("assertion outranks a later question",),
        "D6 precise wording": ("unusual or telling phrasing in quotes", "precise verb", "clarified wording"),
        "D7 distinguishing details": ("attribute that set it apart", "names, handles and titles",
                                      "exact numbers", "count first", "the user's role at an event"),
        "D8 what to capture": ("What the user is working on", "code snippets", "ASCII art verbatim",
                               "edited together, verbatim", "Who, what, where and when"),
        "D9 user messages nearly verbatim": ("nearly word for word", "key sentences quoted"),
        "D16 the guidelines": ("specific and actionable", "One to five observations per exchange",
                               "priority mark or ✅", "concrete completed work"),
    }
    missing = {rule: [p for p in phrases if p not in system] for rule, phrases in rules.items()}
    assert not {rule: gone for rule, gone in missing.items() if gone}


def test_the_observer_asks_for_the_hint_sections_it_wants() -> None:
    with_hints = observer_prompt(want_hints=True, want_thread_title=True)[0]
    assert "<current-task>" in with_hints and "<suggested-response>" in with_hints and "<thread-title>" in with_hints
    plain = observer_prompt(want_hints=False)[0]
    assert "<current-task>" not in plain and "<thread-title>" not in plain


def test_a_single_thread_observer_is_told_not_to_write_thread_tags_and_a_multi_thread_one_to_use_them() -> None:
    single = observer_prompt()[0]
    assert "Never write thread ids" in single
    batch = ThreadBatch(thread_id="a1", messages=(message(1, "hi", thread="a"),))
    multi = build_observer_messages(ObserverTask(messages=batch.messages, threads=(batch,)), COUNT)
    assert '<thread id="a1">' in multi[2].content and "one <thread" in multi[0].content


def test_the_applications_instruction_is_appended_to_the_observers_instructions() -> None:
    system = observer_prompt(instruction="Track dietary restrictions.")[0]
    assert system.rstrip().endswith("Track dietary restrictions.")


# -- 2d.4 reading the Observer's answer -----------------------------------------------------------------------------

async def test_a_degenerate_observer_answer_is_asked_for_once_more_then_the_cycle_fails() -> None:
    looping = "<observations>\n" + "* 🔴 (09:00) User said the same thing again and again.\n" * 200
    model, seen = await run({"model": "openai/gpt-5-mini"}, lambda r: looping)
    assert len(model.calls("observer")) == 2
    failed = [e for e in seen if e.event_type == "data-om-observation-failed"]
    assert failed and "degenerate" in failed[0].error  # type: ignore[attr-defined]


async def test_a_degenerate_answer_followed_by_a_good_one_is_observed() -> None:
    answers = iter(["<observations>\n" + "* 🔴 (09:00) repeated line of the loop\n" * 200, OBSERVED])
    model, seen = await run({"model": "openai/gpt-5-mini"}, lambda r: next(answers))
    assert len(model.calls("observer")) == 2
    assert [e for e in seen if e.event_type == "data-om-observation-end"]


def test_extracted_values_come_from_tags_or_a_json_block_and_the_last_one_wins() -> None:
    mood, plan = Extractor(name="mood", instructions="x"), Extractor(name="plan", instructions="x")
    answer = (OBSERVED + '\n<mood>calm</mood>\n<extracted-values>{"plan": {"days": 3}}</extracted-values>'
              "\n<mood>cheerful</mood>\n<plan>[1, 2]</plan>")
    parsed = parse_observer_output(answer, extractors=(mood, plan))
    assert parsed.extracted == {"mood": "cheerful", "plan": [1, 2]}
    assert "<mood>" not in parsed.observations


def test_several_observation_blocks_are_joined_and_without_tags_the_list_items_are_kept() -> None:
    joined = parse_observer_output("<observations>\n* 🔴 a\n</observations>\nchatter\n<observations>\n* 🟡 b\n"
                                   "</observations>")
    assert joined.observations.splitlines() == ["* 🔴 a", "* 🟡 b"]
    untagged = parse_observer_output("Here is what I saw:\n* 🔴 first\nsome prose\n1. second\n- third")
    assert untagged.observations.splitlines() == ["* 🔴 first", "1. second", "- third"]


def test_the_hint_sections_are_read_from_the_answer() -> None:
    parsed = parse_observer_output(OBSERVED + "\n<current-task>\nbook the flight\n</current-task>\n"
                                   "<suggested-response>ask for dates</suggested-response>\n"
                                   "<thread-title>Lisbon trip</thread-title>")
    assert (parsed.current_task, parsed.suggested_response, parsed.thread_title) == (
        "book the flight", "ask for dates", "Lisbon trip")


def test_a_multi_thread_answer_is_split_per_thread_and_a_missing_thread_gets_nothing() -> None:
    answer = ('<observations>\n<thread id="a1">\n* 🔴 a fact\n<current-task>task a</current-task>\n</thread>\n'
              '<thread id="b2">\n* 🟡 b fact\n</thread>\n</observations>')
    parsed = parse_observer_output(answer, multi_thread=True)
    assert parsed.per_thread is not None
    assert parsed.per_thread["a1"].observations == "* 🔴 a fact"
    assert parsed.per_thread["a1"].current_task == "task a"
    assert parsed.per_thread["b2"].observations == "* 🟡 b fact"
    assert "c3" not in parsed.per_thread


# -- 2d.5 previousObserverTokens ------------------------------------------------------------------------------------

def test_the_observer_sees_the_newest_and_the_important_older_lines_within_the_budget() -> None:
    lines = ["Date: Mar 1, 2026", "* 🔴 (08:00) User stated they are allergic to peanuts."]
    lines += [f"* 🟡 (08:{i:02d}) detail number {i} of the long planning session" for i in range(1, 60)]
    lines += ["* 🟡 (09:30) newest detail of the session"]
    text, dropped = truncate_previous("\n".join(lines), 120, COUNT)
    assert COUNT(text) <= 120 and dropped > 0
    assert "allergic to peanuts" in text and "newest detail" in text
    assert re.search(r"\[\d+ observations truncated here\]", text)
    assert truncate_previous("\n".join(lines), None, COUNT) == ("\n".join(lines), 0)
    assert truncate_previous("\n".join(lines), 0, COUNT)[0] == ""


async def test_the_budget_applies_to_the_observers_real_prompt() -> None:
    batches = iter(range(100))

    def long_observations(request: ChatRequest) -> str:
        i = next(batches)
        details = " ".join(f"detail{i}x{j}" for j in range(40))
        return f"<observations>\nDate: Mar 2, 2026\n* 🟡 (09:00) batch {i} {details}\n</observations>"

    model = FunctionModel(long_observations)
    async with Memory({"model": "openai/gpt-5-mini", "observation": {"previousObserverTokens": 60}}, model=model,
                      clock=ManualClock(START_MS)) as om:
        for i in range(1, 5):
            await om.add_message(message(i, "more about the trip"))
            await om.observe("t1", force=True)
            await om.settle()
    last_task = model.calls("observer")[-1].messages[1].content
    previous = last_task.split("## Previous observations", 1)[1].split("These are already recorded", 1)[0]
    assert COUNT(previous) <= 80
    assert "observations truncated here" in previous and "older observation lines were left out" in last_task


# -- 2d.6 the Reflector's instructions ------------------------------------------------------------------------------

def reflector_prompt(**task: object) -> tuple[str, str]:
    messages = build_reflector_messages(ReflectorTask(**{"observations": "* 🔴 (09:00) User is Ada.", "level": 1,  # type: ignore[arg-type]
                                                         "target_tokens": 100, "input_tokens": 200, **task}), COUNT)
    assert [m.role for m in messages] == ["system", "user"]
    return messages[0].content, messages[1].content


def test_the_reflector_is_given_the_observers_rules_and_told_its_output_is_the_whole_memory() -> None:
    system, _ = reflector_prompt()
    assert "User stated" in system and "🔴" in system  # the Observer's rules and format, embedded
    assert "IS the entire memory" in system
    assert "Condense older content more; keep more detail for recent content." in system


def test_a_resource_scope_reflector_is_told_to_keep_thread_sections() -> None:
    assert "<thread id=" in reflector_prompt(multi_thread=True)[0]
    assert "<thread id=" not in reflector_prompt(multi_thread=False)[0]


def test_the_applications_instruction_is_appended_to_the_reflectors_instructions() -> None:
    assert reflector_prompt(instruction="Keep medical details.")[0].rstrip().endswith("Keep medical details.")


# -- 2d.7 the Reflector's task and the compression ladder -----------------------------------------------------------

def test_the_reflector_task_holds_the_log_without_group_tags_guidance_level_and_prior_values() -> None:
    mood = Extractor(name="mood", instructions="The user's mood.")
    _, task = reflector_prompt(observations='<observation-group id="abc" range="m1:m2">\n* 🔴 User is Ada.\n'
                                            "</observation-group>", guidance="keep the dates", level=2,
                               inline_extractors=(mood,), prior_extracted={"mood": "calm"})
    assert "* 🔴 User is Ada." in task and "observation-group" not in task
    assert "## Specific guidance\n\nkeep the dates" in task
    assert "level 2 of 4" in task and "under 100 tokens" in task
    assert "<mood>calm</mood>" in task and "<mood>: The user's mood." in task
    assert task.rstrip().endswith("Always output an <observations> block.")
    assert "Compression" not in reflector_prompt(level=0)[1]


def _ladder_answer(sizes: dict[int, int]) -> Callable[[ChatRequest], str]:
    def answer(request: ChatRequest) -> str:
        if request.role == "observer":
            return ("<observations>\nDate: Mar 2, 2026\n" + "\n".join(
                f"* 🟡 (09:{i:02d}) observed detail {i} " + " ".join(f"w{i}{j}" for j in range(30))
                for i in range(12)) + "\n</observations>")
        level = int(m.group(1)) if (m := re.search(r"level (\d) of 4", request.messages[-1].content)) else 0
        body = "\n".join(f"* 🔴 (09:{i:02d}) kept {level}-{i} " + " ".join(f"k{i}{j}" for j in range(8))
                         for i in range(sizes.get(level, 1)))
        return f"<observations>\nDate: Mar 2, 2026\n{body}\n</observations>"
    return answer


async def test_the_ladder_climbs_until_an_attempt_is_under_target_and_keeps_that_one() -> None:
    options = {"model": "openai/gpt-5-mini", "observation": {"messageTokens": 30, "bufferTokens": False},
               "reflection": {"observationTokens": 200}}
    model, seen = await run(options, _ladder_answer({1: 20, 2: 3}), count=2)
    levels = [int(m.group(1)) for r in model.calls("reflector")
              if (m := re.search(r"level (\d) of 4", r.messages[-1].content))]
    assert levels == [1, 2]
    ended = [e for e in seen if e.event_type == "data-om-observation-end" and e.operation_type == "reflection"]  # type: ignore[attr-defined]
    assert ended and "kept 2-" in ended[0].observations and "kept 1-" not in ended[0].observations  # type: ignore[attr-defined]


async def test_a_manual_reflection_starts_without_compression_guidance() -> None:
    options = {"model": "openai/gpt-5-mini", "observation": {"messageTokens": 10_000, "bufferTokens": False}}
    model, _ = await run(options, _ladder_answer({0: 2}), count=2, reflect=True)
    (first, *_) = model.calls("reflector")
    assert "Compression" not in first.messages[-1].content
    assert "## Specific guidance\n\nkeep the dates" in first.messages[-1].content


def test_the_reflector_answer_falls_back_to_list_items_then_to_the_whole_text() -> None:
    assert parse_reflector_output("prose\n* 🔴 kept\nmore prose").observations == "* 🔴 kept"
    assert parse_reflector_output("User is Ada, lives in Porto.").observations == "User is Ada, lives in Porto."
    assert parse_reflector_output("").empty
