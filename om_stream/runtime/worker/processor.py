"""The memory agent's work on a batch of input records, independent of Faust (so it is testable on its own).

Commit order for each batch (ARCHITECTURE §4), everything after step 1 queued on the one Kafka producer in order:
  1. content-store writes of every input, awaited (idempotent: deterministic ids): observation writes in the
     engine's order, message rows concurrently (they depend on nothing);
  2. the new states written to the table, each in the context of its record's newest input, so the changelog
     record lands on the record's home partition (see ``state_table``);
  3. publications: events, contexts (one per thread per batch: the newest), model requests and recall indexing
     work (to the record's home partition), dead letters;
  4. the input offsets, committed by Faust, which flushes the producer (every acknowledgement) first.
Steps 2 and 3 happen only if the batch's records were read in the consumer generation that is current when the
batch commits: a worker that lost the group's generation while it worked must not write over the new owner's
state (the records are read again from the committed offsets, by whoever owns them now).
A crash replays from the last committed offsets. A replayed input meets either the old state (every command is
produced again with the same ids: consumers dedupe by ce_id / version) or the new one (the duplicate is
recognised: a message id already seen, a cycle already resolved; the context is published again, and a model
request that never went out is asked again by the cycle's deadline timer).
One record never stops the partition: a record that cannot be decoded, that the engine refuses, or whose handling
fails for any reason but a store outage goes to the dead-letter topic with the reason; a store outage is retried
with backoff for as long as it lasts (the stall shows in ``om_store_errors_total`` and in liveness).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from om_stream.core.commands import (
    ClearStored,
    Command,
    EmitEvent,
    IndexForRecall,
    PersistMessage,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.config import ResolvedConfig
from om_stream.core.engine import Decision, decide, new_record, record_key
from om_stream.core.events import StatusEvent
from om_stream.core.inputs import (
    ClearRecord,
    Input,
    MessageAppended,
    ModelResultArrived,
    ObserveNow,
    OverrideThresholds,
    ReflectNow,
    TimerFired,
)
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.errors import StorageError, WireDecodeError
from om_stream.observability.metrics import Metrics
from om_stream.observability.worker_metrics import activation_latencies
from om_stream.ports import Clock
from om_stream.runtime.effects import Effects
from om_stream.runtime.internal_codec import ForgetIndexed, InternalRecord, decode_internal, encode_internal
from om_stream.runtime.worker.timers import TimerWheel
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import decode_command, decode_json, decode_message, encode
from om_stream.wire.commands import CommandRecord
from om_stream.wire.context import ContextRecord
from om_stream.wire.dlq import DLQ_REASONS, DeadLetterRecord

__all__ = ["MemoryProcessor", "Publication", "Publisher", "SourceRecord", "StateTable", "dead_letter"]

log = logging.getLogger(__name__)
R = TypeVar("R")


@dataclass(frozen=True)
class SourceRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    received_at: float = 0.0  # monotonic seconds, for message-to-context latency
    generation: int = 0  # the consumer-group generation the record was read in
    handle: Any = None  # the transport's own object for the record (a Faust event): the table writes through it


@dataclass(frozen=True)
class Publication:
    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int | None = None  # None: the producer's partitioner places it by key


class Publisher(Protocol):
    async def send(self, publication: Publication) -> Awaitable[object]:
        """Queue a record (in call order); the returned awaitable resolves when the broker acknowledges it."""
        ...


class StateTable(Protocol):
    """Record states by key, read and written through a record of the key (its home partition)."""

    def get(self, key: str, handle: Any) -> RecordState | None: ...

    def set(self, key: str, state: RecordState, handle: Any) -> None: ...


def event_headers(event_type: str, event_id: str, thread_id: str, source: str, at_ms: int) -> list[tuple[str, bytes]]:
    """CloudEvents binary mode headers (``ce_*``) and the content type."""
    return [("ce_specversion", b"1.0"), ("ce_type", event_type.encode()), ("ce_id", event_id.encode()),
            ("ce_source", source.encode()), ("ce_subject", thread_id.encode()),
            ("ce_time", datetime.fromtimestamp(at_ms / 1000, UTC).isoformat().replace("+00:00", "Z").encode()),
            ("content-type", b"application/json")]


class MemoryProcessor:
    def __init__(self, *, kafka: KafkaSettings, config: ResolvedConfig, accountant: TokenAccountant,
                 effects: Effects, publisher: Publisher, table: StateTable, clock: Clock, metrics: Metrics,
                 timers: TimerWheel, limits: EngineLimits | None = None, source: str = "om-stream",
                 on_context: Callable[[ContextRecord], None] | None = None, index_for_recall: bool = False,
                 generation: Callable[[], int] | None = None) -> None:
        self.kafka = kafka
        self.config = config
        self.accountant = accountant
        self.effects = effects
        self.publisher = publisher
        self.table = table
        self.clock = clock
        self.metrics = metrics
        self.timers = timers
        self.limits = limits or EngineLimits()
        self.source = source
        self.on_context = on_context
        self.index_for_recall = index_for_recall  # publish the recall index's work (a search index is configured)
        self.near_limit: set[str] = set()
        self.generation = generation or (lambda: 0)  # the consumer generation now

    # -- decoding ----------------------------------------------------------------------------------------------------

    def _decode(self, record: SourceRecord) -> tuple[str, str, Input]:
        """(record key, resource id, input) for a record of any input topic; raises WireDecodeError."""
        topic = self.kafka
        origin = record.topic
        thread_key = record.key
        if record.topic == topic.topic_records:  # resource scope: validated and re-keyed by the ingest agent
            origin = dict(record.headers).get("om_source_topic", topic.topic_messages.encode()).decode()
            thread_key = _thread_key(record.value, self.kafka.max_message_bytes)
        if origin == topic.topic_messages:
            message = decode_message(thread_key, record.value, max_bytes=self.kafka.max_message_bytes).to_message()
            key = record_key(self.config.scope, message.thread_id, message.resource_id)
            return key, message.resource_id, MessageAppended(message)
        if origin == topic.topic_commands:
            command = decode_command(thread_key, record.value, max_bytes=self.kafka.max_message_bytes)
            resource = command.resource_id or command.thread_id
            return record_key(self.config.scope, command.thread_id, resource), resource, _command_input(command)
        if record.topic == topic.topic_model_results:
            if record.key is None or record.value is None:
                raise WireDecodeError("missing_key", "internal records carry the record key")
            internal = decode_internal(record.value)
            if not isinstance(internal, ModelResultArrived | TimerFired):
                raise WireDecodeError("invalid_fields", "only model results and timers belong on the results topic")
            try:
                return record.key.decode(), "", internal
            except UnicodeDecodeError as exc:
                raise WireDecodeError("invalid_utf8", f"key: {exc}") from None
        raise WireDecodeError("unknown_schema", f"records from {record.topic!r} are not inputs")

    # -- the batch -----------------------------------------------------------------------------------------------

    async def process(self, records: Sequence[SourceRecord]) -> bool:
        """Handle one batch. Returns False when it was fenced off (read in an earlier consumer generation): nothing
        of it was written to the table or published, and its records must not count as processed."""
        if not records:
            return True
        generation = self.generation()
        if any(record.generation != generation for record in records):
            self.metrics.fenced_batches.inc()
            log.info("a batch of %d records read before the last rebalance was dropped", len(records))
            return False
        states: dict[str, tuple[RecordState, SourceRecord]] = {}
        publications: list[Publication] = []
        contexts: dict[str, tuple[PublishContext, SourceRecord]] = {}
        statuses: dict[str, tuple[EmitEvent, SourceRecord]] = {}
        messages: list[tuple[PersistMessage, SourceRecord]] = []
        for record in records:
            self.metrics.messages_in.labels(record.topic).inc()
            try:
                step = await self._step(record, states)
            except WireDecodeError as exc:
                publications.append(self._dead_letter(record, exc.reason, exc.detail))
                continue
            except StorageError as exc:  # the store refused this record's writes for good (not an outage)
                publications.append(self._dead_letter(record, "store_refused", str(exc)))
                continue
            except Exception as exc:  # one record must never stop the partition: it is kept whole, with the reason
                log.exception("record %s[%d]@%d could not be handled", record.topic, record.partition, record.offset)
                publications.append(self._dead_letter(record, "processing_error", f"{type(exc).__name__}: {exc}"))
                continue
            if step is None:  # a result or timer for a record this worker does not hold
                continue
            key, decision = step
            states[key] = (decision.state, record)
            for command in decision.commands:
                if isinstance(command, PersistMessage):
                    messages.append((command, record))
                elif isinstance(command, PublishContext):
                    contexts[command.spec.thread_id] = (command, record)
                elif isinstance(command, EmitEvent) and isinstance(command.event, StatusEvent):
                    # a status is a snapshot: within a batch only a thread's newest one says anything
                    statuses[command.event.thread_id] = (command, record)
                elif isinstance(command, ClearStored):
                    if self.index_for_recall:
                        publications.append(self._internal(key, ForgetIndexed(decision.state.resource_id, key),
                                                           record))
                else:
                    publication = await self._publication(command, record)
                    if publication is not None:
                        publications.append(publication)
        # message rows depend on nothing: written together (the other writes kept the engine's order above)
        refused = await asyncio.gather(*(self._write([message]) for message, _ in messages), return_exceptions=True)
        for (_, record), error in zip(messages, refused, strict=True):
            if isinstance(error, BaseException):
                publications.append(self._dead_letter(record, "store_refused", str(error)))
        for status, record in statuses.values():
            publication = await self._publication(status, record)
            if publication is not None:
                publications.append(publication)
        for command, record in contexts.values():
            try:
                publications.append(await self._context_publication(command, record.received_at))
            except StorageError:
                raise
            except Exception:  # the thread's next input renders its context again
                self.metrics.processing_errors.inc()
                log.exception("context of thread %s could not be rendered", command.spec.thread_id)
        if self.generation() != generation:  # the group rebalanced while this batch was being handled
            self.metrics.fenced_batches.inc()
            log.info("a batch of %d records straddled a rebalance and was dropped", len(records))
            return False
        for key, (state, record) in states.items():
            self.table.set(key, state, record.handle)
            self.timers.track(key, state.timers)
            self._observe_record(key, state)
        await self._publish(publications)
        return True

    async def _step(self, record: SourceRecord,
                    states: dict[str, tuple[RecordState, SourceRecord]]) -> tuple[str, Decision] | None:
        """Decode one record, run the engine on it and write its ordered store commands (all but message rows)."""
        key, resource, event = self._decode(record)
        held = states.get(key)
        state = held[0] if held is not None else self._load(key, resource, record)
        if state is None:
            return None
        began, now_ms = time.perf_counter(), self.clock.now_ms()
        decision = decide(state, event, now_ms, self.config, self.accountant, self.limits)
        self.metrics.decide_seconds.observe(time.perf_counter() - began)
        for seconds in activation_latencies(state, decision.state, now_ms):
            self.metrics.buffer_to_activation.observe(seconds)
        await self._write([c for c in decision.commands if not isinstance(c, PersistMessage)])
        return key, decision

    def _load(self, key: str, resource: str, record: SourceRecord) -> RecordState | None:
        state = self.table.get(key, record.handle)
        if state is not None or not resource:
            return state
        return new_record(key, self.config.scope, resource)

    async def _write(self, commands: list[Command]) -> None:
        """Phase 1. An outage is retried until the store is back (dropping a write would lose conversation
        content); a refusal (``StorageError.transient`` false) is raised for the caller to dead-letter."""
        await self._through_outages("write", lambda: self.effects.write(commands))

    async def _through_outages(self, operation: str, call: Callable[[], Awaitable[R]]) -> R:
        """``call()``, tried again with backoff for as long as the store fails with a transient error."""
        delay = 0.2
        while True:
            try:
                return await call()
            except StorageError as exc:
                self.metrics.store_errors.labels(operation).inc()
                if not exc.transient:
                    raise
                log.warning("content store %s failed, retrying in %.1fs: %s", operation, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _publication(self, command: Command, record: SourceRecord) -> Publication | None:
        topics = self.kafka
        if isinstance(command, EmitEvent):
            event = await self._through_outages("read", lambda: self.effects.event(command))
            self.metrics.events_published.labels(event.event_type).inc()
            self._count_lifecycle(event.event_type, event)
            body = event.model_dump_json(by_alias=True, exclude_none=True).encode()
            return Publication(topics.topic_events, event.thread_id.encode(), body,
                               event_headers(event.event_type, command.event_id, event.thread_id, self.source,
                                             self.clock.now_ms()))
        if isinstance(command, RequestObservation | RequestReflection):
            return Publication(topics.topic_model_requests, command.record_key.encode(), encode_internal(command),
                               [("om_request_id", command.request_id.encode())], partition=record.partition)
        if isinstance(command, IndexForRecall):
            return self._internal(command.record_key, command, record) if self.index_for_recall else None
        if isinstance(command, RejectInput):
            if command.reason in DLQ_REASONS:
                return self._dead_letter(record, command.reason, command.detail)
            return self._dead_letter(record, "rejected_command", f"{command.reason}: {command.detail}")
        return None  # timers live in the state (TimerWheel)

    def _internal(self, key: str, work: InternalRecord, record: SourceRecord) -> Publication:
        """Work for the model workers, on the record's home partition (so its results come back there)."""
        return Publication(self.kafka.topic_model_requests, key.encode(), encode_internal(work),
                           partition=record.partition)

    async def _context_publication(self, command: PublishContext, received_at: float) -> Publication:
        context = await self._through_outages(
            "read", lambda: self.effects.context(command.spec, now_ms=self.clock.now_ms()))
        self.metrics.contexts_published.inc()
        if received_at:
            self.metrics.message_to_context.observe(max(0.0, time.monotonic() - received_at))
        if self.on_context is not None:
            self.on_context(context)
        return Publication(self.kafka.topic_context, context.thread_id.encode(), encode(context),
                           [("om_version", str(context.version).encode()),
                            ("om_through_message_id", (context.through_message_id or "").encode())])

    def _dead_letter(self, record: SourceRecord, reason: str, detail: str) -> Publication:
        return dead_letter(self.kafka, self.metrics, record, reason, detail)

    async def _publish(self, publications: list[Publication]) -> None:
        """Phase 3: queue everything in order (a thread's events stay ordered). Faust flushes the producer (all
        acknowledgements) before it commits the batch's offsets; a send that fails is logged and counted."""
        for publication in publications:
            acknowledged = await self.publisher.send(publication)
            if isinstance(acknowledged, asyncio.Future):
                acknowledged.add_done_callback(self._check_sent)

    def _check_sent(self, future: asyncio.Future[object]) -> None:
        if not future.cancelled() and future.exception() is not None:
            self.metrics.store_errors.labels("publish").inc()
            log.error("a publication was not acknowledged: %r", future.exception())

    def _count_lifecycle(self, event_type: str, event: object) -> None:
        operation = getattr(event, "operation_type", "")
        if event_type == "data-om-activation":
            self.metrics.activations.labels(operation, getattr(event, "triggered_by", "")).inc()
            if operation == "reflection":
                self.metrics.generations.inc()
        elif event_type in ("data-om-observation-end", "data-om-buffering-end", "data-om-observation-failed",
                            "data-om-buffering-failed"):
            outcome = "failed" if event_type.endswith("failed") else "ok"
            kind = "buffer" if "buffering" in event_type else "sync"
            (self.metrics.observations if operation == "observation" else self.metrics.reflections).labels(
                kind, outcome).inc()
            if event_type == "data-om-observation-end" and operation == "reflection":
                self.metrics.generations.inc()
            tokens_in = getattr(event, "tokens_observed", None) or getattr(event, "tokens_buffered", None)
            tokens_out = getattr(event, "observation_tokens", None) or getattr(event, "buffered_tokens", None)
            if operation == "observation" and tokens_in and tokens_out:
                self.metrics.compression_ratio.observe(tokens_in / tokens_out)

    def _observe_record(self, key: str, state: RecordState) -> None:
        self.metrics.unobserved_tokens.observe(state.unobserved_tokens)
        self.metrics.observation_tokens.observe(state.log_tokens)
        self.metrics.buffered_chunks.observe(len(state.buffered))
        if state.unobserved_tokens >= 0.9 * self.config.message_limit:
            self.near_limit.add(key)
        else:
            self.near_limit.discard(key)
        self.metrics.threads_near_block_after.set(len(self.near_limit))


