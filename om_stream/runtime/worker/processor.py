"""The memory agent's driver of the host for a batch of Kafka records, independent of Faust (testable on its own).

Each record becomes an input for its record (``decoding``; an unreadable one goes to the dead-letter topic with
the reason), and the batch goes to the ``Host`` (``runtime/host.py``), which decides and commits it in the one
commit order on an outlet of its own (``outlet``: one per batch, made here). Step 4 of the commit order, the input
offsets, is the worker's (``offsets.py``).

A batch commits only if its records were read in the consumer generation that is current when it commits: a
worker that lost the group's generation while it worked must not write over the new owner's state (the records
are read again from the committed offsets, by whoever owns them now).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from om_stream.core.config import ResolvedConfig
from om_stream.core.inputs import ClearRecord
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.core.views import near_block_after
from om_stream.errors import WireDecodeError
from om_stream.observability.lifecycle_metrics import activation_waits
from om_stream.observability.metrics import Metrics
from om_stream.observability.tracing import Tracing
from om_stream.ports import Clock
from om_stream.runtime.effects import Effects
from om_stream.runtime.host import Host
from om_stream.runtime.host_ports import Arrival, Decided, Erasures, StateTable, StoreRetry
from om_stream.runtime.ingest_spans import MessageSpans
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.asked_cycles import AskedCycles
from om_stream.runtime.worker.context_sweep import LatePublications
from om_stream.runtime.worker.context_wire import PublishedContexts
from om_stream.runtime.worker.decoding import InputDecoder
from om_stream.runtime.worker.ingest_traces import IngestSpans
from om_stream.runtime.worker.kafka_records import Publisher, SourceRecord
from om_stream.runtime.worker.outlet import KafkaOutlet, OutletParts
from om_stream.settings import KafkaSettings
from om_stream.wire.context import ContextRecord

__all__ = ["ErasuresFactory", "MemoryProcessor"]

log = logging.getLogger(__name__)

ErasuresFactory = Callable[["MemoryProcessor"], Erasures[SourceRecord]]
"""Makes the worker's erasures for a processor (they clear records through its host, with its store retry)."""


