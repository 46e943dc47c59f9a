"""What ``decide`` asks the runtime to do, as values. The host (``runtime/host.py``) executes them in its one
commit order: ``STORE`` commands (content-store writes; idempotent: ids are deterministic), then the new state to
the state table, then ``PUBLISH`` commands (events, contexts, model requests, index updates, refusals), then the
driver commits the input's offset. Timers are not commands: a record's state holds them (``RecordState.timers``)
and the host hands every state it writes to the runner's timers.

A crash anywhere replays the input; every command tolerates being executed twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from om_stream.core.events import OMEvent
from om_stream.core.messages import Message
from om_stream.core.recall.records import MessageRange

__all__ = [
    "PUBLISH",
    "STORE",
    "ActivateChunks",
    "ClearStored",
    "Command",
    "CommitGeneration",
    "ContextSpec",
    "EmitEvent",
    "ExpireIndex",
    "ExpireStored",
    "IndexForRecall",
    "PersistMessage",
    "PersistRetention",
    "PersistSegment",
    "PersistThreadMetadata",
    "PublishContext",
    "RejectInput",
    "RequestObservation",
    "RequestReflection",
    "SegmentRewrite",
    "ThreadPrior",
]

STORE = 1
PUBLISH = 2


@dataclass(frozen=True)
class PersistMessage:
    phase: ClassVar[int] = STORE
    record_key: str
    message: Message
    seq: int
    tokens: int


@dataclass(frozen=True)
class PersistSegment:
    """Observation text: a buffered chunk, a sync observation, or a (buffered) reflection."""

    phase: ClassVar[int] = STORE
    record_key: str
    segment_id: str
    kind: Literal["observation", "reflection"]
    status: Literal["buffered", "active"]
    generation: int
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
    # observation: the runs of messages it covered, one per thread (what recall reads and indexes); a reflection's
    # come from the groups it replaces, when its generation is committed
    ranges: tuple[MessageRange, ...]


@dataclass(frozen=True)
class ActivateChunks:
    """Buffered chunks join the active log of ``generation`` (in this order, after ``position`` segments)."""

    phase: ClassVar[int] = STORE
    record_key: str
    generation: int
    chunk_ids: tuple[str, ...]
    position: int


@dataclass(frozen=True)
class CommitGeneration:
    """A reflection starts ``generation``: its log is ``segment_ids`` (the reflection first, then kept segments)."""

    phase: ClassVar[int] = STORE
    record_key: str
    generation: int
    segment_ids: tuple[str, ...]
    reflection_id: str
    replaced_segment_ids: tuple[str, ...]
    observation_tokens: int


@dataclass(frozen=True)
class PersistThreadMetadata:
    phase: ClassVar[int] = STORE
    thread_id: str
    resource_id: str
    title: str | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    extracted_values: dict[str, Any] = field(default_factory=dict)
    last_observed_message_id: str | None = None
    working_memory: Any = None  # the thread's new working memory (replaces the stored one); None: unchanged


@dataclass(frozen=True)
class ClearStored:
    phase: ClassVar[int] = STORE
    record_key: str
    epoch: int


@dataclass(frozen=True)
class SegmentRewrite:
    """A stored segment written again without its expired entries: under a new id (a segment is written once per
    id), everything else about it (kind, generations, message ranges) as it was."""

    old_id: str
    new_id: str
    text: str
    tokens: int


@dataclass(frozen=True)
class ExpireStored:
    """Retention's purge of a record's stored content (``core.expiry``): the messages of ``thread_ids`` (of
    ``resource_id``) created before ``before``; the segments ``deletes``; the ``rewrites``; the derived metadata of
    ``threads`` (title, hints, extracted values, working memory, and the thread's listing once no message of it is
    left); the record's cached model results, except those of the cycles ``keep_cycles`` still waits for. The store
    reports what it removed; the receipt (an ``EmitEvent`` naming ``expiry_id``) carries it."""

    phase: ClassVar[int] = STORE
    record_key: str
    resource_id: str
    expiry_id: str
    before: int
    thread_ids: tuple[str, ...]
    deletes: tuple[str, ...] = ()
    rewrites: tuple[SegmentRewrite, ...] = ()
    threads: tuple[str, ...] = ()
    keep_cycles: tuple[str, ...] = ()


@dataclass(frozen=True)
class PersistRetention:
    """A record's own retention window (days; None: the deployment's), kept in the content store so that the
    recall tool, which reads only the store, applies it too."""

    phase: ClassVar[int] = STORE
    record_key: str
    resource_id: str
    days: int | None


@dataclass(frozen=True)
class EmitEvent:
    """Publish a ``data-om-*`` event. ``observations_from``: segment ids whose stored texts, joined by blank
    lines, fill the event's ``observations`` field (activation events name chunks the state has no text for);
    ``expire_before``: the record's retention cutoff, at which those texts are cut (``core.retention``).
    ``expiry_of``: a purge's ``expiry_id``, whose store counts fill a ``data-om-expired`` receipt."""

    phase: ClassVar[int] = PUBLISH
    record_key: str
    event: OMEvent
    event_id: str
    observations_from: tuple[str, ...] = ()
    expire_before: int | None = None
    expiry_of: str | None = None


