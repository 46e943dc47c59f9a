"""Everything that can change a record's OM state arrives as one of these values (ARCHITECTURE §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from om_stream.core.messages import Message
from om_stream.core.recall.records import StoredMessage
from om_stream.core.retention import SegmentText
from om_stream.core.state import RecordState

__all__ = [
    "AttemptOutcome",
    "ClearRecord",
    "CommandReceived",
    "ExpiryDue",
    "Input",
    "MessageAppended",
    "ModelResultArrived",
    "ObserveNow",
    "OverrideThresholds",
    "ReflectNow",
    "ReportProgress",
    "RestoreRecord",
    "ThreadMetadataUpdate",
    "TimerFired",
]


@dataclass(frozen=True)
class MessageAppended:
    message: Message


@dataclass(frozen=True)
class ThreadMetadataUpdate:
    """What one thread of a multi-thread (resource scope) observation learnt: its hints, its title, its
    extracted values (keyed for persistence, like ``ModelResultArrived.extracted_values``) and its working memory."""

    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted_values: dict[str, Any] = field(default_factory=dict)
    working_memory: Any = None


@dataclass(frozen=True)
class AttemptOutcome:
    """A Reflector attempt after which the compression ladder went on: its level, what its answer came to in tokens
    (0: empty or degenerate, not usable), and the stricter level asked next."""

    level: int
    tokens: int
    next_level: int


@dataclass(frozen=True)
class ModelResultArrived:
    """The outcome of an Observer or Reflector call requested by a ``RequestObservation``/``RequestReflection``.

    ``observations`` is the parsed log text (already cleaned by the prompt parser). ``per_thread`` carries the
    per-thread sections of a multi-thread (resource scope) observation, and ``thread_metadata`` each of its
    threads' hints, title and values (by real thread id). On failure ``error`` says why and ``observations`` holds
    any partial output.
    """

    cycle_id: str
    attempt: int
    operation: Literal["observation", "reflection"]
    ok: bool
    observations: str = ""
    per_thread: dict[str, str] | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted_values: dict[str, Any] = field(default_factory=dict)
    extraction_failures: tuple[tuple[str, str], ...] = ()
    # the working memory the working-memory extractor updated (observation.manageWorkingMemory): the full new
    # content, markdown text or a JSON object; None when the cycle leaves it as it is
    working_memory: Any = None
    error: str | None = None
    error_kind: str | None = None  # e.g. "rate_limited", "timeout", "degenerate", "budget_exceeded"
    duration_ms: int = 0
    model: str | None = None
    fallback_model: str | None = None  # set when the offline model answered instead of the configured ones
    # a reflection the engine condensed itself (``core.condensation``) because the Reflector's best answer missed
    # its target: why ("over_target", "unusable", "failed"), how many observations were folded, tokens before
    condensed: Literal["over_target", "unusable", "failed"] | None = None
    folded_observations: int = 0
    condensed_from_tokens: int = 0
    thread_metadata: dict[str, ThreadMetadataUpdate] = field(default_factory=dict)
    # a reflection's attempts that were asked again at a stricter level, in order (the events announce each retry)
    attempts: tuple[AttemptOutcome, ...] = ()


@dataclass(frozen=True)
class TimerFired:
    """A timer came due: ``idle:<operation>`` (activateAfterIdle), ``retry:<what>``, ``deadline:<cycle>``; or
    ``resend:<cycle>``, sent by the runtime when it takes over a record whose calls may have been lost.

    ``due_at``: the due time it fired for (``RecordState.timers``), so that a firing read again after a crash, or
    overtaken by a new schedule of the same timer, is not taken for the newer one. None: a resend (never
    scheduled), or a timer sent by an older version."""

    timer: str
    due_at: int | None = None


@dataclass(frozen=True)
class ObserveNow:
    """Manual ``observe()``: once the unobserved messages reach the message threshold, activate what is buffered
    and observe the rest; below it nothing happens (no Observer call), as in the reference. ``force`` observes
    now whatever the threshold."""

    thread_id: str | None = None
    force: bool = False


@dataclass(frozen=True)
class ReflectNow:
    """Manual ``reflect()``: condense the whole log now, optionally with specific guidance."""

    guidance: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True)
class OverrideThresholds:
    """Per-record overrides, merged field by field into the record's: ``None`` keeps the current value of that
    field. ``replace``: the record's overrides become exactly these (``None`` removes one). Only a record that
    holds a conversation takes overrides. ``retention_days``: a retention window for the record, no longer than
    the deployment's (``core.expiry``)."""

    message_tokens: int | None = None
    observation_tokens: int | None = None
    thread_id: str | None = None
    replace: bool = False
    retention_days: int | None = None


@dataclass(frozen=True)
class ExpiryDue:
    """The record's retention purge is due (its ``retention:purge`` timer fired). Drivers fire the timer; the host
    reads what the purge needs from the content store and hands this over (``runtime/host.py``), as it does a
    clear's conversation: ``cutoff``, the record's stored segments (those of its log and buffered work, and those
    earlier generations left behind), and ``next_message_at``, when its oldest stored message at or after the
    cutoff was created (None: none is left)."""

    cutoff: int
    segments: tuple[SegmentText, ...] = ()
    next_message_at: int | None = None


@dataclass(frozen=True)
class ClearRecord:
    """Forget what OM made of the record's conversation (observations, reflections, buffered work, overrides). The
    conversation stays: its stored messages count as unobserved again, so they are back in the context, the
    thresholds apply to them as to new messages, and the next observation rebuilds the log from them.

    ``conversation``: the record's stored messages, oldest first. Drivers send the command alone; the host reads
    them from the content store before deciding (``runtime/host.py``)."""

    thread_id: str | None = None
    conversation: tuple[StoredMessage, ...] = ()


@dataclass(frozen=True)
class RestoreRecord:
    """The record becomes ``state``: its memory as another deployment held it (``om-stream import``), whose content
    store rows were imported first. Sent by the importer, not by agents; the record's contexts are published as
    they stand (same versions), and the Observer/Reflector calls it had in flight are asked again."""

    state: RecordState


@dataclass(frozen=True)
class ReportProgress:
    """A question, not a change: "how far has this thread's memory caught up through ``through_message_id`` (its
    newest message when None)?" Answered with a ``data-om-progress`` event carrying ``request_id``; the record is
    left as it is.

    ``stored_seq``: the message's sequence number as the content store holds it, for a message the record no
    longer names (observed long ago). Drivers send the question alone; the host reads it from the store before
    deciding when the record cannot place the message (``runtime/host.py``)."""

    thread_id: str
    request_id: str
    through_message_id: str | None = None
    stored_seq: int | None = None


CommandReceived = ObserveNow | ReflectNow | OverrideThresholds | ClearRecord | ReportProgress
Input = MessageAppended | ModelResultArrived | TimerFired | CommandReceived | RestoreRecord | ExpiryDue