class MemoryProcessor:
    def __init__(self, *, kafka: KafkaSettings, config: ResolvedConfig, accountant: TokenAccountant,
                 effects: Effects, publisher: Publisher, table: StateTable[SourceRecord], clock: Clock,
                 metrics: Metrics, timers: TimerWheel, limits: EngineLimits | None = None, source: str = "om-stream",
                 on_context: Callable[[ContextRecord], None] | None = None, index_for_recall: bool = False,
                 generation: Callable[[], int] | None = None,
                 confirm: Callable[[int], Awaitable[bool]] | None = None,
                 on_forget: Callable[[str], None] | None = None,
                 by_reference: PublishedContexts | None = None, late: LatePublications | None = None,
                 erasures: ErasuresFactory | None = None, tracing: Tracing | None = None) -> None:
        self.kafka = kafka
        self.tracing = tracing or Tracing.off()
        self.message_spans = MessageSpans()
        self.asked = AskedCycles()  # the model calls asked from here: a take-over does not ask for them again
        self.config = config
        self.metrics = metrics
        self.near_limit: set[str] = set()
        self.generation = generation or (lambda: 0)  # the consumer generation now
        self.confirm = confirm  # asked before a batch commits: does the group still hold this generation?
        self.batch_generation = 0  # the generation of the batch in hand (its outlets say it: ``LatePublications``)
        self.decoder = InputDecoder(kafka, config)
        store_retry = StoreRetry(retry_outages=True, on_error=lambda op: metrics.store_errors.labels(op).inc())
        self.store_retry = store_retry
        self.outlet_parts = OutletParts(
            kafka=kafka, effects=effects, publisher=publisher, clock=clock, metrics=metrics, store_retry=store_retry,
            source=source, index_for_recall=index_for_recall, on_context=on_context, on_forget=on_forget,
            tracing=self.tracing, message_spans=self.message_spans, by_reference=by_reference, late=late,
            asked=self.asked)
        self.host: Host[SourceRecord] = Host(
            config=config, accountant=accountant, effects=effects, table=_Metered(table, self),
            outlets=self.new_outlet, timers=timers, clock=clock, limits=limits, store_retry=store_retry,
            on_decided=self._decided, on_publish_error=metrics.processing_errors.inc,
            erasures=erasures(self) if erasures is not None else None, tracing=self.tracing)

    def new_outlet(self) -> KafkaOutlet:
        """An outlet for one batch (of the host's, or of the dead letters of a batch's decoding)."""
        return KafkaOutlet(self.outlet_parts, self.batch_generation)

    async def clear_now(self, state: RecordState, arrival: Arrival[SourceRecord], outlet: KafkaOutlet) -> RecordState:
        """``state`` cleared (its log rebuilt from its stored messages) within an erase's handling, its
        publications prepared on the erase's ``outlet``."""
        return await self.host.decide_on(state, Arrival(arrival.key, state.resource_id, ClearRecord(None),
                                                        arrival.source), outlet)

    async def process(self, records: Sequence[SourceRecord]) -> bool:
        """Handle one batch. Returns False when it was fenced off (read in an earlier consumer generation, or the
        group no longer holds that generation): nothing of it was written to the table or published, and its records
        must not count as processed."""
        if not records:
            return True
        generation = self.generation()
        if any(record.generation != generation for record in records):
            return self._fenced(records, "read before the last rebalance")
        self.batch_generation = generation
        spans = IngestSpans(self.tracing, self.message_spans, records) if self.tracing.enabled else None
        try:
            return await self._process(records, generation, spans)
        finally:
            if spans is not None:
                spans.end()

    async def _process(self, records: Sequence[SourceRecord], generation: int, spans: IngestSpans | None) -> bool:
        letters = self.new_outlet()  # the records that are no input: dead letters, sent once the batch commits
        arrivals = []
        for topic, count in Counter(record.topic for record in records).items():  # one label lookup per topic
            self.metrics.messages_in.labels(topic).inc(count)
        for index, record in enumerate(records):
            try:
                if spans is None:
                    arrivals.append(self.decoder.decode(record))
                else:
                    began = time.perf_counter()
                    arrival = self.decoder.decode(record)
                    arrivals.append(spans.decoded(index, arrival, time.perf_counter() - began))
            except WireDecodeError as exc:
                letters.dead_letter(record, exc.reason, exc.detail)
                if spans is not None:
                    spans.refused(index, exc.reason)

        async def may_commit() -> bool:
            if self.generation() != generation:
                return False
            return self.confirm is None or await self.confirm(generation)

        # with no input the host has nothing to commit: the dead letters are confirmed here (held for the next
        # batch, they would wait for traffic that may never come, and a later fenced batch or a stop would drop
        # them with their offsets already committed)
        committed = await self.host.apply(arrivals, may_commit=may_commit) if arrivals else await may_commit()
        if not committed:
            letters.discard()
            if spans is not None:
                spans.fenced()
            return self._fenced(records, "straddled a rebalance")
        await letters.commit()  # before the caller commits these offsets
        return True

    def _fenced(self, records: Sequence[SourceRecord], why: str) -> bool:
        self.metrics.fenced_batches.inc()
        log.info("a batch of %d records %s was dropped", len(records), why)
        return False

    def _decided(self, decided: Decided[SourceRecord]) -> None:
        self.metrics.decide_seconds.observe(decided.seconds)
        # the core's backoff counter, not an event: a reflection that failed or was condensed makes the next one wait
        if decided.after.unproductive_reflections > decided.before.unproductive_reflections:
            self.metrics.reflection_backoffs.inc()
        for seconds in activation_waits(decided.before, decided.commands, decided.now_ms):
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

    def __init__(self, table: StateTable[SourceRecord], processor: MemoryProcessor) -> None:
        self.table = table
        self.processor = processor

    def get(self, arrival: Arrival[SourceRecord]) -> RecordState | None:
        return self.table.get(arrival)

    def set(self, arrival: Arrival[SourceRecord], state: RecordState) -> None:
        self.table.set(arrival, state)
        self.processor.observe_record(arrival.key, state)
