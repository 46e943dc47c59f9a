"""The rows an export reads from a content store, as plain frozen values (``ports.ExportSource`` yields them).

They are what the store holds, not what the engine asked it to write: a segment's ``generations`` is every
generation whose log held it (empty: still buffered), and a reflection's ``ranges`` and ``replaced`` are those its
generation's commit gave it. A message is kept as the JSON text the store holds, so an export writes it without
parsing it (an export of a long conversation is mostly message bodies).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from om_stream.core.recall.records import MessageRange

__all__ = ["ExportedMessage", "ExportedSegment", "ExportedThread"]


@dataclass(frozen=True)
class ExportedThread:
    """A thread of the resource: when its messages span, and the metadata the Observer keeps for it."""

    thread_id: str
    created_at: int | None  # epoch ms of its first message (None: no message time is known)
    updated_at: int | None  # epoch ms of its newest message
    title: str | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    last_observed_message_id: str | None = None
    working_memory: Any = None


@dataclass(frozen=True)
class ExportedMessage:
    """A stored message: the record it was taken in by, its place there, its token count, its JSON text, and its
    creation time (what the retention window dates it by)."""

    record_key: str
    seq: int
    tokens: int
    body: str  # the message as the store holds it: ``Message.model_dump_json()``
    created_at: int  # epoch ms


@dataclass(frozen=True)
class ExportedSegment:
    """An observation or reflection segment of a record, as stored."""

    record_key: str
    segment_id: str
    kind: Literal["observation", "reflection"]
    generation: int  # the generation it was computed in
    text: str
    tokens: int
    cycle_id: str
    thread_ids: tuple[str, ...]
    first_message_id: str
    last_message_id: str
    message_ids: tuple[str, ...]
    message_tokens: int
    boundary_at: int
    created_at: int
    generations: tuple[int, ...]  # the generations whose log holds it, ascending; empty: buffered
    ranges: tuple[MessageRange, ...]
    replaced: tuple[str, ...] = ()  # a committed reflection: the segments it condensed
