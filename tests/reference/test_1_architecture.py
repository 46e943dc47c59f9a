"""§1 of the reference: OM in one page, end to end through the embedded ``Memory``.

An Observer turns messages into a dated, prioritised log; a Reflector condenses the log into a new generation; the
agent's context is the log, a continuation reminder and the unobserved messages; two thresholds drive it, and
background buffering keeps the observation work off the agent's path.
"""

from __future__ import annotations

from om_stream import Memory, OMConfig
from om_stream.core.events import OMEvent
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all


async def conversation(options: dict[str, object], count: int) -> tuple[Memory, FunctionModel, list[OMEvent]]:
    model = FunctionModel(observe_all)
    seen: list[OMEvent] = []
    om = Memory({"model": "openai/gpt-5-mini", **options}, model=model, clock=ManualClock(START_MS),
                on_event=lambda e, _i: seen.append(e))
    async with om:
        for i in range(1, count + 1):
            await om.add_message(message(i, "word " * 20, "user" if i % 2 else "assistant"))
            await om.settle()
        om.last = await om.context("t1")  # type: ignore[attr-defined]
    return om, model, seen


def test_two_thresholds_drive_memory_30k_message_tokens_and_40k_observation_tokens() -> None:
    config = OMConfig.parse({}).resolve()
    assert (config.message_tokens, config.observation_tokens) == (30_000, 40_000)
    assert config.async_buffering and not OMConfig.parse({"scope": "resource"}).resolve().async_buffering


async def test_the_observer_writes_a_dated_prioritised_log_that_replaces_observed_messages() -> None:
    om, model, _ = await conversation({"observation": {"messageTokens": 60, "bufferTokens": False}}, 3)
    context = om.last  # type: ignore[attr-defined]
    assert model.calls("observer")
    assert "Date: Mar 2, 2026" in context.observations and "* 🔴 (09:00) saw m1" in context.observations
    assert "m1" not in [m.message_id for m in context.messages]


async def test_the_reflector_condenses_the_log_into_a_new_generation() -> None:
    om, model, _ = await conversation({"observation": {"messageTokens": 60, "bufferTokens": False},
                                       "reflection": {"observationTokens": 30}}, 12)
    assert model.calls("reflector")
    assert om.last.generation >= 1  # type: ignore[attr-defined]


async def test_the_context_is_the_memory_then_a_reminder_then_the_unobserved_messages() -> None:
    om, _, _ = await conversation({"observation": {"messageTokens": 60, "bufferTokens": False}}, 4)
    chat = om.last.to_chat_messages()  # type: ignore[attr-defined]
    roles = [m["role"] for m in chat]
    reminder = roles.index("user")
    assert roles[:reminder] == ["system"] * reminder and "<observations>" in [m["content"] for m in chat]
    assert "<system-reminder>" in chat[reminder]["content"]
    assert [m["content"] for m in chat[reminder + 1:]] == [m.text for m in om.last.messages]  # type: ignore[attr-defined]


async def test_buffered_observations_stay_invisible_until_activation_which_calls_no_model() -> None:
    model = FunctionModel(observe_all)
    events: list[OMEvent] = []
    async with Memory({"model": "openai/gpt-5-mini", "observation": {"messageTokens": 150, "bufferTokens": 40}},
                      model=model, clock=ManualClock(START_MS), on_event=lambda e, _i: events.append(e)) as om:
        invisible = None
        for i in range(1, 12):
            context = await om.add_message(message(i, "word " * 20))
            await om.settle()
            state = om.state("t1")
            if state is not None and state.buffered and not state.log and invisible is None:
                invisible = context
            if any(e.event_type == "data-om-activation" for e in events):
                break
    assert invisible is not None and invisible.observations == ""
    activated_at = next(i for i, e in enumerate(events) if e.event_type == "data-om-activation")
    starts_before = sum(1 for e in events[:activated_at] if e.event_type == "data-om-buffering-start")
    assert starts_before == len(model.calls("observer"))  # activation itself made no call
