"""The embedded ``Memory``'s manual commands as the reference documents them: ``observe()`` waits for the message
threshold (``force`` does not), overrides merge and need a thread with a memory, ``clear`` forgets the observations
but not the conversation, and an empty id is refused before it reaches the engine."""

from __future__ import annotations

from datetime import timedelta

import pytest

from om_stream import InputRejected, Memory, Message, TextPart
from om_stream.core.events import OMEvent, StatusEvent
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.support.scripted_provider import OBSERVED, REFLECTED, START

WORDS = "the staging cluster needs a new partition plan before the launch on friday"


def message(i: int, thread: str = "t1", role: str = "user") -> Message:
    return Message(message_id=f"{thread}-m{i}", thread_id=thread, resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=i), parts=(TextPart(text=f"turn {i}: {WORDS}"),))


def observer_and_reflector(request: ChatRequest) -> str:
    return REFLECTED if request.role == "reflector" else OBSERVED


def memory(options: dict[str, object], model: FunctionModel, events: list[OMEvent] | None = None) -> Memory:
    return Memory(options, model=model, clock=ManualClock(int(START.timestamp() * 1000)),
                  on_event=(lambda e, _i: events.append(e)) if events is not None else None)


# -- observe() and the message threshold --------------------------------------------------------------------------

async def test_observing_after_every_turn_calls_no_model_below_the_threshold_and_force_observes_now() -> None:
    model = FunctionModel(observer_and_reflector)
    async with memory({"observation": {"messageTokens": 5_000, "bufferTokens": False}}, model) as om:
        for i in range(6):
            await om.add_message(message(i, role="user" if i % 2 == 0 else "assistant"))
            assert await om.observe("t1") is False  # a status-then-observe loop, every turn
        await om.settle()
        assert model.calls("observer") == []
        context = await om.context("t1")
        assert context is not None and context.observations == "" and len(context.messages) == 6

        assert await om.observe("t1", force=True) is True
        await om.settle()
        assert len(model.calls("observer")) == 1
        observed = await om.context("t1")
        assert observed is not None and "User stated their name is Ada." in observed.observations


# -- overrides ------------------------------------------------------------------------------------------------------

async def test_overrides_merge_field_by_field() -> None:
    events: list[OMEvent] = []
    async with memory({}, FunctionModel(observer_and_reflector), events) as om:
        await om.add_message(message(0))
        await om.override("t1", message_tokens=2_000)
        await om.override("t1", observation_tokens=3_000)
        state = om.state("t1", "r1")
        assert state is not None
        assert (state.override_message_tokens, state.override_observation_tokens) == (2_000, 3_000)
        status = [e for e in events if isinstance(e, StatusEvent)][-1]
        assert status.windows.active.messages.threshold == 2_000
        assert status.windows.active.observations.threshold == 3_000
        await om.override("t1", observation_tokens=4_000, replace=True)
        state = om.state("t1", "r1")
        assert state is not None
        assert (state.override_message_tokens, state.override_observation_tokens) == (None, 4_000)


async def test_an_override_for_a_thread_without_messages_is_refused_and_creates_nothing() -> None:
    async with memory({}, FunctionModel(observer_and_reflector)) as om:
        with pytest.raises(InputRejected) as refused:
            await om.override("nobody", message_tokens=2_000)
        assert refused.value.reason == "unknown_thread" and "'nobody'" in refused.value.detail
        assert om.state("nobody") is None
        await om.add_message(message(0, thread="nobody"))
        state = om.state("nobody", "r1")
        assert state is not None and state.override_message_tokens is None


async def test_an_override_the_options_would_refuse_is_raised() -> None:
    async with memory({"observation": {"messageTokens": 2_000, "bufferTokens": 500}},
                      FunctionModel(observer_and_reflector)) as om:
        await om.add_message(message(0))
        with pytest.raises(InputRejected) as refused:
            await om.override("t1", message_tokens=400)  # not above bufferTokens
        assert refused.value.reason == "invalid_override"
        state = om.state("t1", "r1")
        assert state is not None and state.override_message_tokens is None


# -- clear ------------------------------------------------------------------------------------------------------------

async def test_clear_puts_the_conversation_back_and_observe_rebuilds_the_log() -> None:
    model = FunctionModel(observer_and_reflector)
    async with memory({"observation": {"messageTokens": 2_000, "bufferTokens": False}}, model) as om:
        for i in range(8):
            await om.add_message(message(i, role="user" if i % 2 == 0 else "assistant"))
        assert await om.observe("t1", force=True) is True
        await om.settle()
        before = await om.context("t1")
        assert before is not None and "User stated their name is Ada." in before.observations
        assert "t1-m0" not in [m.message_id for m in before.messages]  # observed, so out of the raw context

        await om.clear("t1")
        cleared = await om.context("t1")
        assert cleared is not None and cleared.observations == ""
        assert [m.message_id for m in cleared.messages] == [f"t1-m{i}" for i in range(8)]
        assert len(model.calls("observer")) == 1  # forgetting calls no model
        assert await om.observe("t1") is False  # below the threshold, as before the clear

        assert await om.observe("t1", force=True) is True  # e.g. after changing observation.instruction
        await om.settle()
        rebuilt = await om.context("t1")
        assert rebuilt is not None and "User stated their name is Ada." in rebuilt.observations
        assert len(model.calls("observer")) == 2
        assert "turn 0:" in "\n".join(m.content for m in model.calls("observer")[-1].messages)
        assert "t1-m0" not in [m.message_id for m in rebuilt.messages]


async def test_a_cleared_conversation_past_the_threshold_is_observed_again_at_once() -> None:
    model = FunctionModel(observer_and_reflector)
    async with memory({"observation": {"messageTokens": 100, "bufferTokens": False}}, model) as om:
        for i in range(8):
            await om.add_message(message(i, role="user" if i % 2 == 0 else "assistant"))
            await om.settle()
        calls = len(model.calls("observer"))
        assert calls >= 1
        await om.clear("t1")
        await om.settle()
        assert len(model.calls("observer")) == calls + 1
        assert "turn 0:" in "\n".join(m.content for m in model.calls("observer")[-1].messages)
        rebuilt = await om.context("t1")
        assert rebuilt is not None and "User stated their name is Ada." in rebuilt.observations
        assert "t1-m0" not in [m.message_id for m in rebuilt.messages]


# -- ids --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call", ["observe", "reflect", "clear", "override"])
async def test_an_empty_thread_or_resource_id_is_refused(call: str) -> None:
    async with memory({}, FunctionModel(observer_and_reflector)) as om:
        await om.add_message(message(0))
        command = getattr(om, call)
        with pytest.raises(InputRejected) as empty_thread:
            await command("")
        with pytest.raises(InputRejected) as empty_resource:
            await command("t1", resource_id="")
        with pytest.raises(InputRejected):
            await command("t" * 257)
        assert empty_thread.value.reason == empty_resource.value.reason == "invalid_fields"
        assert "thread_id" in empty_thread.value.detail and "resource_id" in empty_resource.value.detail
        assert om.state("") is None and set(om._states) == {"t1"}
