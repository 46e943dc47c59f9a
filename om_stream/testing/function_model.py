"""``FunctionModel``: a chat model whose answers come from a Python function, in-process (pydantic-ai's idea).

It implements the ``ChatModel`` port and nothing more: no HTTP, no litellm, no provider, no key. Use it when a test
(or a notebook) needs an Observer, Reflector or extractor that answers exactly so; use
:class:`~om_stream.testing.fake_openai.FakeOpenAI` instead when what is under test is how om-stream reaches a
provider (the gateway, litellm's arguments, HTTP errors and retries)::

    def answer(request: ChatRequest) -> str:
        if request.role == "reflector":
            return "<observations>\\n* 🔴 User is Ada.\\n</observations>"
        return "<observations>\\nDate: Jan 5, 2026\\n* 🔴 (09:00) User stated their name is Ada.\\n</observations>"

    model = FunctionModel(answer)
    async with Memory(model=model) as om:
        ...
    assert model.requests[0].role == "observer"

The function gets the :class:`~om_stream.ports.ChatRequest` the cycle built (its ``messages`` are what a real model
would read; ``task`` is the same call as data) and returns the answer's text or a whole
:class:`~om_stream.ports.ChatResponse`, directly or from a coroutine. To make a call fail, it raises
:class:`~om_stream.errors.ModelError` (or a subclass), as every ``ChatModel`` does; anything else it raises is a
bug in the test and propagates unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from om_stream.ports import ChatRequest, ChatResponse, Usage
from om_stream.testing.fake_openai import estimate_tokens

__all__ = ["FunctionModel", "ModelFunction"]

_Answer: TypeAlias = str | ChatResponse
ModelFunction: TypeAlias = Callable[[ChatRequest], _Answer | Awaitable[_Answer]]


class FunctionModel:
    """A ``ChatModel`` answering every call with ``function(request)``.

    A text answer becomes a ``ChatResponse`` named ``name`` (default: the model the request asked for), with usage
    estimated at four characters a token (prompt and answer) and a cost of ``cost_usd`` (zero by default: it is
    known, and nothing was paid). A ``ChatResponse`` answer is returned as it is. Every request is kept in
    :attr:`requests`, in call order, whether the function answered or raised.
    """

    def __init__(self, function: ModelFunction, *, name: str | None = None, cost_usd: float | None = 0.0) -> None:
        self.function = function
        self.name = name
        self.cost_usd = cost_usd
        self.requests: list[ChatRequest] = []

    def __repr__(self) -> str:
        return f"FunctionModel({self.function!r})"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        answer = self.function(request)
        if inspect.isawaitable(answer):  # an async function: the union of the signature, not a capability probe
            answer = await answer
        if isinstance(answer, ChatResponse):
            return answer
        prompt = "\n".join(message.content for message in request.messages)
        return ChatResponse(text=answer, model=self.name or request.model or "function",
                            usage=Usage(estimate_tokens(prompt), estimate_tokens(answer)), cost_usd=self.cost_usd,
                            finish_reason="stop")

    def calls(self, role: str) -> list[ChatRequest]:
        """The requests made for one role (``observer``, ``reflector`` or ``extractor``), in call order."""
        return [request for request in self.requests if request.role == role]
