"""``FunctionModel``: an Observer and a Reflector written as Python functions, driving the embedded memory with no
server, no litellm and no provider."""

from __future__ import annotations

from datetime import timedelta

import pytest

from om_stream import Memory, Message, TextPart
from om_stream.core.events import OMEvent
from om_stream.errors import ModelError
from om_stream.ports import ChatMessage, ChatModel, ChatRequest, ChatResponse, Usage
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.support.scripted_provider import OBSERVED, REFLECTED, START


def message(i: int, text: str, role: str = "user") -> Message:
    return Message(message_id=f"m{i}", thread_id="t1", resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=i), parts=(TextPart(text=text),))


def observer_and_reflector(request: ChatRequest) -> str:
    return REFLECTED if request.role == "reflector" else OBSERVED


async def test_a_function_observes_and_reflects_for_the_memory() -> None:
    model = FunctionModel(observer_and_reflector)
    assert isinstance(model, ChatModel)
    events: list[OMEvent] = []
    async with Memory({"model": "openai/gpt-5-mini"}, model=model, clock=ManualClock(0),
                      on_event=lambda e, _i: events.append(e)) as om:
        await om.add_message(message(1, "My name is Ada and I live in Lisbon."))
        await om.add_message(message(2, "Nice to meet you, Ada.", "assistant"))
        await om.observe("t1", "r1", force=True)
        await om.settle()
        observed = await om.context("t1")
        await om.reflect("t1", "r1")
        await om.settle()
        reflected = await om.context("t1")

    assert observed is not None and "User stated their name is Ada." in observed.observations
    assert reflected is not None and "User is Ada." in reflected.observations
    assert "stated their name" not in reflected.observations
    (observer,) = model.calls("observer")
    assert observer.thread_id == "t1" and observer.resource_id == "r1"
    assert "My name is Ada" in "\n".join(m.content for m in observer.messages)  # the prompt a real model reads
    assert len(model.calls("reflector")) >= 1
    assert any(e.event_type == "data-om-observation-end" for e in events)


async def test_a_function_that_fails_fails_the_cycle_as_a_provider_would() -> None:
    def down(_request: ChatRequest) -> str:
        raise ModelError("the provider is down", kind="server_error")

    model = FunctionModel(down)
    events: list[OMEvent] = []
    async with Memory({"model": "openai/gpt-5-mini"}, model=model, clock=ManualClock(0),
                      on_event=lambda e, _i: events.append(e)) as om:
        await om.add_message(message(1, "My name is Ada."))
        await om.observe("t1", "r1", force=True)
        await om.settle()

    assert model.calls("observer"), "the failing call was recorded too"
    failed = [e for e in events if e.event_type == "data-om-observation-failed"]
    assert failed and "the provider is down" in (failed[0].error or "")


async def test_a_text_answer_gets_an_estimated_usage_and_a_known_zero_cost() -> None:
    request = ChatRequest(role="observer", model="openai/gpt-5-mini", messages=(ChatMessage("user", "y" * 400),))

    named = await FunctionModel(lambda _r: "x" * 40, name="my-function").complete(request)
    unnamed = await FunctionModel(lambda _r: "x" * 40).complete(request)

    assert named == ChatResponse(text="x" * 40, model="my-function", usage=Usage(100, 10), cost_usd=0.0,
                                 finish_reason="stop")
    assert unnamed.model == "openai/gpt-5-mini"


async def test_an_async_function_may_answer_with_a_whole_response() -> None:
    exact = ChatResponse(text=OBSERVED, model="acme/observer", usage=Usage(1000, 500, cached_input_tokens=200),
                         cost_usd=None, provider_metadata={"route": "acme"})

    async def answer(_request: ChatRequest) -> ChatResponse:
        return exact

    model = FunctionModel(answer)
    request = ChatRequest(role="observer", model="x", messages=())
    assert await model.complete(request) is exact
    with pytest.raises(ZeroDivisionError):  # a bug in the test's function is not a model error: it propagates
        await FunctionModel(lambda _r: str(1 / 0)).complete(request)
    assert model.requests == [request]
