"""§2e of the reference: the context an agent sends to its model next (the ``om.context/v1`` record).

Through the embedded ``Memory`` with a ``FunctionModel`` Observer, and through ``render_context`` for the rendering
rules themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from om_stream import ContextRecord, Memory
from om_stream.core.context import CONTINUATION_REMINDER, INTRO, render_context
from om_stream.core.extractors import Extractor
from om_stream.core.messages import ToolCallPart
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, context_spec, message, observe_all

LOG = ("Date: Mar 2, 2026\n* 🔴 (09:00) User stated they are moving to Lyon [since the lease ended].\n"
       "  * -> 🟡 Assistant compared three movers\n* 🟢 (09:05) User mentioned the weather")


def rendered(texts: dict[str, str], today: str = "2026-03-02", **fields: object) -> tuple[str, ...]:
    from datetime import datetime
    now = int(datetime.fromisoformat(f"{today}T12:00:00+00:00").timestamp() * 1000)
    return render_context(context_spec(tuple(texts), **fields), texts, (), now_ms=now).system_blocks  # type: ignore[arg-type]


async def observed_context(options: dict[str, object], answer: Callable[[ChatRequest], str] = observe_all,
                           count: int = 2, **memory: object) -> ContextRecord:
    async with Memory(options, model=FunctionModel(answer), clock=ManualClock(START_MS), **memory) as om:  # type: ignore[arg-type]
        for i in range(1, count + 1):
            await om.add_message(message(i, f"turn {i}", "user" if i % 2 else "assistant"))
        await om.observe("t1", force=True)
        await om.settle()
        context = await om.context("t1")
    assert context is not None
    return context


# -- 2e.1 the observation log as the agent reads it -----------------------------------------------------------------

def test_the_log_reaches_the_agent_as_the_observer_wrote_it() -> None:
    blocks = rendered({"s1": LOG})
    shown = blocks[2]
    assert "🟡" in shown and "🟢" in shown and "🔴" in shown
    assert "[since the lease ended]" in shown  # bracketed text is the Observer's too
    assert "  * -> 🟡 Assistant compared" in shown  # nesting and arrows keep their meaning


async def test_in_retrieval_mode_each_group_is_introduced_by_its_id_and_message_range() -> None:
    context = await observed_context({"model": "openai/gpt-5-mini", "retrieval": True})
    heading = next(b for b in context.system_blocks if b.startswith("## Group `"))
    assert "_range: m1:m2_" in heading
    assert "<observation-group" not in context.observations


def test_dates_the_observer_resolved_are_annotated_relative_to_the_conversations_day() -> None:
    text = ("Date: Mar 2, 2026\n* 🔴 (09:00) User stated they will fly to Lyon on Friday (meaning Mar 6, 2026).\n"
            "* 🟡 (09:01) User stated the lease ended last week (meaning Feb 23, 2026).")
    later = rendered({"s1": text}, today="2026-03-20")[2]
    assert "(meaning Mar 6, 2026) - 2 weeks ago, likely already happened" in later
    assert "(meaning Feb 23, 2026) - 3 weeks ago" in later and "ago, likely" not in later.splitlines()[2]
    assert "Date: Mar 2, 2026 (2 weeks ago)" in later
    sooner = rendered({"s1": text}, today="2026-03-02")[2]
    assert "(meaning Mar 6, 2026) - in 4 days" in sooner and "Date: Mar 2, 2026 (today)" in sooner


def test_a_gap_line_separates_days_more_than_one_day_apart() -> None:
    text = "Date: Mar 2, 2026\n* 🔴 a\nDate: Mar 3, 2026\n* 🔴 b\nDate: Mar 12, 2026\n* 🔴 c"
    shown = rendered({"s1": text}, today="2026-03-12")[2]
    assert "[9 days later]" not in shown and "[1 week later]" in shown
    assert shown.count("later]") == 1  # Mar 2 to Mar 3 is one day: no gap line


def test_each_observation_segment_is_its_own_block() -> None:
    blocks = rendered({"s1": "* 🔴 first", "s2": "* 🔴 second"})
    assert blocks[1:] == ("<observations>", "* 🔴 first", "* 🔴 second", "</observations>")


# -- 2e.2 the memory blocks -----------------------------------------------------------------------------------------

def test_the_instructions_come_first_and_the_observation_block_is_closed() -> None:
    blocks = rendered({"s1": "* 🔴 User is Ada."})
    assert blocks[0] == INTRO
    assert blocks[1] == "<observations>" and blocks[-1] == "</observations>"


def test_the_continuation_hints_follow_the_observations() -> None:
    blocks = rendered({"s1": "* 🔴 a"}, task="book the flight", suggested="ask for the dates")
    assert blocks[-2:] == ("<current-task>\nbook the flight\n</current-task>",
                           "<suggested-response>\nask for the dates\n</suggested-response>")


async def test_without_continuation_hints_no_hint_blocks_are_shown() -> None:
    def with_task(request: ChatRequest) -> str:
        return observe_all(request) + "\n<current-task>book the flight</current-task>"

    shown = await observed_context({"model": "openai/gpt-5-mini"}, with_task)
    assert any(b.startswith("<current-task>") for b in shown.system_blocks)
    hidden = await observed_context({"model": "openai/gpt-5-mini", "observation": {"continuationHints": False},
                                     "reflection": {"continuationHints": False}}, with_task)
    assert not any(b.startswith("<current-task>") for b in hidden.system_blocks)


async def test_custom_extracted_values_are_shown_unless_the_extractor_hides_them() -> None:
    mood = Extractor(name="mood", instructions="The user's mood.")
    secret = Extractor(name="secret", instructions="x", include_previous_extraction=False)

    def answer(request: ChatRequest) -> str:
        return observe_all(request) + "\n<mood>cheerful</mood>\n<secret>s3cr3t</secret>"

    context = await observed_context({"model": "openai/gpt-5-mini", "observation": {"extract": [mood, secret]}},
                                     answer)
    assert "<mood>\ncheerful\n</mood>" in context.system_blocks
    assert not any("s3cr3t" in b for b in context.system_blocks)


async def test_before_anything_is_observed_there_are_no_memory_blocks() -> None:
    async with Memory({"model": "openai/gpt-5-mini"}, clock=ManualClock(START_MS)) as om:
        context = await om.add_message(message(1, "hello"))
    assert context is not None
    assert context.system_blocks == [] and context.continuation is None and context.observations == ""


async def test_resource_wide_recall_instructions_are_given_before_anything_is_observed() -> None:
    async with Memory({"model": "openai/gpt-5-mini", "retrieval": True}, clock=ManualClock(START_MS)) as om:
        context = await om.add_message(message(1, "hello"))
    assert context is not None and len(context.system_blocks) == 1
    assert "recall" in context.system_blocks[0] and context.observations == ""


# -- 2e.3 the raw messages and the continuation reminder ------------------------------------------------------------

async def test_the_raw_messages_are_the_unobserved_ones_and_the_open_turns_user_message() -> None:
    model = FunctionModel(observe_all)
    async with Memory({"model": "openai/gpt-5-mini", "observation": {"messageTokens": 10_000}}, model=model,
                      clock=ManualClock(START_MS)) as om:
        for i in range(1, 4):
            await om.add_message(message(i, f"turn {i}", "user" if i % 2 else "assistant"))
        await om.observe("t1", force=True)
        await om.settle()
        step = message(4, "let me look", "assistant")
        step = step.model_copy(update={"parts": (*step.parts, ToolCallPart(tool_call_id="c1", tool_name="search",
                                                                            args={"q": "lyon"}))})
        during = await om.add_message(step)
        answered = await om.add_message(message(5, "here it is", "assistant"))
    assert during is not None and answered is not None
    # while its turn is open, m3 (the question the agent's model is answering) stays raw though already observed,
    # as the reference keeps a turn's input; once the reply answers it, it is in the log only
    assert [m.message_id for m in during.messages] == ["m3", "m4"]
    assert [m.message_id for m in answered.messages] == ["m4", "m5"]
    assert "m3" in answered.observations


async def test_the_continuation_reminder_is_a_user_message_between_the_memory_and_the_raw_messages() -> None:
    context = await observed_context({"model": "openai/gpt-5-mini"}, count=3)
    assert context.continuation == CONTINUATION_REMINDER
    assert context.continuation.startswith("<system-reminder>") and context.continuation.endswith(
        "</system-reminder>")
    chat = context.to_chat_messages()
    roles = [m["role"] for m in chat]
    reminder = roles.index("user")
    assert set(roles[:reminder]) == {"system"} and chat[reminder]["content"] == CONTINUATION_REMINDER
    assert [m["content"] for m in chat[reminder + 1:]] == [m.text for m in context.messages]


async def test_the_continuation_reminder_is_never_counted_nor_observed() -> None:
    model = FunctionModel(observe_all)
    async with Memory({"model": "openai/gpt-5-mini"}, model=model, clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "hello"))
        await om.observe("t1", force=True)
        await om.settle()
        context = await om.add_message(message(2, "and more", "assistant"))
        assert context is not None and context.continuation
        raw_tokens = sum(om.accountant.message_tokens(m) for m in context.messages)
        await om.observe("t1", force=True)
        await om.settle()
    assert context.tokens.messages == raw_tokens  # the reminder is not part of the count
    assert all("system-reminder" not in m.content for r in model.calls("observer") for m in r.messages[2:])


# -- 2e.4 temporal gap markers --------------------------------------------------------------------------------------

async def test_a_reminder_of_the_gap_precedes_a_user_message_after_ten_minutes_of_silence() -> None:
    seen: list[object] = []
    model = FunctionModel(observe_all)
    async with Memory({"model": "openai/gpt-5-mini", "temporalMarkers": True}, model=model,
                      clock=ManualClock(START_MS), on_event=lambda e, _i: seen.append(e)) as om:
        await om.add_message(message(1, "hello"))
        await om.add_message(message(2, "hi", "assistant"))
        await om.add_message(message(3, "nine minutes later", minutes=11))
        context = await om.add_message(message(4, "much later", minutes=11 + 125))
        await om.observe("t1", force=True)
        await om.settle()
    assert context is not None
    ids = [m.message_id for m in context.messages]
    assert ids == ["m1", "m2", "m3", "__temporal_gap_m4", "m4"]
    marker = context.messages[3]
    assert marker.role == "system" and "2 hours 5 minutes later" in marker.text
    assert marker.metadata == {"reminderType": "temporal-gap", "gapMs": 125 * 60_000, "precedesMessageId": "m4"}
    assert [e.gap_text for e in seen if e.event_type == "data-om-temporal-marker"] == ["2 hours 5 minutes"]  # type: ignore[attr-defined]
    history = model.calls("observer")[-1].messages[2].content
    assert "2 hours 5 minutes later" in history and "<system-reminder>" not in history


async def test_no_gap_reminder_without_the_option_or_before_an_assistant_message() -> None:
    async with Memory({"model": "openai/gpt-5-mini"}, clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "hello"))
        plain = await om.add_message(message(2, "hours later", minutes=300))
    async with Memory({"model": "openai/gpt-5-mini", "temporalMarkers": True}, clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "hello"))
        answer = await om.add_message(message(2, "a late answer", "assistant", minutes=300))
    assert plain is not None and answer is not None
    assert [m.message_id for m in plain.messages] == ["m1", "m2"]
    assert [m.message_id for m in answer.messages] == ["m1", "m2"]