@dataclass(frozen=True)
class ContextSpec:
    """Everything needed to render a thread's context from the store: ids in order, and the small values."""

    record_key: str
    thread_id: str
    resource_id: str
    version: int
    through_message_id: str | None
    generation: int
    segment_ids: tuple[str, ...]
    segment_boundaries: tuple[int, ...]
    message_ids: tuple[str, ...]  # raw messages for the agent, oldest first (the pinned turn message included)
    message_tokens: int
    observation_tokens: int
    current_task: str | None
    suggested_response: str | None
    thread_title: str | None
    other_threads: tuple[tuple[str, tuple[str, ...]], ...] = ()  # resource scope: other threads' unobserved ids
    obscure_thread_ids: bool = False
    observation_limit: int | None = None  # the log's bound: a renderer condenses a log over it (core.condensation)
    # retention (``core.retention``): entries starting before this are cut from the segments as they are rendered
    # (each segment's entries at or after its ``segment_dated_from`` need no cut); the extracted values are left out
    # once the thread's derived metadata has expired
    expire_before: int | None = None
    segment_dated_from: tuple[int, ...] = ()
    metadata_expired: bool = False
    # the open turn's message when it is pinned before the run of unobserved messages although observed (None: it
    # is not pinned, or it is in the run); ``om.context/v2`` names the raw messages as that pin and that run
    pinned_message_id: str | None = None
    # the incarnation of the record this context was rendered from: a publication that lands after an erase of it
    # is found by the erasure ledger (``runtime/worker/context_sweep.py``)
    epoch: int = 0


@dataclass(frozen=True)
class PublishContext:
    phase: ClassVar[int] = PUBLISH
    spec: ContextSpec


@dataclass(frozen=True)
class ThreadPrior:
    """What a thread of a multi-thread (resource scope) observation already holds, shown to the Observer."""

    thread_id: str
    current_task: str | None = None
    suggested_response: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class RequestObservation:
    """Run the Observer over ``message_ids`` (oldest first) with the current log as previous observations.

    ``prior_*``: the primary thread's metadata; ``thread_priors`` (resource scope): each thread's, in
    ``thread_ids`` order."""

    phase: ClassVar[int] = PUBLISH
    record_key: str
    request_id: str
    cycle_id: str
    attempt: int
    kind: Literal["buffer", "sync", "manual"]
    trigger: Literal["turn-sync", "async-buffer", "manual"]
    resource_id: str
    thread_ids: tuple[str, ...]
    message_ids: tuple[str, ...]
    message_tokens: int
    previous_segment_ids: tuple[str, ...]
    buffered_segment_ids: tuple[str, ...]
    prior_current_task: str | None
    prior_suggested_response: str | None
    prior_thread_title: str | None
    want_hints: bool
    use_offline_model: bool
    deadline_at: int
    thread_priors: tuple[ThreadPrior, ...] = ()
    epoch: int = 0  # the record's incarnation: work of an erased one must write nothing (``core.erasure``)
    expire_before: int | None = None  # retention: entries of the stored texts read for it dated before are cut


@dataclass(frozen=True)
class RequestReflection:
    """Run the Reflector over the log segments ``segment_ids`` of ``generation``."""

    phase: ClassVar[int] = PUBLISH
    record_key: str
    request_id: str
    cycle_id: str
    attempt: int
    kind: Literal["buffer", "sync", "manual"]
    trigger: Literal["turn-sync", "async-buffer", "manual"]
    resource_id: str
    thread_ids: tuple[str, ...]
    generation: int
    segment_ids: tuple[str, ...]
    input_tokens: int
    target_tokens: int
    compression_start_level: int
    guidance: str | None
    use_offline_model: bool
    deadline_at: int
    epoch: int = 0  # the record's incarnation: work of an erased one must write nothing (``core.erasure``)
    expire_before: int | None = None  # retention: entries of the stored texts read for it dated before are cut


@dataclass(frozen=True)
class IndexForRecall:
    """Embed and index an observation segment (and the messages it covers) for semantic recall."""

    phase: ClassVar[int] = PUBLISH
    record_key: str
    resource_id: str
    thread_ids: tuple[str, ...]
    segment_id: str
    epoch: int = 0  # the record's incarnation: an erased one's points must not stay (``core.erasure``)
    messages: bool = True  # index the messages it covers too (a segment rewritten by a purge: only its own text)
    retention_ms: int | None = None  # the record's window: what is past it by the time it is indexed is left out


@dataclass(frozen=True)
class ExpireIndex:
    """Retention's purge of the recall index: the record's points of messages created before ``before`` and of
    observation groups whose newest message is, and every point of the groups ``source_ids`` (deleted or
    rewritten by the purge)."""

    phase: ClassVar[int] = PUBLISH
    record_key: str
    resource_id: str
    thread_ids: tuple[str, ...]
    before: int
    source_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class RejectInput:
    """An input the state machine refuses (it goes to the dead-letter topic with this reason). ``keep_input``
    false: the input must not be copied anywhere (a message past the retention window: dead-lettering it would
    keep the personal data the window removes, on a log that cannot be edited); it is counted and dropped."""

    phase: ClassVar[int] = PUBLISH
    record_key: str
    reason: str
    detail: str
    keep_input: bool = True


Command = (PersistMessage | PersistSegment | ActivateChunks | CommitGeneration | PersistThreadMetadata | ClearStored
           | ExpireStored | PersistRetention | EmitEvent | PublishContext | RequestObservation | RequestReflection
           | IndexForRecall | ExpireIndex | RejectInput)