def dead_letter(kafka: KafkaSettings, metrics: Metrics, record: SourceRecord, reason: str, detail: str) -> Publication:
    """The dead-letter record of ``record``: the original bytes, where they came from, and why."""
    metrics.dlq_records.labels(reason).inc()
    log.warning("dead letter from %s[%d]@%d: %s (%s)", record.topic, record.partition, record.offset, reason,
                detail[:200])
    letter = DeadLetterRecord.build(
        reason=reason, detail=detail, topic=record.topic, partition=record.partition, offset=record.offset,
        key=record.key, value=record.value or b"", headers=record.headers,
        failed_at=datetime.now(UTC).isoformat().replace("+00:00", "Z"))
    return Publication(kafka.topic_dlq, record.key or b"", encode(letter), [("om_dlq_reason", reason.encode())])


def _thread_key(value: bytes | None, max_bytes: int) -> bytes | None:
    """Re-keyed (resource scope) records carry the thread id inside the value; check it against itself. (None when
    the value is unreadable: decoding it as a message then says why.)"""
    try:
        return str(decode_json(value, max_bytes).get("thread_id", "")).encode()
    except WireDecodeError:
        return None


def _command_input(command: CommandRecord) -> Input:
    if command.command == "observe":
        return ObserveNow(command.thread_id)
    if command.command == "reflect":
        return ReflectNow(command.guidance, command.thread_id)
    if command.command == "override":
        return OverrideThresholds(command.message_tokens, command.observation_tokens, command.thread_id)
    return ClearRecord(command.thread_id)
