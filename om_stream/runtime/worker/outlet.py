"""The memory agent's outlet: what the host publishes for one batch, as Kafka records held until the batch commits.

Events go out with CloudEvents headers, contexts rendered here (reading the content store; whole, or by reference
with ``OM_CONTEXT_WIRE=v2``: ``context_wire``), model requests and the recall index's work to the record's home
partition (so that their results come back there), refusals and failures as dead letters, an erase's internal steps
to the partitions they name. The memory agent makes one outlet per batch
(``MemoryProcessor``); what the outlets share (the producer, the store, the metrics) is handed to each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from opentelemetry.trace import SpanKind

from om_stream.core.commands import (
    ContextSpec,
    EmitEvent,
    ExpireIndex,
    IndexForRecall,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.events import ErasedEvent, OMEvent
from om_stream.core.inputs import MessageAppended
from om_stream.observability.lifecycle_metrics import count_event
from om_stream.observability.metrics import Metrics
from om_stream.observability.tracing import Tracing, exemplar
from om_stream.ports import Clock
from om_stream.runtime.effects import Effects
from om_stream.runtime.host_ports import Arrival, StoreRetry
from om_stream.runtime.ingest_spans import MessageSpans
from om_stream.runtime.internal_codec import ForgetIndexed, InternalRecord, encode_internal
from om_stream.runtime.spans import recording, traced
from om_stream.runtime.worker.asked_cycles import AskedCycles
from om_stream.runtime.worker.context_sweep import LatePublications
from om_stream.runtime.worker.context_wire import PublishedContexts, erase_publications, publications
from om_stream.runtime.worker.ingest_traces import folded_links, request_headers
from om_stream.runtime.worker.kafka_records import Publication, Publisher, SourceRecord, dead_letter, event_headers
from om_stream.settings import KafkaSettings
from om_stream.trace_headers import inject
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_refs import Sent
from om_stream.wire.dlq import DLQ_REASONS

__all__ = ["KafkaOutlet", "OutletParts"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutletParts:
    """What every batch's outlet shares: the producer, the store it renders from, and where it counts."""

    kafka: KafkaSettings
    effects: Effects
    publisher: Publisher
    clock: Clock
    metrics: Metrics
    store_retry: StoreRetry
    source: str  # the CloudEvents ``ce_source``
    index_for_recall: bool  # publish the recall index's work (a search index is configured)
    on_context: Callable[[ContextRecord], None] | None = None  # a context sent (the HTTP API's latest)
    on_forget: Callable[[str], None] | None = None  # an erased thread: what the worker keeps of its context goes too
    tracing: Tracing = field(default_factory=Tracing.off)
    message_spans: MessageSpans = field(default_factory=MessageSpans)  # the ingest spans a cycle links to
    by_reference: PublishedContexts | None = None  # OM_CONTEXT_WIRE=v2: contexts by reference (``context_wire``)
    late: LatePublications | None = None  # v2: told of what went out, checked against the erasure ledger later
    asked: AskedCycles | None = None  # the model calls whose request the broker acknowledged (a take-over skips them)


