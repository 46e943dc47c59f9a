"""The rebalance hand-over of the memory side: what the worker does when its partitions change hands.

Partitions (``Handover``), in the order Faust tells of them:

1. **Revoked**: the revocation waits for the batch in hand (the offset ledger's lock), commits what was handled and
   takes no record until the next assignment; ``membership`` notes it, so a batch that made it wait past a third of
   the session timeout heartbeats before it writes.
2. **Assigned**: the ledger takes records again; where each partition starts is Faust's sought offset, or the
   group's committed offset while Faust does not know it yet (``offsets``).
3. **Fencing**, for every batch: it commits only in the consumer generation it was read in, while the group's
   coordinator still holds that generation (:meth:`Handover.generation`); a batch read before the revocation, or by a
   member the group dropped, writes nothing and is read again by the partitions' owner.
4. **Seeking**: records handed over out of sequence (Faust drops some around a hand-over) are read again
   (:meth:`Handover.admit`), and so are the last records of a partition when Faust dropped them and nothing follows
   (:meth:`Handover.rescue_stranded`, asked by the watch each second).

Records (``TakeOver``), once the table has recovered after a rebalance, before any timer fires: the records of
partitions no longer held leave the local store and the processor, the recent contexts and the timer wheel keep the
held ones only; the HTTP API's waits look again; every model call in flight is asked again unless this process asked
for it itself (its request may never have left the previous owner: ``asked_cycles``); a retention purge the record
never scheduled is. The local copies of the table (RocksDB) of the partitions held are marked in step, and a stale
copy of one not held is wiped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

import faust
from faust.types import TP, EventT
from opentelemetry.context import get_current

from om_stream.core.config import ResolvedConfig
from om_stream.core.engine import record_config
from om_stream.core.expiry import PURGE_TIMER, purge_missing
from om_stream.core.inputs import TimerFired
from om_stream.observability.tracing import Tracing
from om_stream.runtime.settled import StateWatch
from om_stream.runtime.spans import traced
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.asked_cycles import to_resend
from om_stream.runtime.worker.context_wire import PublishedContexts
from om_stream.runtime.worker.faust_internals import connect
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.local_state import LocalTableState
from om_stream.runtime.worker.membership import Membership
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.runtime.worker.recent_contexts import RecentContexts
from om_stream.runtime.worker.state_table import RecordTable
from om_stream.runtime.worker.timer_inputs import SendTimer

__all__ = ["Handover", "TakeOver"]


class Handover:
    """Partitions revoked and assigned, the batches fenced, the records Faust dropped read again."""

    def __init__(self, app: faust.App, offsets: OffsetLedger, membership: Membership, *,
                 ledger_topics: Collection[str], tracing: Tracing | None = None) -> None:
        # ledger_topics: the topics whose offsets the ledger commits (the memory agent's, and the ingest agent's)
        self.app = app
        self.offsets = offsets
        self.membership = membership
        self.ledger_topics = ledger_topics
        self.tracing = tracing or Tracing.off()

    def connect(self) -> None:
        async def on_revoked(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.membership.revoking(True)
            try:
                if self.tracing.enabled:  # the hand-over's share of a rebalance: the batch in hand, the commit
                    with traced(self.tracing.tracer, "om.rebalance revoke"):
                        await self.offsets.revoke()
                else:
                    await self.offsets.revoke()
            finally:
                self.membership.revoking(False)

        def on_assigned(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.offsets.assigned()

        connect(self.app.on_partitions_revoked, on_revoked)
        connect(self.app.on_partitions_assigned, on_assigned)

    def generation(self) -> int:
        """The consumer generation a batch may commit in; none (-1) from a revocation to the next assignment, and
        once the coordinator no longer holds it (this member was dropped: see membership.py)."""
        if not self.offsets.accepting:
            return -1
        generation = int(self.app.consumer_generation_id)
        return generation if self.membership.current(generation) else -1

    def current(self, event: EventT[bytes]) -> bool:
        """``event`` was read in the generation a batch may commit in now."""
        return int(event.message.generation_id or 0) == self.generation()

    async def admit(self, records: list[SourceRecord]) -> list[SourceRecord]:
        """The records handed over in sequence; a gap (records Faust dropped) is read again (see offsets.py)."""
        admitted, seeks = await self.offsets.admit(records, lambda r: (r.topic, r.partition, r.offset))
        await self.seek_back(seeks)
        return admitted

    async def seek_back(self, seeks: Iterable[tuple[TP, int]]) -> None:
        """Read partitions again from the given offsets. Through ``seek_wait``, which seeks on the consumer's own
        thread: Faust's ``Consumer.seek`` calls aiokafka's ``seek`` from this one, and aiokafka then drops the
        partition's fetched records while its fetcher, on the consumer's thread, may be reading them (measured in
        the hour-long soak: the fetcher crashed with ``KeyError`` on that partition and the worker exited)."""
        targets = dict(seeks)
        if targets:
            await self.app.consumer.seek_wait(targets)

    async def rescue_stranded(self) -> None:
        """Seek back the partitions of the worker's own agents whose last records Faust dropped (offsets.py)."""
        consumer = self.app.consumer
        ends = {}
        for tp in consumer.assignment():
            if tp.topic in self.ledger_topics:
                try:
                    end = consumer.highwater(tp)
                except (AssertionError, KeyError, AttributeError, TypeError):  # not fetched yet
                    continue
                if end is not None:
                    ends[tp] = int(end)
        await self.seek_back(await self.offsets.stranded(ends))


