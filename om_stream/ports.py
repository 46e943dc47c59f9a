"""The seams between om-stream's pure core and the world: protocols only, no implementations.

Adapters implement these (``om_stream/adapters``); the runtime wires them together. Wrappers (metrics, retries,
timeouts, fallbacks) implement the same protocols around another implementation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from om_stream.core.commands import (
    ActivateChunks,
    CommitGeneration,
    ExpireStored,
    PersistRetention,
    PersistSegment,
    PersistThreadMetadata,
)
from om_stream.core.config import ResolvedConfig
from om_stream.core.erasure import ErasureCounts, PartRecord, StrayWrites
from om_stream.core.export_rows import ExportedMessage, ExportedSegment, ExportedThread
from om_stream.core.messages import Message
from om_stream.core.prompts.chat import Attachment, ChatMessage, ChatRequest, ChatResponse, Usage
from om_stream.core.recall.records import (
    GenerationRecord,
    MessagePage,
    MessagePosition,
    MessageRange,
    ObservationGroup,
    RecallHit,
    StoredMessage,
    ThreadPage,
    ThreadSummary,
)
from om_stream.core.retention import ExpiryCounts, SegmentText

__all__ = [
    "Attachment",
    "AttachmentAwareModel",
    "BatchedWrites",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "Clock",
    "ConfigRoutedModel",
    "ContentStore",
    "CycleResults",
    "Embedder",
    "ErasableStore",
    "ExpiringStore",
    "ExportSource",
    "ExportedMessage",
    "ExportedSegment",
    "ExportedThread",
    "GenerationRecord",
    "GroupQueries",
    "MessagePage",
    "MessagePosition",
    "MessageQueries",
    "MessageRange",
    "ObservationGroup",
    "RecallHit",
    "RecallIndex",
    "RecallPoint",
    "RecallPointSource",
    "RecallStore",
    "RetryingModel",
    "StoreOutages",
    "StoredMessage",
    "ThreadMetadata",
    "ThreadPage",
    "ThreadQueries",
    "ThreadSummary",
    "Usage",
]


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time in epoch milliseconds. The core never reads a clock; the runtime passes ``now`` in."""

    def now_ms(self) -> int: ...


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


@runtime_checkable
class ChatModel(Protocol):
    """Reaches a chat model. Raises ``om_stream.errors.ModelError`` (or a subclass) when it cannot answer."""

    async def complete(self, request: ChatRequest) -> ChatResponse: ...


@runtime_checkable
class ConfigRoutedModel(ChatModel, Protocol):
    """A chat model that routes each role (Observer, Reflector, extractor) as an OM configuration says: the cycle
    runner binds it to its configuration before the first call (the gateway; explicit routes win)."""

    def bind_config(self, config: ResolvedConfig) -> ChatModel: ...


@runtime_checkable
class AttachmentAwareModel(ChatModel, Protocol):
    """A chat model that says whether the model serving a request reads images and files
    (``observeAttachments: 'auto'`` forwards them only then). A model that does not declare this gets them."""

    def accepts_attachments(self, request: ChatRequest) -> bool: ...


@runtime_checkable
class RetryingModel(ChatModel, Protocol):
    """A chat model that retries failed calls itself and counts the retries (the gateway): the embedded runner
    reports them beside its own (``Memory.retries``, the replay report's ``retries``)."""

    @property
    def retry_count(self) -> int: ...


@dataclass(frozen=True)
class ThreadMetadata:
    thread_id: str
    resource_id: str | None = None
    title: str | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    last_observed_message_id: str | None = None
    # the working memory the Observer keeps (observation.manageWorkingMemory): markdown text or a JSON object
    working_memory: Any = None