class KafkaOutlet:
    """One batch's publications (the host's ``Outlet`` for the Kafka worker). Nothing leaves before ``commit``;
    what a publication counts (metrics, the HTTP API's latest context) is counted when it is sent."""

    def __init__(self, parts: OutletParts, generation: int = 0) -> None:
        self.parts = parts
        self.generation = generation  # the consumer generation the batch was read in
        self._queued: list[Publication] = []
        self._on_sent: list[Callable[[], None]] = []  # what the queued publications count, once they go
        self._on_queued: list[Callable[[], None]] = []  # what is told once they are all on the producer
        # v2: what this batch leaves each thread's readers holding once it commits (None: erased in this batch)
        self._sent: dict[str, Sent | None] = {}
        self._requests: dict[int, tuple[str, int]] = {}  # id of a queued request -> its call (cycle, attempt)

    def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None:
        parts = self.parts
        self._queued.append(dead_letter(parts.kafka, parts.metrics, record, reason, detail))

    async def event(self, event: OMEvent, command: EmitEvent, arrival: Arrival[SourceRecord]) -> None:
        self._on_sent.append(partial(count_event, self.parts.metrics, event))
        body = event.model_dump_json(by_alias=True, exclude_none=True).encode()
        self._queued.append(self._event(event.thread_id, body, event.event_type, command.event_id))

    def _event(self, subject: str, body: bytes, event_type: str, event_id: str) -> Publication:
        parts = self.parts
        return Publication(parts.kafka.topic_events, subject.encode(), body, event_headers(
            event_type, event_id, subject, parts.source, parts.clock.now_ms()))

    async def context(self, command: PublishContext, arrival: Arrival[SourceRecord], *,
                      folded: Sequence[Arrival[SourceRecord]] = ()) -> None:
        if arrival.trace is None:
            await self._context(command, arrival, folded, [])
            return
        if not recording(arrival.trace):
            # sampled out: no span, but the agent's consumer is told so (the unsampled context travels on)
            await self._context(command, arrival, folded, inject(arrival.trace))
            return
        # the agent's consumer continues the trace from this span (the context record's trace headers); the
        # thread's earlier inputs of the batch, whose context this is too, are its links
        tracing = self.parts.tracing
        with traced(tracing.tracer, "om.context publish", context=arrival.trace, kind=SpanKind.PRODUCER,
                    attributes={"messaging.system": "kafka", "messaging.operation.type": "send",
                                "messaging.destination.name": self.parts.kafka.topic_context,
                                **tracing.subject_attributes(thread_id=command.spec.thread_id)},
                    links=folded_links(folded)) as span:
            version = await self._context(command, arrival, folded, inject())
            span.set_attribute("om.context.version", version)

    async def _context(self, command: PublishContext, arrival: Arrival[SourceRecord],
                       folded: Sequence[Arrival[SourceRecord]], trace: list[tuple[str, bytes]]) -> int:
        parts = self.parts
        spec = command.spec
        headers = [("om_version", str(spec.version).encode()),
                   ("om_through_message_id", (spec.through_message_id or "").encode()), *trace]
        context: ContextRecord | None = None
        if parts.by_reference is not None:
            # v2 never renders the v1 record: the HTTP API renders it when asked, and the one it kept goes (a
            # context republished at the same version must not be served as it was)
            self._queued.extend(await self._by_reference(parts.by_reference, spec, headers))
            if parts.on_forget is not None:
                self._on_sent.append(partial(parts.on_forget, spec.thread_id))
        else:
            context = await parts.store_retry("read", partial(parts.effects.context, spec,
                                                              now_ms=parts.clock.now_ms()))
            self._queued.append(Publication(parts.kafka.topic_context, spec.thread_id.encode(), encode(context),
                                            headers))
        # the latency of every message this context is the first to answer: the folded ones' too (the metric is
        # per message); the newest input's whatever its kind, as before (a context a result or a timer published)
        samples = [(a.source.received_at, exemplar(a.trace) if trace else None) for a in folded
                   if isinstance(a.input, MessageAppended)]
        samples.append((arrival.source.received_at, exemplar(arrival.trace) if trace else None))
        self._on_sent.append(partial(self._context_sent, context, samples))
        return spec.version

    async def _by_reference(self, published: PublishedContexts, spec: ContextSpec,
                            headers: list[tuple[str, bytes]]) -> list[Publication]:
        """The v2 records of the context of ``spec``, against what its thread's last publication (this batch's, else
        the last one sent) left readers holding; that advances once the batch commits."""
        parts = self.parts
        thread_id = spec.thread_id
        previous = self._sent[thread_id] if thread_id in self._sent else published.sent(thread_id)
        records, sent = await parts.store_retry("read", partial(parts.effects.by_reference, spec,
                                                                now_ms=parts.clock.now_ms(), previous=previous))
        self._sent[thread_id] = sent
        self._on_sent.append(partial(published.advance, thread_id, sent, from_nothing=previous is None,
                                     generation=self.generation))
        out = publications(parts.kafka, records, headers)
        if parts.late is not None:
            blocks = [p.key for p in out if p.topic == parts.kafka.topic_context_blocks and p.value is not None]
            self._on_queued.append(partial(parts.late.note, (self.generation, thread_id, spec.record_key,
                                                             spec.epoch), blocks))
        return out

    async def request(self, command: RequestObservation | RequestReflection, arrival: Arrival[SourceRecord]) -> None:
        covered = command.message_ids if isinstance(command, RequestObservation) else ()
        trace = request_headers(self.parts.message_spans, arrival, command.record_key, covered)
        publication = Publication(self.parts.kafka.topic_model_requests, command.record_key.encode(),
                                  encode_internal(command), [("om_request_id", command.request_id.encode()), *trace],
                                  partition=arrival.source.partition)
        self._requests[id(publication)] = (command.cycle_id, command.attempt)
        self._queued.append(publication)

    async def index(self, command: IndexForRecall, arrival: Arrival[SourceRecord]) -> None:
        if self.parts.index_for_recall:
            self._internal(command.record_key, command, arrival)

    async def expire_index(self, command: ExpireIndex, arrival: Arrival[SourceRecord]) -> None:
        if self.parts.index_for_recall:
            self._internal(command.record_key, command, arrival)

    async def forget(self, resource_id: str, key: str, arrival: Arrival[SourceRecord]) -> None:
        if self.parts.index_for_recall:
            self._internal(key, ForgetIndexed(resource_id, key), arrival)

    async def forget_context(self, thread_id: str, arrival: Arrival[SourceRecord]) -> None:
        """A tombstone on the compacted context topic: the thread's last context goes at the next cleaning
        (``max.compaction.lag.ms`` bounds when), and every consumer that reads it forgets the thread's context."""
        parts = self.parts
        if parts.on_forget is not None:
            self._on_sent.append(partial(parts.on_forget, thread_id))
        self._queued.append(Publication(parts.kafka.topic_context, thread_id.encode(), None, [("om_erased", b"1")]))
        # v2: the index and the blocks of the thread's last two indexes too, queued after whatever this batch sent
        # of the thread; the erase itself also reads the topic for the blocks no one remembers (``context_sweep``)
        if parts.by_reference is not None:
            digests = parts.by_reference.digests(thread_id)
            pending = self._sent.get(thread_id)
            if pending is not None:
                digests = list(dict.fromkeys((*pending.index.blocks, *digests)))
            self._sent[thread_id] = None  # a context after the erase in this batch starts from nothing
            self._queued.extend(erase_publications(parts.kafka, thread_id, digests))
            self._on_sent.append(partial(parts.by_reference.forget, thread_id))

    async def erased(self, event: ErasedEvent, arrival: Arrival[SourceRecord]) -> None:
        """The receipt, keyed by the erased subject (its thread, or its resource)."""
        subject = event.thread_id or event.resource_id or ""
        self._on_sent.append(partial(count_event, self.parts.metrics, event))
        body = event.model_dump_json(by_alias=True).encode()
        self._queued.append(self._event(subject, body, event.event_type, f"erased-{event.erase_id}"))

    def internal(self, topic: str, key: str, work: InternalRecord, partition: int) -> None:
        """Internal work (an erase's steps) to a partition of an internal topic."""
        self._queued.append(Publication(topic, key.encode(), encode_internal(work), partition=partition))

    async def refuse(self, command: RejectInput, arrival: Arrival[SourceRecord]) -> None:
        if not command.keep_input:  # past the retention window: counted and dropped, never copied to the DLQ
            self._on_sent.append(self.parts.metrics.expired_inputs.inc)
            log.info("input for %s not recorded: %s", command.record_key, command.reason)
            return
        reason, detail = ((command.reason, command.detail) if command.reason in DLQ_REASONS else
                          ("rejected_command", f"{command.reason}: {command.detail}"))
        self.dead_letter(arrival.source, reason, detail)

    async def failed(self, arrival: Arrival[SourceRecord], reason: str, detail: str, error: BaseException) -> None:
        if reason == "processing_error":
            self._on_sent.append(self.parts.metrics.processing_errors.inc)
        self.dead_letter(arrival.source, reason, detail)

    def _internal(self, key: str, work: InternalRecord, arrival: Arrival[SourceRecord]) -> None:
        """Work for the model workers, on the record's home partition (so its results come back there)."""
        self.internal(self.parts.kafka.topic_model_requests, key, work, arrival.source.partition)

    def _context_sent(self, context: ContextRecord | None,
                      samples: Sequence[tuple[float, dict[str, str] | None]]) -> None:
        metrics = self.parts.metrics
        metrics.contexts_published.inc()
        now = time.monotonic()
        for received_at, trace in samples:
            if received_at:  # the exemplar: the trace of the input it measures, when that was sampled
                metrics.message_to_context.observe(max(0.0, now - received_at), exemplar=trace)
        if self.parts.on_context is not None and context is not None:
            self.parts.on_context(context)

    async def commit(self) -> None:
        """Queue everything in order (a thread's events stay ordered). The worker flushes the producer (every
        acknowledgement) before it commits the batch's offsets; a send that fails is logged and counted."""
        queued, self._queued = self._queued, []
        sent, self._on_sent = self._on_sent, []
        on_queued, self._on_queued = self._on_queued, []
        requests, self._requests = self._requests, {}
        for count in sent:
            count()
        asked = self.parts.asked
        for publication in queued:
            acknowledged = await self.parts.publisher.send(publication)
            if isinstance(acknowledged, asyncio.Future):
                acknowledged.add_done_callback(self._check_sent)
                call = requests.get(id(publication))
                if call is not None and asked is not None:
                    acknowledged.add_done_callback(partial(_note_asked, asked, call))
        for tell in on_queued:  # after the sends: a flush begun from now on covers them
            tell()

    def discard(self) -> None:
        self._queued.clear()
        self._requests.clear()
        self._on_sent.clear()
        self._on_queued.clear()
        self._sent.clear()

    def _check_sent(self, future: asyncio.Future[object]) -> None:
        if not future.cancelled() and future.exception() is not None:
            self.parts.metrics.store_errors.labels("publish").inc()
            log.error("a publication was not acknowledged: %r", future.exception())


def _note_asked(asked: AskedCycles, call: tuple[str, int], future: asyncio.Future[object]) -> None:
    """A model request the broker acknowledged: in the requests topic, whoever holds its record next."""
    if not future.cancelled() and future.exception() is None:
        asked.asked(*call)
