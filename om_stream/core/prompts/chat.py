"""The shape of a model call: chat messages and the attachments forwarded with them, the request a cycle makes and
the answer it gets (all re-exported by ``ports``, where the ``ChatModel`` that takes them is declared).

They live in the core because the cycle flows (``core.cycles``) build the requests and read the answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask

__all__ = ["Attachment", "ChatMessage", "ChatRequest", "ChatResponse", "Usage"]


@dataclass(frozen=True)
class Attachment:
    """An image or file forwarded to the model next to its ``[Image #n: name]`` placeholder."""

    kind: Literal["image", "file"]
    mime_type: str
    url: str | None = None
    data: str | None = None  # base64
    filename: str | None = None


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class ChatRequest:
    """One call to a chat model on behalf of OM. ``task`` is the structured view of the same call, which the
    offline deterministic model answers from; real models read ``messages``. The ``reader`` and ``judge`` roles are
    the benchmarks' calls (``om_stream.eval``): an answer written with OM's context, and its grading."""

    role: Literal["observer", "reflector", "extractor", "reader", "judge"]
    model: str
    messages: tuple[ChatMessage, ...]
    task: ObserverTask | ReflectorTask | None = None
    temperature: float | None = None
    max_output_tokens: int | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    response_schema: dict[str, Any] | None = None  # structured output (schema extractors)
    timeout_s: float | None = None
    thread_id: str | None = None
    resource_id: str | None = None


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.cached_input_tokens + other.cached_input_tokens,
                     self.reasoning_tokens + other.reasoning_tokens)


@dataclass(frozen=True)
class ChatResponse:
    text: str
    model: str
    usage: Usage = Usage()
    cost_usd: float | None = None  # None: unknown (a model missing from the price map), never a silent zero
    provider_metadata: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None