@runtime_checkable
class ErasableStore(Protocol):
    """Erasure, which every content store must offer: removing a subject's rows for good, reading back that none is
    left, and the erasure ledger (``core.erasure``). Every removal is scoped by the tenant: a row is only removed
    when it belongs to ``resource_id`` (thread and record keys are the agents' ids; another tenant's rows under
    the same key are never touched). Each removal returns what it removed, counted before it was removed, and
    drops what the store caches of it. Removals are idempotent: a second one removes (and counts) nothing."""

    async def erase_thread(self, resource_id: str, thread_id: str) -> ErasureCounts:
        """The thread's conversation: its messages, and its thread records (title, hints, extracted values,
        working memory, the resource's listing of it)."""
        ...

    async def erase_record(self, record_key: str, resource_id: str) -> ErasureCounts:
        """What OM made of a record of ``resource_id``: its observation segments and groups, its generations, the
        model results cached for its requests, and its record row. Nothing when the record is another tenant's."""
        ...

    async def erase_resource(self, resource_id: str) -> ErasureCounts:
        """Everything of a resource: every thread's conversation and records, and every record of it (a record is
        the resource's when its row names it)."""
        ...

    async def erase_writes(self, writes: StrayWrites) -> ErasureCounts:
        """Remove what one refused batch wrote for a record of ``writes.resource_id`` (``runtime.erasure``): its
        messages and segments by id, its generations of the record by number, and the metadata of the threads it
        wrote (each only where it belongs to that resource). A thread left with no message loses its listing."""
        ...

    async def resource_of(self, record_key: str) -> str | None:
        """The resource a record (or a thread: in thread scope a thread is its record) belongs to, if the store
        knows it: what an erase of a thread no worker holds a record of reads to scope its sweep."""
        ...

    async def holds(self, resource_id: str, thread_id: str | None = None) -> bool:
        """Whether anything of the subject is left (a message, a thread record, a record of it): read after a
        sweep, before an erase's receipt says it is done."""
        ...

    async def erasure_part(self, erase_id: str, part: int) -> PartRecord | None:
        """The ledger's row of one part of an erase, if it was written."""
        ...

    async def put_erasure_part(self, record: PartRecord, ttl_s: int) -> None:
        """Write (or replace) a part's row; it expires after ``ttl_s`` seconds."""
        ...

    async def mark_erased(self, record_digest: str, epoch_through: int, ttl_s: int) -> None:
        """Note that the record (``core.erasure.record_digest``) was erased up to ``epoch_through``: work asked
        for by that incarnation (a model call, indexing) must not write anything afterwards. Keeps the highest."""
        ...

    async def erased_through(self, record_digest: str) -> int | None:
        """The epoch up to which a record was erased (None: not erased, or the note expired)."""
        ...


@runtime_checkable
class ExpiringStore(Protocol):
    """Retention (``core.expiry``), which every content store must offer: what a record's purge reads, the purge
    itself, and each record's own window. Removals are scoped by the tenant like an erase's, idempotent (a purge
    replayed removes and counts nothing more), and drop what the store caches of what they remove."""

    async def segment_texts_of(self, record_key: str, resource_id: str) -> list[SegmentText]:
        """Every stored segment of the record (of ``resource_id``): its log and buffered work, and what earlier
        generations left behind for recall."""
        ...

    async def next_message_at(self, resource_id: str, thread_ids: Sequence[str], at_or_after: int) -> int | None:
        """When the oldest stored message of these threads created at or after ``at_or_after`` was created."""
        ...

    async def expire(self, command: ExpireStored) -> ExpiryCounts:
        """The purge (``ExpireStored``): the threads' messages created before ``before``, the segments to delete,
        the rewrites (a copy under the new id with the new text, then the old row deleted), the derived metadata
        of ``threads`` (and a thread's listing once no message of it is left), the record's cached results but
        those of ``keep_cycles``. A store that keeps a file leaves no copy of what it removed in it."""
        ...

    async def put_retention(self, command: PersistRetention) -> None:
        """Keep (or remove, ``days`` None) a record's own retention window."""
        ...

    async def retention_of(self, record_key: str) -> int | None:
        """A record's own retention window in days (None: the deployment's); what the recall tool reads."""
        ...


