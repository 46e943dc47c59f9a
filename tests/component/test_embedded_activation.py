"""Activation, tool calls and cycle ends through the embedded ``Memory`` (offline model, real token counts): what a
Python agent sees in its contexts and events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from om_stream.core.events import OMEvent
from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.runtime.embedded import ManualClock, Memory

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def message(index: int, role: str, text: str = "", **parts: Any) -> Message:
    content: list[Any] = [TextPart(text=text)] if text else []
    content += [ToolCallPart(tool_call_id=c, tool_name="weather", args={"city": "Lisbon"})
                for c in parts.get("calls", ())]
    content += [ToolResultPart(tool_call_id=c, tool_name="weather", result={"sky": "clear"})
                for c in parts.get("results", ())]
    return Message(message_id=f"m{index}", thread_id="t1", resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(seconds=index), parts=tuple(content))


def sized(om: Memory, index: int, role: str, low: int, high: int) -> Message:
    """A message the memory counts between ``low`` and ``high`` tokens."""
    for count in range(1, 4 * high):
        candidate = message(index, role, " ".join(f"fact{i % 10}" for i in range(count)))
        if low <= om.accountant.message_tokens(candidate, "") <= high:
            return candidate
    raise AssertionError("no text of that size")


class Recorder:
    def __init__(self) -> None:
        self.events: list[OMEvent] = []

    def __call__(self, event: OMEvent, event_id: str) -> None:
        self.events.append(event)

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.event_type == kind]


async def test_one_message_over_the_threshold_is_observed_by_activating_its_chunk() -> None:
    recorder = Recorder()
    options = {"observation": {"messageTokens": 100, "bufferTokens": 0.2}, "reflection": {"observationTokens": 5000}}
    async with Memory(options, clock=ManualClock(int(START.timestamp() * 1000)), on_event=recorder) as om:
        question = sized(om, 1, "user", 101, 115)  # over the threshold, under blockAfter (120)
        await om.add_message(question)
        await om.settle()
        context = await om.context("t1")
        assert context is not None
        (activation,) = recorder.of("data-om-activation")
        (start,) = recorder.of("data-om-buffering-start")
        (end,) = recorder.of("data-om-buffering-end")
        assert activation.cycle_id == start.cycle_id == end.cycle_id
        assert activation.observations == end.observations  # this chunk's text, under its own event
        assert context.observations  # in the log
        assert [m.message_id for m in context.messages] == ["m1"]  # the question itself stays


async def test_a_pending_tool_call_defers_the_observation_until_its_result() -> None:
    recorder = Recorder()
    options = {"observation": {"messageTokens": 60, "bufferTokens": False}, "reflection": {"observationTokens": 5000}}
    async with Memory(options, clock=ManualClock(int(START.timestamp() * 1000)), on_event=recorder) as om:
        await om.add_message(sized(om, 1, "user", 50, 58))
        call = message(2, "assistant", "Let me check the weather.", calls=("c1",))
        context = await om.add_message(call)  # past the threshold with the call open: returned at once
        await om.settle()
        assert context is not None and not context.observations
        assert not recorder.of("data-om-observation-start")
        context = await om.add_message(message(3, "tool", results=("c1",)))
        assert context is not None
        assert len(recorder.of("data-om-observation-start")) == 1
        assert context.observations
        # the call and its result were observed together; the question stays as the current turn's message
        assert [m.message_id for m in context.messages] == ["m1"]
        state = om.state("t1", "r1")
        assert state is not None and state.unobserved == []
