"""The values recall reads from the content store and the recall index: plain, frozen, and free of I/O.

``ports`` re-exports them (the store and index protocols speak in these types); the pure recall code renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from om_stream.core.messages import Message

__all__ = [
    "GenerationRecord",
    "MessagePage",
    "MessagePosition",
    "MessageRange",
    "ObservationGroup",
    "RecallHit",
    "StoredMessage",
    "ThreadPage",
    "ThreadSummary",
]


@dataclass(frozen=True, order=True)
class MessagePosition:
    """Where a message sorts in its thread: creation time, then arrival order (``seq``), then id."""

    created_at: int  # epoch ms
    seq: int
    message_id: str


@dataclass(frozen=True)
class StoredMessage:
    message: Message
    record_key: str
    seq: int
    tokens: int

    @property
    def position(self) -> MessagePosition:
        return MessagePosition(self.message.created_at_ms, self.seq, self.message.message_id)


@dataclass(frozen=True)
class MessagePage:
    """Messages in the order asked (oldest first, or newest first); ``has_more``: more exist past the last one."""

    messages: tuple[StoredMessage, ...]
    has_more: bool


@dataclass(frozen=True)
class ThreadSummary:
    thread_id: str
    resource_id: str
    title: str | None
    created_at: int  # epoch ms of its first message
    updated_at: int  # epoch ms of its newest message


@dataclass(frozen=True)
class ThreadPage:
    threads: tuple[ThreadSummary, ...]  # most recently updated first
    has_more: bool


@dataclass(frozen=True)
class MessageRange:
    """A contiguous run of one thread's messages, from ``first_message_id`` to ``last_message_id`` inclusive.

    ``first_seq``/``last_seq`` are the record sequence numbers of those messages, when known (ranges stored before
    they were kept have none): they tell a run that directly follows another, so two can become one without
    covering anything neither covered. They take no part in equality: a range is the messages it points at."""

    thread_id: str
    first_message_id: str
    last_message_id: str
    first_seq: int | None = field(default=None, compare=False)
    last_seq: int | None = field(default=None, compare=False)

    def contains(self, other: MessageRange) -> bool:
        """``other`` is inside this run (same thread, its sequence numbers within this one's)."""
        first, last, inner_first, inner_last = self.first_seq, self.last_seq, other.first_seq, other.last_seq
        if self.thread_id != other.thread_id or first is None or last is None or inner_first is None \
                or inner_last is None:
            return False
        return first <= inner_first and inner_last <= last

    def follows(self, earlier: MessageRange) -> bool:
        """This run starts at the message right after ``earlier``'s last one (same thread, next sequence number)."""
        return (self.thread_id == earlier.thread_id and earlier.last_seq is not None
                and self.first_seq == earlier.last_seq + 1)

    def __str__(self) -> str:
        return f"{self.first_message_id}:{self.last_message_id}"


@dataclass(frozen=True)
class ObservationGroup:
    """An observation segment as recall sees it: its text and durable pointers to the messages it came from.

    An observation's ``ranges`` are the runs of messages it observed (one per thread). A reflection's ``ranges``
    are the ranges of every group it replaced, in log order, never collapsed into one span over messages they did
    not cover: recall stays precise however many reflections a log goes through. Runs that directly follow one
    another are joined, so the list stays as short as the gaps it has to show. ``replaced_group_ids`` names the
    groups it condensed.
    """

    group_id: str
    record_key: str
    resource_id: str
    kind: Literal["observation", "reflection"]
    status: Literal["buffered", "active"]
    generation: int
    text: str
    tokens: int
    thread_ids: tuple[str, ...]
    ranges: tuple[MessageRange, ...]
    observed_at: int  # epoch ms of the newest message it covers
    created_at: int
    replaced_group_ids: tuple[str, ...] = ()

    @property
    def range_text(self) -> str:
        """``first:last`` pointers, comma separated when the group covers several runs."""
        return ",".join(str(r) for r in self.ranges)


@dataclass(frozen=True)
class GenerationRecord:
    """The log of one generation as a reflection committed it (the first writer of a generation wins)."""

    record_key: str
    generation: int
    segment_ids: tuple[str, ...]
    reflection_id: str
    replaced_segment_ids: tuple[str, ...]
    observation_tokens: int


@dataclass(frozen=True)
class RecallHit:
    """A point of the recall index that matched a query: a chunk of a message's or an observation group's text."""

    resource_id: str
    record_key: str
    thread_id: str
    kind: Literal["message", "group"]
    source_id: str  # message id or group id
    chunk: int
    text: str
    observed_at: int
    score: float
    range: str | None = None
    cursor: str | None = None
