"""The memory agent's driver of the host for a batch of Kafka records, independent of Faust (testable on its own).

It decodes each record into an input for its record (``Arrival``; an unreadable one goes to the dead-letter topic
with the reason) and hands the batch to the ``Host`` (``runtime/host.py``), which decides and commits it in the one
commit order. Its outlet turns what the host publishes into Kafka records queued in order on the one producer:
events with CloudEvents headers, contexts (rendered here), model requests and recall-index work to the record's
home partition, dead letters. Step 4 of the commit order, the input offsets, is the worker's (``offsets.py``).

A batch commits only if its records were read in the consumer generation that is current when it commits: a
worker that lost the group's generation while it worked must not write over the new owner's state (the records
are read again from the committed offsets, by whoever owns them now).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol

from om_stream.core.commands import (
    EmitEvent,
    ExpireIndex,
    IndexForRecall,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.config import ResolvedConfig
from om_stream.core.engine import record_key
from om_stream.core.erasure import EraseIndexDone, ErasePart, ErasePartDone, EraseRequested
from om_stream.core.events import ErasedEvent, ExpiredEvent, OMEvent
from om_stream.core.inputs import (
    ClearRecord,
    Input,
    MessageAppended,
    ModelResultArrived,
    ObserveNow,
    OverrideThresholds,
    ReflectNow,
    ReportProgress,
    RestoreRecord,
    TimerFired,
)
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.core.views import near_block_after
from om_stream.errors import WireDecodeError
from om_stream.observability.metrics import Metrics
from om_stream.observability.worker_metrics import activation_latencies
from om_stream.ports import Clock
from om_stream.runtime.effects import Effects
from om_stream.runtime.host import Arrival, Decided, Erasures, Host, StateTable, StoreRetry
from om_stream.runtime.internal_codec import ForgetIndexed, InternalRecord, decode_internal, encode_internal
from om_stream.runtime.timers import TimerWheel
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import decode_command, decode_json, decode_message, encode
from om_stream.wire.commands import CommandRecord
from om_stream.wire.context import ContextRecord
from om_stream.wire.dlq import DLQ_REASONS, DeadLetterRecord

__all__ = ["ErasuresFactory", "KafkaOutlet", "MemoryProcessor", "Publication", "Publisher", "SourceRecord",
           "dead_letter"]

log = logging.getLogger(__name__)


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
    timestamp_ms: int = 0  # the record's Kafka timestamp


@dataclass(frozen=True)
class Publication:
    topic: str
    key: bytes
    value: bytes | None  # None: a tombstone (compacted topics forget the key)
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int | None = None  # None: the producer's partitioner places it by key


class Publisher(Protocol):
    async def send(self, publication: Publication) -> Awaitable[object]:
        """Queue a record (in call order); the returned awaitable resolves when the broker acknowledges it."""
        ...


def event_headers(event_type: str, event_id: str, thread_id: str, source: str, at_ms: int) -> list[tuple[str, bytes]]:
    """CloudEvents binary mode headers (``ce_*``) and the content type."""
    return [("ce_specversion", b"1.0"), ("ce_type", event_type.encode()), ("ce_id", event_id.encode()),
            ("ce_source", source.encode()), ("ce_subject", thread_id.encode()),
            ("ce_time", datetime.fromtimestamp(at_ms / 1000, UTC).isoformat().replace("+00:00", "Z").encode()),
            ("content-type", b"application/json")]


class KafkaOutlet:
    """What the host publishes, as Kafka records held until the batch commits (then sent in order). One batch at a
    time (the memory agent handles one): the host's outlet for every batch, and where the decoding step puts its
    dead letters. What a publication counts (metrics, the HTTP API's latest context) is counted when it is sent."""

    def __init__(self, *, kafka: KafkaSettings, effects: Effects, publisher: Publisher, clock: Clock,
                 metrics: Metrics, store_retry: StoreRetry, source: str, index_for_recall: bool,
                 on_context: Callable[[ContextRecord], None] | None = None,
                 on_forget: Callable[[str], None] | None = None) -> None:
        self.kafka = kafka
        self.effects = effects
        self.publisher = publisher
        self.clock = clock
        self.metrics = metrics
        self.store_retry = store_retry
        self.source = source
        self.index_for_recall = index_for_recall  # publish the recall index's work (a search index is configured)
        self.on_context = on_context
        self.on_forget = on_forget  # an erased thread: what the worker keeps of its context goes too
        self._queued: list[Publication] = []
        self._on_sent: list[Callable[[], None]] = []  # what the queued publications count, once they go

    def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None:
        self._queued.append(dead_letter(self.kafka, self.metrics, record, reason, detail))

    async def event(self, event: OMEvent, command: EmitEvent, arrival: Arrival) -> None:
        self._on_sent.append(partial(self._count_event, event))
        body = event.model_dump_json(by_alias=True, exclude_none=True).encode()
        self._queued.append(Publication(self.kafka.topic_events, event.thread_id.encode(), body, event_headers(
            event.event_type, command.event_id, event.thread_id, self.source, self.clock.now_ms())))

    def _count_event(self, event: OMEvent) -> None:
        self.metrics.events_published.labels(event.event_type).inc()
        _count_lifecycle(self.metrics, event.event_type, event)
        if isinstance(event, ExpiredEvent):
            self.metrics.expirations.inc()
            for store, count in event.removed.model_dump().items():
                self.metrics.expired_items.labels(store).inc(count)

    async def context(self, command: PublishContext, arrival: Arrival) -> None:
        context = await self.store_retry("read", partial(self.effects.context, command.spec,
                                                         now_ms=self.clock.now_ms()))
        received_at = arrival.source.received_at if isinstance(arrival.source, SourceRecord) else 0.0
        self._on_sent.append(partial(self._context_sent, context, received_at))
        self._queued.append(Publication(self.kafka.topic_context, context.thread_id.encode(), encode(context),
                                        [("om_version", str(context.version).encode()),
                                         ("om_through_message_id", (context.through_message_id or "").encode())]))

    async def request(self, command: RequestObservation | RequestReflection, arrival: Arrival) -> None:
        self._queued.append(Publication(self.kafka.topic_model_requests, command.record_key.encode(),
                                        encode_internal(command), [("om_request_id", command.request_id.encode())],
                                        partition=_home(arrival)))

    async def index(self, command: IndexForRecall, arrival: Arrival) -> None:
        if self.index_for_recall:
            self._internal(command.record_key, command, arrival)

    async def expire_index(self, command: ExpireIndex, arrival: Arrival) -> None:
        if self.index_for_recall:
            self._internal(command.record_key, command, arrival)

    async def forget(self, resource_id: str, key: str, arrival: Arrival) -> None:
        if self.index_for_recall:
            self._internal(key, ForgetIndexed(resource_id, key), arrival)

    async def forget_context(self, thread_id: str, arrival: Arrival) -> None:
        """A tombstone on the compacted context topic: the thread's last context goes at the next cleaning
        (``max.compaction.lag.ms`` bounds when), and every consumer that reads it forgets the thread's context."""
        if self.on_forget is not None:
            self._on_sent.append(partial(self.on_forget, thread_id))
        self._queued.append(Publication(self.kafka.topic_context, thread_id.encode(), None,
                                        [("om_erased", b"1")]))

    async def erased(self, event: ErasedEvent, arrival: Arrival) -> None:
        """The receipt, keyed by the erased subject (its thread, or its resource)."""
        subject = event.thread_id or event.resource_id or ""
        self._on_sent.append(partial(self._count_receipt, event))
        body = event.model_dump_json(by_alias=True).encode()
        self._queued.append(Publication(self.kafka.topic_events, subject.encode(), body, event_headers(
            event.event_type, f"erased-{event.erase_id}", subject, self.source, self.clock.now_ms())))

    def _count_receipt(self, event: ErasedEvent) -> None:
        self.metrics.events_published.labels(event.event_type).inc()
        self.metrics.erasures.labels(event.scope, str(event.found).lower()).inc()
        requested = datetime.fromisoformat(event.requested_at.replace("Z", "+00:00"))
        completed = datetime.fromisoformat(event.completed_at.replace("Z", "+00:00"))
        self.metrics.erasure_seconds.labels(event.scope).observe(max(0.0, (completed - requested).total_seconds()))

    def internal(self, topic: str, key: str, work: InternalRecord, partition: int) -> None:
        """Internal work (an erase's steps) to a partition of an internal topic."""
        self._queued.append(Publication(topic, key.encode(), encode_internal(work), partition=partition))

    async def refuse(self, command: RejectInput, arrival: Arrival) -> None:
        if not command.keep_input:  # past the retention window: counted and dropped, never copied to the DLQ
            self._on_sent.append(self.metrics.expired_inputs.inc)
            log.info("input for %s not recorded: %s", command.record_key, command.reason)
            return
        if isinstance(arrival.source, SourceRecord):
            reason, detail = ((command.reason, command.detail) if command.reason in DLQ_REASONS else
                              ("rejected_command", f"{command.reason}: {command.detail}"))
            self.dead_letter(arrival.source, reason, detail)

    async def failed(self, arrival: Arrival, reason: str, detail: str, error: BaseException) -> None:
        if reason == "processing_error":
            self._on_sent.append(self.metrics.processing_errors.inc)
        if isinstance(arrival.source, SourceRecord):
            self.dead_letter(arrival.source, reason, detail)

    def _internal(self, key: str, work: InternalRecord, arrival: Arrival) -> None:
        """Work for the model workers, on the record's home partition (so its results come back there)."""
        self._queued.append(Publication(self.kafka.topic_model_requests, key.encode(), encode_internal(work),
                                        partition=_home(arrival)))

    def _context_sent(self, context: ContextRecord, received_at: float) -> None:
        self.metrics.contexts_published.inc()
        if received_at:
            self.metrics.message_to_context.observe(max(0.0, time.monotonic() - received_at))
        if self.on_context is not None:
            self.on_context(context)

    async def commit(self) -> None:
        """Queue everything in order (a thread's events stay ordered). The worker flushes the producer (every
        acknowledgement) before it commits the batch's offsets; a send that fails is logged and counted."""
        queued, self._queued = self._queued, []
        sent, self._on_sent = self._on_sent, []
        for count in sent:
            count()
        for publication in queued:
            acknowledged = await self.publisher.send(publication)
            if isinstance(acknowledged, asyncio.Future):
                acknowledged.add_done_callback(self._check_sent)

    def discard(self) -> None:
        self._queued.clear()
        self._on_sent.clear()

    def _check_sent(self, future: asyncio.Future[object]) -> None:
        if not future.cancelled() and future.exception() is not None:
            self.metrics.store_errors.labels("publish").inc()
            log.error("a publication was not acknowledged: %r", future.exception())


ErasuresFactory = Callable[["MemoryProcessor"], Erasures]
"""Makes the worker's erasures for a processor (they publish on its outlet, and clear records through its host)."""


class MemoryProcessor:
    def __init__(self, *, kafka: KafkaSettings, config: ResolvedConfig, accountant: TokenAccountant,
                 effects: Effects, publisher: Publisher, table: StateTable, clock: Clock, metrics: Metrics,
                 timers: TimerWheel, limits: EngineLimits | None = None, source: str = "om-stream",
                 on_context: Callable[[ContextRecord], None] | None = None, index_for_recall: bool = False,
                 generation: Callable[[], int] | None = None,
                 confirm: Callable[[int], Awaitable[bool]] | None = None,
                 on_forget: Callable[[str], None] | None = None,
                 erasures: ErasuresFactory | None = None) -> None:
        self.kafka = kafka
        self.config = config
        self.metrics = metrics
        self.near_limit: set[str] = set()
        self.generation = generation or (lambda: 0)  # the consumer generation now
        self.confirm = confirm  # asked before a batch commits: does the group still hold this generation?
        store_retry = StoreRetry(retry_outages=True, on_error=lambda op: metrics.store_errors.labels(op).inc())
        self.store_retry = store_retry
        self.outlet = KafkaOutlet(kafka=kafka, effects=effects, publisher=publisher, clock=clock, metrics=metrics,
                                  store_retry=store_retry, source=source, index_for_recall=index_for_recall,
                                  on_context=on_context, on_forget=on_forget)
        self.host = Host(config=config, accountant=accountant, effects=effects, table=_Metered(table, self),
                         outlets=lambda: self.outlet, timers=timers, clock=clock, limits=limits,
                         store_retry=store_retry, on_decided=self._decided,
                         on_publish_error=metrics.processing_errors.inc,
                         erasures=erasures(self) if erasures is not None else None)

    async def clear_now(self, state: RecordState, arrival: Arrival) -> RecordState:
        """``state`` cleared (its log rebuilt from its stored messages) within an erase's handling."""
        return await self.host.decide_on(state, Arrival(arrival.key, state.resource_id, ClearRecord(None),
                                                        arrival.source), self.outlet)

    # -- decoding ----------------------------------------------------------------------------------------------------

    def _decode(self, record: SourceRecord) -> Arrival:
        """The input a record of any input topic carries, for its record; raises WireDecodeError."""
        topic = self.kafka
        origin = record.topic
        thread_key = record.key
        if record.topic == topic.topic_records:  # resource scope: validated and re-keyed by the ingest agent
            origin = dict(record.headers).get("om_source_topic", topic.topic_messages.encode()).decode()
            original_key = _thread_key if origin == topic.topic_messages else _command_key
            thread_key = original_key(record.value, self.kafka.max_message_bytes)
        if origin == topic.topic_messages:
            message = decode_message(thread_key, record.value, max_bytes=self.kafka.max_message_bytes).to_message()
            key = record_key(self.config.scope, message.thread_id, message.resource_id)
            return Arrival(key, message.resource_id, MessageAppended(message), record)
        if origin == topic.topic_commands:
            command = decode_command(thread_key, record.value, max_bytes=self.kafka.max_message_bytes)
            if command.command == "erase":
                return self._erase(command, record)
            assert command.thread_id is not None  # the wire contract: only an erase of a resource leaves it out
            resource = command.resource_id or command.thread_id
            return Arrival(record_key(self.config.scope, command.thread_id, resource), resource,
                           _command_input(command), record)
        if record.topic == topic.topic_model_results:
            if record.key is None or record.value is None:
                raise WireDecodeError("missing_key", "internal records carry the record key")
            internal = decode_internal(record.value)
            if not isinstance(internal, ModelResultArrived | TimerFired | ErasePart | ErasePartDone
                              | EraseIndexDone | RestoreRecord):
                raise WireDecodeError("invalid_fields", "only model results, timers, restores and an erase's steps "
                                                        "belong on the results topic")
            try:
                key = record.key.decode()
            except UnicodeDecodeError as exc:
                raise WireDecodeError("invalid_utf8", f"key: {exc}") from None
            if isinstance(internal, RestoreRecord):  # om-stream import: the only input here that makes a record
                if internal.state.key != key:
                    raise WireDecodeError("invalid_fields", "a restore is keyed by the record of its state")
                return Arrival(key, internal.state.resource_id, internal, record)
            return Arrival(key, "", internal, record)
        raise WireDecodeError("unknown_schema", f"records from {record.topic!r} are not inputs")

    def _erase(self, command: CommandRecord, record: SourceRecord) -> Arrival:
        """An erase command: a thread's (keyed by its record), or a resource's (keyed by the resource: in thread
        scope its coordinator is the resource key's partition)."""
        assert command.scope is not None  # the wire contract: an erase names its scope
        requested = command.requested_at
        requested_at = (int(requested.timestamp() * 1000) if requested is not None
                        else record.timestamp_ms or int(time.time() * 1000))
        erase = EraseRequested(command.command_id, command.scope, command.resource_id, command.thread_id,
                               requested_at)
        if command.scope == "resource":
            assert command.resource_id is not None
            return Arrival(command.resource_id, command.resource_id, erase, record)
        assert command.thread_id is not None
        key = record_key(self.config.scope, command.thread_id, command.resource_id or command.thread_id)
        return Arrival(key, command.resource_id or "", erase, record)

    # -- the batch -----------------------------------------------------------------------------------------------

    async def process(self, records: Sequence[SourceRecord]) -> bool:
        """Handle one batch. Returns False when it was fenced off (read in an earlier consumer generation, or the
        group no longer holds that generation): nothing of it was written to the table or published, and its records
        must not count as processed."""
        if not records:
            return True
        generation = self.generation()
        if any(record.generation != generation for record in records):
            return self._fenced(records, "read before the last rebalance")
        arrivals = []
        for record in records:
            self.metrics.messages_in.labels(record.topic).inc()
            try:
                arrivals.append(self._decode(record))
            except WireDecodeError as exc:
                self.outlet.dead_letter(record, exc.reason, exc.detail)
        async def may_commit() -> bool:
            if self.generation() != generation:
                return False
            return self.confirm is None or await self.confirm(generation)

        if not arrivals:
            # nothing but dead letters: the host has no batch to commit them with, so they go out here, before the
            # caller commits these offsets (held for the next batch, they waited for traffic that may never come,
            # and a later fenced batch or a stop would have dropped them with their offsets already committed)
            if not await may_commit():
                self.outlet.discard()
                return self._fenced(records, "straddled a rebalance")
            await self.outlet.commit()
            return True
        if not await self.host.apply(arrivals, may_commit=may_commit):
            return self._fenced(records, "straddled a rebalance")
        return True

    def _fenced(self, records: Sequence[SourceRecord], why: str) -> bool:
        self.metrics.fenced_batches.inc()
        log.info("a batch of %d records %s was dropped", len(records), why)
        return False

    def _decided(self, decided: Decided) -> None:
        self.metrics.decide_seconds.observe(decided.seconds)
        if decided.after.unproductive_reflections > decided.before.unproductive_reflections:
            self.metrics.reflection_backoffs.inc()
        for seconds in activation_latencies(decided.before, decided.after, decided.now_ms):
            self.metrics.buffer_to_activation.observe(seconds)

    def observe_record(self, key: str, state: RecordState) -> None:
        self.metrics.unobserved_tokens.observe(state.unobserved_tokens)
        self.metrics.observation_tokens.observe(state.log_tokens)
        self.metrics.buffered_chunks.observe(len(state.buffered))
        if near_block_after(state, self.config):
            self.near_limit.add(key)
        else:
            self.near_limit.discard(key)
        self.metrics.threads_near_block_after.set(len(self.near_limit))

    def keep_held(self, held: set[str]) -> None:
        """After a rebalance: the records that went to other workers no longer count here (nor stay in memory)."""
        self.near_limit &= held
        self.metrics.threads_near_block_after.set(len(self.near_limit))


class _Metered:
    """The state table, with the record gauges observed as each state is written."""

    def __init__(self, table: StateTable, processor: MemoryProcessor) -> None:
        self.table = table
        self.processor = processor

    def get(self, arrival: Arrival) -> RecordState | None:
        return self.table.get(arrival)

    def set(self, arrival: Arrival, state: RecordState) -> None:
        self.table.set(arrival, state)
        self.processor.observe_record(arrival.key, state)


def _home(arrival: Arrival) -> int | None:
    """The partition of the record an arrival came from: its record's home (None: the producer's partitioner)."""
    return arrival.source.partition if isinstance(arrival.source, SourceRecord) else None


def _count_lifecycle(metrics: Metrics, event_type: str, event: object) -> None:
    operation = getattr(event, "operation_type", "")
    if event_type == "data-om-condensation":
        metrics.condensations.labels(getattr(event, "reason", "")).inc()
    elif event_type == "data-om-activation":
        metrics.activations.labels(operation, getattr(event, "triggered_by", "")).inc()
        if operation == "reflection":
            metrics.generations.inc()
    elif event_type in ("data-om-observation-end", "data-om-buffering-end", "data-om-observation-failed",
                        "data-om-buffering-failed"):
        outcome = "failed" if event_type.endswith("failed") else "ok"
        kind = "buffer" if "buffering" in event_type else "sync"
        (metrics.observations if operation == "observation" else metrics.reflections).labels(kind, outcome).inc()
        if event_type == "data-om-observation-end" and operation == "reflection":
            metrics.generations.inc()
        tokens_in = getattr(event, "tokens_observed", None) or getattr(event, "tokens_buffered", None)
        tokens_out = getattr(event, "observation_tokens", None) or getattr(event, "buffered_tokens", None)
        if operation == "observation" and tokens_in and tokens_out:
            metrics.compression_ratio.observe(tokens_in / tokens_out)


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


def _command_key(value: bytes | None, max_bytes: int) -> bytes | None:
    """A re-keyed command's original key: its thread, or its resource for an erase of a resource."""
    try:
        data = decode_json(value, max_bytes)
    except WireDecodeError:
        return None
    return str(data.get("thread_id") or data.get("resource_id") or "").encode()


def _command_input(command: CommandRecord) -> Input:
    assert command.thread_id is not None  # the wire contract: only an erase of a resource leaves it out
    if command.command == "observe":
        return ObserveNow(command.thread_id, force=bool(command.force))
    if command.command == "reflect":
        return ReflectNow(command.guidance, command.thread_id)
    if command.command == "override":
        return OverrideThresholds(command.message_tokens, command.observation_tokens, command.thread_id,
                                  replace=bool(command.replace), retention_days=command.retention_days)
    if command.command == "progress":
        return ReportProgress(command.thread_id, command.command_id, command.through_message_id)
    return ClearRecord(command.thread_id)
