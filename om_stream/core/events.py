"""Payloads of the ``data-om-*`` lifecycle events of the seeds, as the state machine emits them.

Field names are the seeds' (camelCase on the wire, snake_case in Python). Where the reference implementation
deviates from its documentation (reference §5 item 10) om-stream follows the documentation:
``data-om-buffering-end.bufferedTokens`` is this cycle's output, failed events carry partial observations when there
are any, and a cycle's start, end and failed events share one ``cycleId`` (a reflection retried at a stricter
compression level is, as in the reference, a failed event and a new start under a new ``cycleId`` per retry).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "EVENT_TYPES",
    "ActivationEvent",
    "BufferedChunk",
    "BufferingEndEvent",
    "BufferingFailedEvent",
    "BufferingStartEvent",
    "CondensationEvent",
    "ErasedCounts",
    "ErasedEvent",
    "ExpiredCounts",
    "ExpiredEvent",
    "ExtractionFailure",
    "MarkerConfig",
    "MessageMark",
    "OMEvent",
    "ObservationEndEvent",
    "ObservationFailedEvent",
    "ObservationStartEvent",
    "ProgressEvent",
    "RunningCycle",
    "StatusEvent",
    "TemporalMarkerEvent",
    "ThreadUpdateEvent",
    "ThroughMessage",
    "UnobservedMessages",
]

OperationType = Literal["observation", "reflection"]


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel,
                              serialize_by_alias=True)


class MarkerConfig(_Payload):
    """``ObservationMarkerConfig``: the thresholds in force when the event was produced."""

    message_tokens: int
    observation_tokens: int
    scope: Literal["thread", "resource"]
    activate_after_idle: int | Literal["auto"] | None = None


class ExtractionFailure(_Payload):
    slug: str
    error: str


class OMEvent(_Payload):
    """Base of every lifecycle event. ``event_type`` is the ``data-om-*`` name (also the CloudEvents type)."""

    event_type: ClassVar[str]
    record_id: str
    thread_id: str


class _Window(_Payload):
    tokens: int
    threshold: int


class _ActiveWindows(_Payload):
    messages: _Window
    observations: _Window


class _BufferedObservations(_Payload):
    chunks: int
    message_tokens: int
    projected_message_removal: int
    observation_tokens: int
    status: Literal["idle", "running", "complete"]


class _BufferedReflection(_Payload):
    input_observation_tokens: int
    observation_tokens: int
    status: Literal["idle", "running", "complete"]


class _BufferedWindows(_Payload):
    observations: _BufferedObservations
    reflection: _BufferedReflection


class _Windows(_Payload):
    active: _ActiveWindows
    buffered: _BufferedWindows


class MessageMark(_Payload):
    """A message of the thread and its place in the record: ``seq`` numbers the record's messages in arrival
    order (temporal markers included), so every message of a thread up to ``seq`` is at or before it."""

    message_id: str | None = Field(None, description="null when the record does not name it: in resource scope a "
                                                     "log segment covering several threads names only its newest "
                                                     "message")
    seq: int = Field(ge=0)


class UnobservedMessages(_Payload):
    messages: int = Field(ge=0)
    tokens: int = Field(ge=0)


class BufferedChunk(_Payload):
    """An observation chunk computed in the background, waiting for activation (its messages stay unobserved)."""

    cycle_id: str
    first_message_id: str
    last_message_id: str
    first_seq: int
    last_seq: int
    messages: int
    message_tokens: int
    observation_tokens: int


class RunningCycle(_Payload):
    """An Observer or Reflector call in flight."""

    cycle_id: str
    kind: Literal["buffer", "sync", "manual"]
    operation_type: OperationType
    attempt: int
    started_at: str
    tokens: int = Field(description="observation: message tokens it covers; reflection: log tokens it condenses")
    messages: int = Field(description="messages it covers (0 for a reflection)")
    first_message_id: str | None = None
    last_message_id: str | None = None
    blocking: bool = Field(description="contexts wait for it")


class ThroughMessage(_Payload):
    """Where one message stands, and whether memory has settled through it (see ``core/progress.py``)."""

    message_id: str | None = Field(None, description="null: the thread has no message yet")
    seq: int | None = Field(None, description="null when the record does not name it (observed long ago)")
    status: Literal["unknown", "unobserved", "observing", "buffered", "observed"] = Field(
        description="unknown: not ingested (yet); unobserved: nothing covers it yet; observing: an observation in "
                    "flight covers it; buffered: a buffered chunk covers it, waiting for activation; observed: the "
                    "active observation log covers it")
    settled: bool = Field(description="observed, or nothing pending would observe it without new input")


class ProgressEvent(OMEvent):
    """om-stream addition: how far a thread's memory has caught up. Published when it changes (an observation
    landing, an activation, a cycle starting or ending, a retry or idle activation becoming due or done; a message
    taken in does not by itself: its context says so), at most once per thread per batch, and in answer to an
    ``om.commands`` ``progress`` command (with that command's id and the message asked about)."""

    event_type: ClassVar[str] = "data-om-progress"
    latest_message: MessageMark | None = Field(None, description="the thread's newest message taken in")
    observed_through: MessageMark | None = Field(None, description="the newest message of the thread the active "
                                                                   "observation log covers (every one before it too)")
    settled_through: MessageMark | None = Field(None, description="memory has settled through this message: "
                                                                  "latestMessage when nothing is pending, else "
                                                                  "observedThrough")
    unobserved: UnobservedMessages = Field(description="the thread's messages no observation in the log covers")
    buffered: list[BufferedChunk] = Field(description="chunks covering the thread's messages, waiting for "
                                                      "activation")
    in_flight: list[RunningCycle] = Field(description="Observer and Reflector calls involving the thread")
    waiting_for: list[Literal["idle-activation", "buffering-retry", "observation-retry"]] = Field(
        description="timers of the record that will observe or activate without new input")
    pending: bool = Field(description="something in flight or scheduled may still observe the thread's unobserved "
                                      "messages without new input")
    generation_count: int
    request_id: str | None = Field(None, description="the id of the progress command this event answers")
    through: ThroughMessage | None = Field(None, description="the message the progress command (or the HTTP call) "
                                                             "asked about")


class StatusEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-status"
    windows: _Windows
    step_number: int
    generation_count: int
    progress: ProgressEvent | None = Field(None, description="the thread's progress; only in the answer of GET "
                                                             "/v1/threads/{id}/status, never on the events topic")

    @classmethod
    def build(cls, *, record_id: str, thread_id: str, step_number: int, generation_count: int,
              message_tokens: int, message_threshold: int, observation_tokens: int, observation_threshold: int,
              chunks: int, chunk_message_tokens: int, projected_removal: int, chunk_observation_tokens: int,
              buffering: Literal["idle", "running", "complete"], reflection_input_tokens: int,
              reflection_tokens: int, reflection: Literal["idle", "running", "complete"]) -> StatusEvent:
        # One validation of a plain dict is several times faster than building the nested models one by one,
        # and the engine emits one status per published context.
        return cls.model_validate({
            "recordId": record_id, "threadId": thread_id, "stepNumber": step_number,
            "generationCount": generation_count,
            "windows": {
                "active": {"messages": {"tokens": message_tokens, "threshold": message_threshold},
                           "observations": {"tokens": observation_tokens, "threshold": observation_threshold}},
                "buffered": {
                    "observations": {"chunks": chunks, "messageTokens": chunk_message_tokens,
                                     "projectedMessageRemoval": projected_removal,
                                     "observationTokens": chunk_observation_tokens, "status": buffering},
                    "reflection": {"inputObservationTokens": reflection_input_tokens,
                                   "observationTokens": reflection_tokens, "status": reflection}}}})


class ObservationStartEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-observation-start"
    cycle_id: str
    operation_type: OperationType
    started_at: str
    tokens_to_observe: int
    thread_ids: list[str]
    config: MarkerConfig


class ObservationEndEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-observation-end"
    cycle_id: str
    operation_type: OperationType
    completed_at: str
    duration_ms: int
    tokens_observed: int
    observation_tokens: int
    observations: str
    current_task: str | None = None
    suggested_response: str | None = None
    extracted_values: dict[str, Any] | None = None
    extraction_failures: list[ExtractionFailure] | None = None
    fallback_model: str | None = Field(None, description="set when the offline model observed instead")


class ObservationFailedEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-observation-failed"
    cycle_id: str
    operation_type: OperationType
    failed_at: str
    duration_ms: int
    tokens_attempted: int
    error: str
    observations: str | None = None
    next_action: str | None = Field(None, description="what om-stream does next (retry, offline fallback, ...)")


class BufferingStartEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-buffering-start"
    cycle_id: str
    operation_type: OperationType
    started_at: str
    tokens_to_buffer: int
    thread_ids: list[str]
    config: MarkerConfig


class BufferingEndEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-buffering-end"
    cycle_id: str
    operation_type: OperationType
    completed_at: str
    duration_ms: int
    tokens_buffered: int
    buffered_tokens: int
    observations: str
    extracted_values: dict[str, Any] | None = None
    extraction_failures: list[ExtractionFailure] | None = None


class BufferingFailedEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-buffering-failed"
    cycle_id: str
    operation_type: OperationType
    failed_at: str
    duration_ms: int
    tokens_attempted: int
    error: str
    observations: str | None = None


class ActivationEvent(OMEvent):
    """One buffered chunk (or the buffered reflection) moved into the active log: one event per chunk, under the
    ``cycleId`` of the buffering cycle that produced it, so a client pairs it with that cycle's
    ``data-om-buffering-start`` and ``-end``."""

    event_type: ClassVar[str] = "data-om-activation"
    cycle_id: str = Field(description="the cycleId of the buffering cycle that produced the activated content")
    operation_type: OperationType
    activated_at: str
    chunks_activated: int = Field(description="always 1: each activated chunk has an event of its own")
    tokens_activated: int = Field(description="observation: message tokens the chunk removes from the context; "
                                              "reflection: log tokens it replaces")
    observation_tokens: int = Field(description="observation: tokens of the chunk; reflection: log tokens after")
    messages_activated: int
    generation_count: int
    observations: str
    triggered_by: Literal["threshold", "ttl", "provider_change", "manual"]
    buffer_cycle_ids: list[str] = Field(description="om-stream addition: the buffering cycleId again (one entry)")
    last_activity_at: int | None = Field(None, description="ttl only: time of the last activity (the newest "
                                                           "assistant message), epoch milliseconds")
    ttl_expired_ms: int | None = Field(None, description="ttl only: milliseconds since the last activity (as the "
                                                         "reference reports it), not the excess over the idle time")
    previous_model: str | None = None
    current_model: str | None = None
    config: MarkerConfig = Field(description="thresholds in force; when a ttl trigger activates observations, "
                                             "activateAfterIdle is the idle time it resolved to, in milliseconds "
                                             "(also for 'auto')")


class ThreadUpdateEvent(OMEvent):
    event_type: ClassVar[str] = "data-om-thread-update"
    cycle_id: str
    old_title: str | None = None
    new_title: str
    timestamp: str


class TemporalMarkerEvent(OMEvent):
    """The gap reminder inserted before a user message when ``temporalMarkers`` is on."""

    event_type: ClassVar[str] = "data-om-temporal-marker"
    message_id: str
    precedes_message_id: str
    gap_ms: int
    gap_text: str
    text: str


class CondensationEvent(OMEvent):
    """om-stream addition: the engine condensed the observation log itself, without a model, to keep it within its
    bound (``reflection.observationTokens`` x ``reflection.blockAfter``). The folded observations' conversation
    stays in the content store, where the recall tool reaches it."""

    event_type: ClassVar[str] = "data-om-condensation"
    cycle_id: str | None = Field(None, description="the reflection cycle whose answer was condensed; null when a "
                                                   "context was condensed as it was rendered")
    condensed_at: str
    reason: Literal["over_target", "unusable", "failed", "context_over_bound"] = Field(
        description="over_target: the Reflector's best answer was not under its target; unusable / failed: the "
                    "offline Reflector's answers were unusable, or its call failed; context_over_bound: a context "
                    "was published while the log was over its bound (a reflection still running or failed), so "
                    "it was condensed as rendered")
    tokens_before: int = Field(description="tokens of what was condensed (for context_over_bound: the whole log)")
    tokens_after: int | None = Field(None, description="tokens of the condensed text (null for context_over_bound)")
    target_tokens: int = Field(description="the target it had to come under: the Reflector's target, or the bound")
    observations_folded: int | None = Field(None, description="observation entries folded under the marker line "
                                                              "(null for context_over_bound: counted as rendered)")


class ErasedCounts(_Payload):
    """What an erase removed, per store (counts only, never content)."""

    messages: int = Field(ge=0, description="stored messages")
    observations: int = Field(ge=0, description="observation chunks, observations and reflections")
    generations: int = Field(ge=0, description="reflection generations")
    threads: int = Field(ge=0, description="thread records: title, hints, extracted values, working memory, the "
                                          "resource's thread listing")
    cycle_results: int = Field(ge=0, description="cached model outputs")
    recall_points: int = Field(ge=0, description="points of the recall index")
    state_records: int = Field(ge=0, description="records of the state table (a tombstone in its changelog)")
    contexts: int = Field(ge=0, description="tombstones published on the context topic")


class ErasedEvent(OMEvent):
    """om-stream addition: the receipt of an erase (``om.commands`` ``erase``, ``DELETE /v1/threads/{id}`` or
    ``/v1/resources/{id}``, ``Memory.erase``). Published once every part is done, the recall index is swept and
    the stores were read back; keyed by the erased subject (the thread id, or the resource id). Never content."""

    event_type: ClassVar[str] = "data-om-erased"
    thread_id: str | None = Field(  # type: ignore[assignment]
        None, description="the thread erased (scope thread); null when a whole resource was erased")
    erase_id: str = Field(description="the erase command's id")
    scope: Literal["thread", "resource"]
    resource_id: str | None = Field(None, description="the resource erased, or the erased thread's resource when "
                                                      "it was known")
    found: bool = Field(description="false: nothing of the subject was held (erasing it again, or an unknown id, "
                                    "succeeds and says so)")
    removed: ErasedCounts
    requested_at: str = Field(description="when the erase was requested (ISO 8601, UTC)")
    completed_at: str = Field(description="when the receipt was made: everything was removed and read back")
    verified: bool = Field(description="the stores and the recall index were read back after the sweep and held "
                                       "nothing of the subject")
    parts: int = Field(ge=1, description="partitions the erase ran on (a resource in thread scope: all of them)")


class ExpiredCounts(_Payload):
    """What a retention purge removed, per store (counts only, never content)."""

    messages: int = Field(ge=0, description="stored messages created before the cutoff")
    observations: int = Field(ge=0, description="observation segments removed whole (every entry, or every "
                                                "message they cover, past the window)")
    rewritten: int = Field(ge=0, description="observation segments written again without their expired entries")
    entries: int = Field(ge=0, description="observation entries (a line and its details) cut from the segments "
                                           "written again")
    threads: int = Field(ge=0, description="threads whose derived metadata (title, hints, extracted values, working "
                                           "memory) went with their last message")
    cycle_results: int = Field(ge=0, description="cached model outputs")


class ExpiredEvent(OMEvent):
    """om-stream addition: the receipt of a retention purge (``OM_LIFECYCLE_RETENTION_DAYS``, or a record's
    ``retention_days`` override). Published when a record's purge has run, keyed by its thread (the primary one in
    resource scope). What it counts is already unreadable before it: contexts, recall and events leave out what is
    past the window as soon as it is. The recall index is purged by whoever holds it (counted in
    ``om_expired_items_total{store="recall_points"}``). Never content."""

    event_type: ClassVar[str] = "data-om-expired"
    expiry_id: str = Field(description="the purge's id (deterministic: a purge replayed after a crash has the same)")
    thread_ids: list[str] = Field(description="the record's threads")
    retention_days: int = Field(ge=1, description="the window in force: the deployment's, or the record's shorter "
                                                  "override")
    cutoff: str = Field(description="ISO 8601, UTC: what was created (an observation entry: dated) before this is "
                                    "gone")
    expired_at: str = Field(description="when the purge ran (ISO 8601, UTC)")
    removed: ExpiredCounts
    next_purge_at: str | None = Field(None, description="when the record's next purge is due (null: nothing left "
                                                        "that will expire)")


EVENT_TYPES: dict[str, type[OMEvent]] = {cls.event_type: cls for cls in (
    StatusEvent, ObservationStartEvent, ObservationEndEvent, ObservationFailedEvent, BufferingStartEvent,
    BufferingEndEvent, BufferingFailedEvent, ActivationEvent, ThreadUpdateEvent, TemporalMarkerEvent,
    CondensationEvent, ErasedEvent, ExpiredEvent, ProgressEvent)}
