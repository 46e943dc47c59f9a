"""How litellm's errors are classified (issue 30 item 6): a provider's refusal of an input longer than the model's
context window is ``input_too_large``, like a route's own overflow, not a plain client error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from om_stream.adapters.gateway.resilience import is_transient
from om_stream.adapters.litellm_model import LiteLLMModel
from om_stream.errors import ModelError
from om_stream.ports import ChatMessage, ChatRequest
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI

_OVER = ("This model's maximum context length is 128000 tokens. However, your messages resulted in 190512 "
         "tokens. Please reduce the length of the messages.")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _request() -> ChatRequest:
    return ChatRequest(role="observer", model="openai/gpt-5-mini",
                       messages=(ChatMessage(role="user", content="hello"),))


@pytest.mark.parametrize("reply", [
    ErrorReply(400, _OVER, "invalid_request_error", code="context_length_exceeded", param="messages"),
    ErrorReply(400, "Input tokens exceed the configured limit of 272000 tokens.", "invalid_request_error",
               code="context_length_exceeded"),
])
async def test_a_context_length_refusal_is_input_too_large(fake: FakeOpenAI, reply: ErrorReply) -> None:
    fake.enqueue(reply)
    model = LiteLLMModel("openai/gpt-5-mini", api_base=fake.base_url, api_key="k")
    with pytest.raises(ModelError) as caught:
        await model.complete(_request())
    assert caught.value.kind == "input_too_large"
    assert caught.value.status_code == 400
    assert not is_transient(caught.value)


async def test_another_bad_request_stays_a_client_error(fake: FakeOpenAI) -> None:
    fake.enqueue(ErrorReply.bad_request("messages: invalid"))
    model = LiteLLMModel("openai/gpt-5-mini", api_base=fake.base_url, api_key="k")
    with pytest.raises(ModelError) as caught:
        await model.complete(_request())
    assert caught.value.kind == "client_error"
