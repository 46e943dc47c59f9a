"""The seams between om-stream's pure core and the world: protocols only, no implementations.

Adapters implement these (``om_stream/adapters``); the runtime wires them together. Wrappers (metrics, retries,
timeouts, fallbacks) implement the same protocols around another implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from om_stream.core.commands import ActivateChunks, CommitGeneration, PersistSegment, PersistThreadMetadata
from om_stream.core.messages import Message
from om_stream.core.prompts.chat import Attachment, ChatMessage
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask

__all__ = [
    "Attachment",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "Clock",
    "ContentStore",
    "Embedder",
    "TextTokenCounter",
    "ThreadMetadata",
    "Usage",
]


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time in epoch milliseconds. The core never reads a clock; the runtime passes ``now`` in."""

    def now_ms(self) -> int: ...


@runtime_checkable
class TextTokenCounter(Protocol):
    """Exact token count of a text for one tokenizer. Deterministic: the same text always gives the same count."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension, for semantic recall."""

    @property
    def model_id(self) -> str:
        """Stable identifier of the embedding model; vectors of different models never share a collection."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...


@dataclass(frozen=True)
class ChatRequest:
    """One call to a chat model on behalf of OM. ``task`` is the structured view of the same call, which the
    offline deterministic model answers from; real models read ``messages``."""

    role: Literal["observer", "reflector", "extractor"]
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


@runtime_checkable
class ChatModel(Protocol):
    """Reaches a chat model. Raises ``om_stream.errors.ModelError`` (or a subclass) when it cannot answer."""

    async def complete(self, request: ChatRequest) -> ChatResponse: ...


@dataclass(frozen=True)
class ThreadMetadata:
    thread_id: str
    resource_id: str | None = None
    title: str | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    last_observed_message_id: str | None = None


@runtime_checkable
class ContentStore(Protocol):
    """Message bodies and observation texts, by id. Every write is idempotent (ids are deterministic).

    Structure (which segments form a generation's log, which chunks are buffered) is mirrored here for audit and
    recall; the record's control state (table) is the source of truth for decisions.
    """

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None: ...

    async def get_messages(self, message_ids: Sequence[str]) -> list[Message]:
        """The messages in the order asked; ids not found are left out."""
        ...

    async def put_segment(self, segment: PersistSegment) -> None: ...

    async def get_segment_texts(self, segment_ids: Sequence[str]) -> dict[str, str]: ...

    async def activate_chunks(self, command: ActivateChunks) -> None: ...

    async def commit_generation(self, command: CommitGeneration) -> None: ...

    async def put_thread_metadata(self, command: PersistThreadMetadata) -> None: ...

    async def get_thread_metadata(self, thread_id: str) -> ThreadMetadata: ...

    async def clear(self, record_key: str, epoch: int) -> None: ...

    async def close(self) -> None: ...