@runtime_checkable
class ContentStore(ErasableStore, ExpiringStore, Protocol):
    """Message bodies and observation texts, by id. Every write is idempotent (ids are deterministic).

    Structure (which segments form a generation's log, which chunks are buffered) is mirrored here for audit and
    recall; the record's control state (table) is the source of truth for decisions.
    """

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None: ...

    async def get_messages(self, message_ids: Sequence[str], *, resource_id: str | None = None) -> list[Message]:
        """The messages in the order asked; ids not found are left out. ``resource_id`` restricts the answer to
        one tenant's messages (message ids are only unique within a resource); the runtime always gives it."""
        ...

    async def get_record_messages(self, record_key: str, *, resource_id: str, thread_ids: Sequence[str],
                                  through_seq: int) -> list[StoredMessage]:
        """The messages stored under ``record_key`` (``put_message``) in the threads ``thread_ids`` of
        ``resource_id``, with ``seq <= through_seq``, in ``seq`` order: the conversation a clear gives back to the
        record as unobserved."""
        ...

    async def put_segment(self, segment: PersistSegment) -> None: ...

    async def get_segment_texts(self, segment_ids: Sequence[str]) -> dict[str, str]: ...

    async def activate_chunks(self, command: ActivateChunks) -> None: ...

    async def commit_generation(self, command: CommitGeneration) -> None: ...

    async def put_thread_metadata(self, command: PersistThreadMetadata) -> None: ...

    async def get_thread_metadata(self, thread_id: str) -> ThreadMetadata: ...

    async def clear(self, record_key: str, epoch: int) -> None: ...

    async def start(self) -> None:
        """Connect and check the store is usable, so a worker fails at start-up rather than on its first write:
        Cassandra is reachable and its keyspace holds every migration this version ships; a SQLite file is open
        with its schema created or upgraded; the in-memory store needs nothing. Idempotent. Raises
        :class:`~om_stream.errors.StorageError` saying what is wrong and what fixes it (the contact points,
        ``om-stream migrate``). An operation on a store not started starts it."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class ExportSource(Protocol):
    """A content store that reads back everything it holds of one resource, a page at a time, so an export of a
    long conversation never holds it whole (``om-stream export``). Importing needs nothing more than the
    :class:`ContentStore` writes: an import replays the writes the engine made.

    Each iterator reads pages lazily (a page of a few hundred rows at a time); rows written while it runs may or may
    not be seen. ``resource_threads`` and ``resource_messages`` are in a stable order (thread, then each thread's
    messages in their order); ``record_segments`` in the store's order."""

    def resource_threads(self, resource_id: str) -> AsyncIterator[ExportedThread]: ...

    def resource_messages(self, resource_id: str) -> AsyncIterator[ExportedMessage]: ...

    async def record_epoch(self, record_key: str) -> int:
        """How many times the record's observations were cleared (0: never, or no such record)."""
        ...

    def record_segments(self, record_key: str) -> AsyncIterator[ExportedSegment]:
        """Every stored segment of the record (the current epoch's: a clear forgets the others)."""
        ...

    async def record_generations(self, record_key: str) -> list[GenerationRecord]:
        """The committed generations of the record's current epoch, oldest first."""
        ...


@runtime_checkable
class BatchedWrites(Protocol):
    """A content store whose writes can be committed together: the SQLite store, where each commit has a cost of
    its own (a transaction, a WAL append) that one commit per input batch pays once."""

    def batched_writes(self) -> AbstractAsyncContextManager[None]:
        """Within the block, this task's writes are held and committed together, in the order made, as one
        transaction when the block ends (a failure: none of them is committed, the error leaves the block). A read
        in the block commits the writes held before it, so every read sees every write made before it. A write
        method returns once its write is held; what it caches of the write is cached after the commit."""
        ...


@runtime_checkable
class CycleResults(Protocol):
    """Model results kept by request key, so a request asked again after a crash or a rebalance reuses the stored
    answer instead of paying the model twice; a lease says a worker is calling the model for that key right now.

    Keys are opaque, non-empty strings (the request id plus a content digest). Results expire after the store's
    result TTL (Cassandra: ``cassandra.cycle_result_ttl_s``, counted from the whole second a write lands in, so up to
    a second sooner), leases after their ``lease_s``; neither expiry nor a stored result touches the other. A
    claim looks at leases only, so a caller reads first, reads again after a granted claim (the previous holder
    may have stored its answer in between), and only then calls the model::

        payload = await results.get_result(key)
        if payload is None and await results.claim(key, me, lease_s) is None:
            payload = await results.get_result(key) or await call_the_model()
            await results.put_result(key, payload, record_key=record)

    The content stores implement it on their own connection: started and closed as the content store.
    """

    async def get_result(self, key: str) -> bytes | None:
        """The payload stored under ``key``; None when there is none (never stored, or expired)."""
        ...

    async def put_result(self, key: str, payload: bytes, *, record_key: str) -> None:
        """Store ``payload`` under ``key`` (replacing an earlier one): once this returns, every reader sees it.
        A lease on ``key`` is left to expire (callers read the result before they claim, so it answers them
        whatever the lease). ``record_key``: the record that asked (an erase of the record removes its results:
        they hold its text)."""
        ...

    async def drop_result(self, key: str) -> None:
        """Remove the result stored under ``key`` (a result written after its record was erased)."""
        ...

    async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
        """Take or renew the lease on ``key`` for ``lease_s`` seconds (> 0). None when ``owner`` now holds it
        (there was no lease, an expired one, or its own, which is renewed); otherwise the owner id of the other,
        live holder, and nothing changes. Atomic where workers race: of several owners claiming a free key,
        exactly one is granted. A lease lives at least ``lease_s`` (Cassandra counts whole seconds: up to ~2 s
        more)."""
        ...


class StoreOutages(Protocol):
    """Told by a content store of each of its operations that fails for want of the store itself (nodes down, a
    consistency level out of reach, timeouts: the errors it retries) and of each that succeeds, so that the worker
    can say which store is down and why, and judge a stall by it. The store calls it from the event loop, once per
    attempt: it must be cheap."""

    def failing(self, store: str, reason: str) -> None:
        """An operation on ``store`` failed and is being retried; ``reason`` says why, without data."""
        ...

    def succeeded(self, store: str) -> None:
        """An operation on ``store`` succeeded."""
        ...