class TakeOver:
    """The records this worker holds after a rebalance, taken over once the table has recovered."""

    def __init__(self, app: faust.App, *, recovered: Callable[[], bool], table: RecordTable,
                 processor: MemoryProcessor, contexts: RecentContexts, published: PublishedContexts | None,
                 timers: TimerWheel, watch: StateWatch,
                 config: ResolvedConfig, send_timer: SendTimer, local_state: LocalTableState | None,
                 changelogs: Iterable[str], active_partitions: Callable[[], set[int]]) -> None:
        self.app = app
        self.recovered = recovered
        self.table = table
        self.processor = processor
        self.contexts = contexts
        self.published = published
        self.timers = timers
        self.watch = watch
        self.config = config
        self.send_timer = send_timer
        self.local_state = local_state
        self.changelogs = frozenset(changelogs)
        self.active_partitions = active_partitions
        self.pending = True  # a take-over is due (at start, and after every rebalance)
        self.rebalanced_ns = time.time_ns()  # when the last rebalance completed: its recovery starts there

    def connect(self) -> None:
        def on_rebalance(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.pending = True
            self.rebalanced_ns = time.time_ns()

        connect(self.app.on_rebalance_complete, on_rebalance)

    async def settled(self) -> bool:
        """The records held here are taken over (taking them over now if a rebalance left that due); False while the
        table is not recovered (a rebalance may be under way: the take-over waits for it)."""
        if not self.recovered():
            self.pending = True
            return False
        if self.pending:
            self.pending = False
            await self._take_over()
            # the copies are in step from the recovery on: marked now, not only at the next periodic marking, so a
            # worker stopped within that interval does not leave copies its next start takes for stale and wipes
            await self.keep_local_state()
        return True

    async def _take_over(self) -> None:
        tracing = self.processor.tracing
        if not tracing.enabled:
            await self._take_over_records()
            return
        # the recovery of a rebalance: from its completion (the table's changelog read) to the records taken over
        with traced(tracing.tracer, "om.rebalance recovery", start_time=self.rebalanced_ns) as span:
            held, resent = await self._take_over_records()
            span.set_attributes({"om.records.held": held, "om.cycles.resent": resent})

    async def _take_over_records(self) -> tuple[int, int]:
        """Returns how many records are held here, and how many of their model calls were asked again."""
        self.table.forget_others()
        held = self.table.held()
        self.processor.keep_held({record.key for record in held})
        threads = {thread for record in held for thread in record.state.threads}
        for thread in [t for t in self.contexts if t not in threads]:
            del self.contexts[thread]
        if self.published is not None:  # a thread held now may have been published elsewhere meanwhile
            self.published.forget_all(keep_generation=self.processor.generation())
        self.timers.rebuild((record.key, record.state.timers) for record in held)
        self.watch.changed_all()  # the records held here, recovered: waits look again (or learn they moved)
        # a model call in flight when its record changed hands may be lost with the previous owner; asked
        # again, it is answered from the stored result or waits for the call still running elsewhere
        # (a call asked from here is in the requests topic already: ``asked_cycles``)
        asked = self.processor.asked
        asked.keep(cycle for record in held for cycle in record.state.cycles)
        resent = 0
        recovery = get_current()  # traced: the recovery's span, which each firing sent here links to
        for record in held:
            for cycle in to_resend(record.state.cycles, asked):
                await self.send_timer(record.key, record.partition, TimerFired(f"resend:{cycle.id}"), cause=recovery)
                resent += 1
            if purge_missing(record.state, record_config(self.config, record.state)):
                # retention was turned on while the record sat idle: its purge sets its timer
                await self.send_timer(record.key, record.partition, TimerFired(PURGE_TIMER), cause=recovery)
        return len(held), resent

    async def keep_local_state(self) -> None:
        """The local copies of the partitions held (active or standby) are in step once the table is recovered;
        a copy of a partition not held that has gone stale meanwhile is wiped before Faust could open it again."""
        if self.local_state is None or not self.recovered():
            return
        standbys = {tp.partition for tp in self.app.assignor.assigned_standbys() if tp.topic in self.changelogs}
        held = self.active_partitions() | standbys
        self.local_state.mark_in_step(held)
        self.local_state.wipe_stale(held=held)
