"""``Memory(model="openai/gpt-5-mini")``: a model name is accepted as the options accept one (issue 30 item 7), and
anything that is neither a name nor a ChatModel is refused at construction with what to pass."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from om_stream import Memory
from om_stream.core.model_spec import ModelByInputTokens, model_name
from om_stream.errors import ConfigError
from om_stream.testing import FunctionModel
from om_stream.testing.fake_openai import FakeOpenAI, Reply

OBSERVED = "<observations>\nDate: Mar 1, 2026\n* 🔴 (09:00) User stated they are Maya.\n</observations>"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=lambda _request: Reply(OBSERVED)) as server:
        monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server


def _message(index: int) -> dict[str, object]:
    return {"message_id": f"m{index}", "thread_id": "t1", "resource_id": "u1", "role": "user",
            "created_at": f"2026-03-01T09:0{index}:00Z",
            "parts": [{"type": "text", "text": "Hi, I'm Maya and I am moving to Lyon in September this year."}]}


async def test_a_model_name_observes_through_that_model(fake: FakeOpenAI) -> None:
    failed: list[object] = []
    async with Memory({"observation": {"messageTokens": 30, "bufferTokens": False}}, model="openai/gpt-5-mini",
                      on_event=lambda e: failed.append(e) if e.event_type.endswith("-failed") else None) as om:
        assert (om.config.observer_model, om.config.reflector_model) == ("openai/gpt-5-mini",) * 2
        for index in range(1, 4):
            await om.add_message(_message(index))
        await om.settle()
        context = await om.context("t1")
    assert failed == []
    assert fake.requests and {r.model for r in fake.requests} == {"gpt-5-mini"}
    assert context is not None and "User stated they are Maya." in context.observations


@pytest.mark.parametrize(("model", "observer"), [
    (ModelByInputTokens(up_to={10_000: "openai/gpt-5-mini", 200_000: "openai/gpt-5"}), "openai/gpt-5-mini"),
    ({"upTo": {10_000: "openai/gpt-5-mini"}}, "openai/gpt-5-mini"),
    ([{"model": "openai/gpt-5-mini", "maxRetries": 1}, {"model": "openai/gpt-5"}], "openai/gpt-5-mini"),
])
def test_a_selector_or_a_fallback_list_is_taken_as_the_options_take_it(model: object, observer: str,
                                                                        fake: FakeOpenAI) -> None:
    memory = Memory({}, model=model)  # type: ignore[arg-type]
    assert model_name(memory.config.observer_model) == model_name(memory.config.reflector_model) == observer


@pytest.mark.parametrize(("options", "model", "says"), [
    ({}, 42, "got a int"),
    ({}, {"upTo": {}}, "upTo"),
    ({}, "  ", "empty name"),
    ({"model": "openai/gpt-4o"}, "openai/gpt-5-mini", "name two models"),
    ({"observation": {"model": "openai/gpt-4o"}}, "openai/gpt-5-mini", "observation.model"),
])
def test_what_cannot_serve_is_refused_at_construction(options: dict[str, object], model: object, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Memory(options, model=model)  # type: ignore[arg-type]


async def test_a_chat_model_is_used_as_given() -> None:
    model = FunctionModel(lambda _request: OBSERVED)
    async with Memory({"observation": {"messageTokens": 30}}, model=model) as om:
        assert om.model is model