# -- recall: reading back what the content store holds ---------------------------------------------------------------
#
# Every recall read names the tenant (``resource_id``): a store answers only with rows of that resource, so access
# control does not depend on the caller filtering correctly.


@runtime_checkable
class MessageQueries(Protocol):
    async def get_message(self, resource_id: str, message_id: str) -> StoredMessage | None: ...

    async def list_thread_messages(self, resource_id: str, thread_id: str, *, limit: int,
                                   after: MessagePosition | None = None, before: MessagePosition | None = None,
                                   newest_first: bool = False) -> MessagePage:
        """Up to ``limit`` messages of a thread strictly between ``after`` and ``before``, from the oldest (or
        newest) end of that window."""
        ...

    async def count_thread_messages(self, resource_id: str, thread_id: str) -> int: ...


@runtime_checkable
class ThreadQueries(Protocol):
    async def get_thread(self, resource_id: str, thread_id: str) -> ThreadSummary | None:
        """The thread if it holds messages of ``resource_id``; None otherwise (absent or another tenant's)."""
        ...

    async def list_threads(self, resource_id: str, *, offset: int = 0, limit: int = 20,
                           created_after: int | None = None, created_before: int | None = None) -> ThreadPage:
        """Threads of a resource, most recently updated first, optionally by creation time (exclusive bounds)."""
        ...


@runtime_checkable
class GroupQueries(Protocol):
    async def get_groups(self, resource_id: str, group_ids: Sequence[str]) -> dict[str, ObservationGroup]:
        """The groups of ``resource_id`` among ``group_ids`` (others, and forgotten ones, are left out)."""
        ...

    async def list_groups(self, record_key: str) -> list[ObservationGroup]:
        """Every stored group of a record, oldest first."""
        ...

    async def get_generation(self, record_key: str, generation: int) -> GenerationRecord | None: ...


@runtime_checkable
class RecallStore(ContentStore, MessageQueries, ThreadQueries, GroupQueries, Protocol):
    """A content store the recall tool can browse (the SQLite and Cassandra stores)."""


@dataclass(frozen=True)
class RecallPoint:
    """One vector of the recall index: a chunk of a message's or an observation group's text."""

    resource_id: str  # the tenant: every query is filtered by it
    record_key: str
    thread_id: str
    kind: Literal["message", "group"]
    source_id: str  # message id or group id
    chunk: int
    text: str
    observed_at: int  # epoch ms
    vector: tuple[float, ...]
    range: str | None = None  # a group's message ranges (``first:last``, comma separated)
    cursor: str | None = None  # a message id to start browsing from
    author_keys: tuple[str, ...] = ()  # a message's author (``Author.keys``): what a search by author matches


@runtime_checkable
class RecallIndex(Protocol):
    """Vectors for semantic recall, for one embedding model. Point ids are derived from the point's identity, so
    upserting the same point twice stores it once."""

    async def upsert(self, points: Sequence[RecallPoint]) -> None: ...

    async def query(self, vector: Sequence[float], *, resource_id: str, limit: int, thread_id: str | None = None,
                    observed_after: int | None = None, observed_before: int | None = None,
                    author: str | None = None) -> list[RecallHit]:
        """The ``limit`` nearest points of ``resource_id`` (never another tenant's), best first. ``author``: only
        the points of that author's messages (``core.messages.author_query_keys``)."""
        ...

    async def delete_record(self, resource_id: str, record_key: str) -> None: ...

    async def delete_points(self, points: Sequence[RecallPoint]) -> None:
        """Delete exactly these points (by their identity): what one indexing wrote, undone."""
        ...

    async def erase(self, resource_id: str, thread_id: str | None = None) -> int:
        """Delete every point of a resource, or of one of its threads; returns how many there were. Local storage
        keeps no copy of them afterwards (its file is compacted)."""
        ...

    async def expire(self, resource_id: str, record_key: str, before: int, source_ids: Sequence[str] = ()) -> int:
        """Retention: delete the record's points observed before ``before`` (a message's creation, a group's newest
        message) and every point of the groups ``source_ids``; returns how many there were. Local storage keeps no
        copy of them afterwards."""
        ...

    async def count(self, resource_id: str | None = None, thread_id: str | None = None) -> int:
        """Points stored: all, a tenant's, or one thread's of a tenant."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class RecallPointSource(Protocol):
    """A recall index that lists what it holds of one resource (an export carries the points' payloads, not their
    vectors: an import embeds the texts again with its own embedder)."""

    def resource_points(self, resource_id: str) -> AsyncIterator[RecallPoint]:
        """The resource's points, a page at a time, each with an empty ``vector``."""
        ...
