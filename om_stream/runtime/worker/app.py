"""The assembled ``om-stream worker``: one Worker per process, built from settings (no module-level app), which
puts the pieces together and owns none of their work.

The worker's role (``roles``) decides which agents the app defines and its consumer group (the app id, or
``<app_id>-models`` / ``<app_id>-recall``); the state table, its timers and the ``/v1/*`` API exist only with the
memory agent. Agents (each with concurrency 1; at-least-once; effects idempotent):
* ``memory``: the table-owning agent. Inputs: messages, commands and the internal results topic (model results
  and timers), all keyed by record and co-partitioned: a record's inputs, its state (``state_table``) and its
  internal records share one partition number, its home. It runs ``core.decide`` in batches (``ingest``, then
  ``processor``) and never awaits a model call. Its offsets are committed by the worker, not by Faust (``offsets``).
* ``ingest`` (resource scope only): validates messages and commands and re-keys them by resource id (``ingest``;
  offsets committed like the memory agent's).
* ``model_workers`` (``model_requests``): Observer/Reflector requests and the recall index's work, run as bounded
  concurrent tasks, each answered at most once per request; each result goes back to the results topic at the
  record's home partition.
* ``recall`` (``recall_requests``): the recall tool over ``om.recall.requests`` → ``om.recall.responses``, answered
  as bounded concurrent tasks; the HTTP API answers ``POST /v1/recall`` with the same endpoint.

Where the rest lives: the Faust app, topics and agent definitions in ``faust_app`` (every agent reports its own
crash to ``liveness``, which stops the process: crash-only); what happens when partitions change hands in
``handover`` (revoke, assign, fencing, seeking, the records taken over after recovery); liveness, lag, recovery time
and the inventory in ``watches``, in every role; the records' due timers, checked every ``worker.timer_interval_s``
once the take-over has settled, in ``timer_inputs``; Faust's private members in ``faust_internals`` only.

Membership: with ``kafka.group_instance_id`` the consumer is a static member (``group.instance.id``): a restart
within ``kafka.session_timeout_s`` gets the same partitions back without a rebalance of the group, and a stop sends
no LeaveGroup, so a stopped worker's partitions wait for the session timeout before another worker takes them.

Stop (:meth:`Worker.drain`, before the consumer leaves the group): the memory agent stops handling and commits, no
new call starts, the calls running get ``worker.drain_timeout_s`` to finish, the rest are handed back (``drain``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faust.types import TP

from om_stream.core.state import RecordState
from om_stream.retention import changelog_config, fence_window_ms, segment_roll_interval_ms
from om_stream.runtime.clock import SystemClock
from om_stream.runtime.effects import Effects
from om_stream.runtime.erasure import Sweeper
from om_stream.runtime.host_ports import StoreRetry
from om_stream.runtime.recall import RecallEndpoint
from om_stream.runtime.settled import StateWatch
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.context_sweep import ContextSweep, LatePublications, OrphanSweep, PartitionReader
from om_stream.runtime.worker.context_wire import PublishedContexts
from om_stream.runtime.worker.deps import WorkerDeps, engine_limits, kafka_client_options
from om_stream.runtime.worker.drain import Drained, InFlight
from om_stream.runtime.worker.erasure import ErasureTable, WorkerErasures
from om_stream.runtime.worker.faust_app import (
    RAW,
    FaustPublisher,
    changelogs,
    crash_reported,
    define_ingest_agent,
    define_memory_agent,
    internal_topics,
    new_app,
)
from om_stream.runtime.worker.faust_internals import (
    commit_offsets,
    recovery_completed,
    recovery_remaining,
    sought_offset,
)
from om_stream.runtime.worker.group_lag import GroupLagProbe
from om_stream.runtime.worker.handover import Handover, TakeOver
from om_stream.runtime.worker.ingest import Ingest
from om_stream.runtime.worker.inventory import Inventory
from om_stream.runtime.worker.liveness import Liveness
from om_stream.runtime.worker.local_state import MARK_INTERVAL_S, LocalTableState
from om_stream.runtime.worker.membership import Membership
from om_stream.runtime.worker.model_requests import ModelRequests
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.runtime.worker.partition_log import PartitionLog
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.runtime.worker.recall_requests import RecallRequests
from om_stream.runtime.worker.recent_contexts import RecentContexts
from om_stream.runtime.worker.roles import RolePlan, role_plan
from om_stream.runtime.worker.segment_roll import SegmentRoll
from om_stream.runtime.worker.state_table import TABLE_NAME, RecordTable
from om_stream.runtime.worker.timer_inputs import TimerInputs
from om_stream.runtime.worker.watches import Watches, stall_diagnosis
from om_stream.runtime.worker.web import register_views

__all__ = ["Worker"]


class Worker:
    """The assembled worker: the Faust app and the pieces its agents share (for tests and the CLI)."""

    def __init__(self, deps: WorkerDeps) -> None:
        self.deps = deps
        settings = deps.settings
        kafka, worker = settings.kafka, settings.worker
        resource_scope = deps.config.scope == "resource"
        self.plan: RolePlan = role_plan(worker.role, worker.app_id, resource_scope=resource_scope)
        self.clock = SystemClock()
        self.timers = TimerWheel()
        self.contexts = RecentContexts()  # the latest of the threads published or read last (bounded)
        # OM_CONTEXT_WIRE=v2: what each thread's readers hold, so a context sends only what changed (bounded)
        self.published_contexts = PublishedContexts() if deps.settings.context_wire == "v2" else None
        self.late_contexts: LatePublications | None = None  # v2, memory roles: ``_hold_table``
        # v2: an erase reads its threads' partitions of om.context.blocks (context_sweep.py)
        self.context_reader = (PartitionReader(kafka.bootstrap, client_options=kafka_client_options(kafka))
                               if self.published_contexts is not None else None)
        self.started_at = time.monotonic()
        self.app = new_app(settings, self.plan)
        self.memory_inputs = ((kafka.topic_records, kafka.topic_model_results) if resource_scope else
                              (kafka.topic_messages, kafka.topic_commands, kafka.topic_model_results))
        # the topics whose offsets the ledger commits (the memory agent's, and the ingest agent's in resource scope)
        ledger_topics = {*self.memory_inputs, *((kafka.topic_messages, kafka.topic_commands)
                                                if resource_scope else ())}
        # the brokers, asked before a gap in the inputs is taken for a real one, and where a partition starts while
        # Faust does not know (the app reads uncommitted records)
        self.partition_log = PartitionLog(kafka.bootstrap, client_options=kafka_client_options(kafka),
                                          group_id=self.plan.group_id)
        self.offsets = OffsetLedger(self._commit_offsets, TP, committed=self._committed_offset,
                                    first_offset=self.partition_log.first_offset,
                                    group_start=self.partition_log.group_start)
        self.membership = Membership(lambda: self.app.consumer, session_timeout_s=kafka.session_timeout_s)
        self.handover = Handover(self.app, self.offsets, self.membership, ledger_topics=ledger_topics,
                                 tracing=deps.tracing)
        self.liveness = Liveness(deps.metrics, stall_timeout_s=worker.stall_timeout_s,
                                 diagnose=functools.partial(stall_diagnosis, self.app, self.offsets),
                                 outages=deps.outages, outage_budget_s=worker.store_outage_budget_s)
        self._watched = crash_reported(self.liveness)
        self.publisher = FaustPublisher(self.app)
        self.recall = RecallEndpoint(deps.recall, deps.metrics, retrieval=deps.config.retrieval,
                                     tracing=deps.tracing)
        self.in_flight = InFlight()
        self.inventory = Inventory(deps.metrics)  # what the process holds, on gauges (inventory.py)
        self.inventory.entries("inflight_calls", lambda: len(self.in_flight))
        self.agents: dict[str, Any] = {}
        if self.plan.holds_table:
            self._hold_table()
        if self.plan.calls_models:
            requests = ModelRequests(deps, self.publisher, self.recall, self.in_flight)
            self.agents["model_workers"] = requests.define(self.app, self._watched, RAW)
            self.inventory.entries("model_calls", lambda: len(requests.calls))
        if self.plan.answers_recall:
            self.agents["recall"] = RecallRequests(deps, self.publisher, self.recall, self.in_flight).define(
                self.app, self._watched, RAW)
        group_lag = GroupLagProbe(kafka.bootstrap, self.plan.group_id, self.consumed_topics(), kafka.partitions,
                                  client_options=kafka_client_options(kafka))
        self.watches = Watches(self.app, deps.metrics, liveness=self.liveness, recovered=lambda: self.recovered,
                               group_lag=group_lag, in_flight=self.in_flight, inventory=self.inventory,
                               started_at=self.started_at,
                               stranded=self._rescue_stranded if self.plan.holds_table else None,
                               recovery_remaining=functools.partial(recovery_remaining, self.app))
        self.watches.define()
        deps.metrics.worker_role.labels(self.plan.role).set(1)
        if self.plan.holds_table:
            register_views(self)

    def _hold_table(self) -> None:
        """The memory side: the state table, the processor that folds inputs into it, its agents and timers. These
        attributes exist only in the roles that hold the table (``all``, ``memory``)."""
        deps, kafka, worker = self.deps, self.deps.settings.kafka, self.deps.settings.worker
        lifecycle = deps.settings.lifecycle
        self.watch = StateWatch()  # wakes the HTTP API's settled waits when a record's state is written
        changelog = changelog_config(lifecycle, segment_bytes=kafka.changelog_segment_mb * 2**20)
        self.table = RecordTable(self.app, partitions=kafka.partitions, active_partitions=self.active_partitions,
                                 changelog_config=changelog, on_write=self.watch.changed)
        # erasures' fences and progress (runtime/worker/erasure.py): a changelog like the record table's
        self.erasure_table = ErasureTable(self.app, partitions=kafka.partitions, changelog_config=changelog)
        # erased records must leave the compacted topics and the local copies of the table (see the modules)
        self.segment_roll = SegmentRoll(self.publisher.tombstone, (kafka.topic_context, kafka.topic_context_index,
                                                                   kafka.topic_context_blocks, *self.changelogs()),
                                        self.active_partitions)
        self.local_state = (LocalTableState(Path(self.app.conf.tabledir), TABLE_NAME,
                                            tombstone_retention_s=lifecycle.tombstone_retention_s)
                            if worker.table_store.startswith("rocksdb") else None)
        self.effects = Effects(deps.store, deps.config, count_text=deps.counter.count,
                               cache_bytes=worker.content_cache_mb * 1024 * 1024,
                               search_available=self.recall.indexing)
        # v2: what this worker published, checked against the erasure ledger once acknowledged (context_sweep.py)
        self.late_contexts = (LatePublications(
            kafka, self.publisher, self._flush_producer, store=deps.store, metrics=deps.metrics,
            store_retry=StoreRetry(retry_outages=True, on_error=lambda op: deps.metrics.store_errors.labels(op).inc()),
            confirm=self.membership.confirm) if self.published_contexts is not None else None)
        self.processor = MemoryProcessor(
            kafka=kafka, config=deps.config, accountant=deps.accountant, effects=self.effects,
            publisher=self.publisher, table=self.table, clock=self.clock, metrics=deps.metrics,
            timers=self.timers, source=f"om-stream/{worker.app_id}", on_context=self.contexts.remember,
            index_for_recall=self.recall.indexing, generation=self.handover.generation, confirm=self.membership.confirm,
            limits=engine_limits(self.deps.settings),
            on_forget=self.contexts.forget, erasures=self._erasures, by_reference=self.published_contexts,
            late=self.late_contexts,
            tracing=deps.tracing)
        inventory, cache = self.inventory, self.effects.cache
        inventory.table(self.table.local_records, self.table.local_bytes)
        inventory.cache(lambda: cache.size_bytes)
        for name, size in (("decoded_states", lambda: self.table.decoded_size), ("recent_contexts",
                           lambda: len(self.contexts)), ("published_contexts",
                           lambda: len(self.published_contexts or ())), ("content_cache", lambda: len(cache)),
                           ("timers", lambda: len(self.timers)), ("timer_heap", lambda: self.timers.heap_size),
                           ("settled_waiters", lambda: self.watch.waiters),
                           ("near_block_after", lambda: len(self.processor.near_limit))):
            inventory.entries(name, size)
        self.timer_inputs = TimerInputs(self.publisher, kafka.topic_model_results, table=self.table,
                                        timers=self.timers, clock=self.clock, tracing=deps.tracing,
                                        resource_scope=deps.config.scope == "resource")
        # v2: the blocks a list dropped while this worker did not know it (after a take-over), read and tombstoned
        self.orphan_sweep = (OrphanSweep(kafka, self.publisher, self._flush_producer, self.context_reader,
                                         self.published_contexts, self.offsets.batch,
                                         holding=lambda: self.recovered and self.offsets.accepting)
                             if self.published_contexts is not None and self.context_reader is not None else None)
        self.take_over = TakeOver(self.app, recovered=lambda: self.recovered, table=self.table,
                                  processor=self.processor, contexts=self.contexts,
                                  published=self.published_contexts, timers=self.timers,
                                  watch=self.watch, config=deps.config, send_timer=self.timer_inputs.send,
                                  local_state=self.local_state, changelogs=self.changelogs(),
                                  active_partitions=self.active_partitions)
        self.ingest = Ingest(kafka, deps.metrics, offsets=self.offsets, handover=self.handover,
                             processor=self.processor, publisher=self.publisher)
        self._define_memory_agents()

    def _erasures(self, processor: MemoryProcessor) -> WorkerErasures:
        deps = self.deps
        fence_s = fence_window_ms(deps.settings.kafka, deps.settings.lifecycle,
                                  resource_scope=deps.config.scope == "resource") // 1000
        return WorkerErasures(
            kafka=deps.settings.kafka, scope=deps.config.scope, records=self.table, table=self.erasure_table,
            store=deps.store, sweeper=Sweeper(deps.store, self.effects, processor.store_retry, fence_s),
            end_offsets=self.partition_log.end_offsets, clock=self.clock,
            metrics=deps.metrics, store_retry=processor.store_retry, fence_ttl_s=fence_s,
            indexing=self.recall.indexing, decide_clear=processor.clear_now,
            context_sweep=ContextSweep(deps.settings.kafka, self.publisher, self._flush_producer, self.context_reader)
            if self.context_reader is not None else None)

    async def _flush_producer(self) -> None:
        await self.app.producer.flush()

    @property
    def recovered(self) -> bool:
        """The state table is recovered and no rebalance is under way (without a table, Faust's recovery completes
        as soon as the consumer has its assignment, even an empty one: a models or recall worker has joined its
        group)."""
        return recovery_completed(self.app) and not self.app.in_recovery and not self.app.rebalancing

    @property
    def ready(self) -> bool:
        """What ``/healthz`` says: recovered, live, and not stopping."""
        return self.recovered and self.liveness.live and self.in_flight.open

    @property
    def draining(self) -> bool:
        """A graceful stop began: no new input or call is taken (``/readyz`` takes the pod out of the Service)."""
        return not self.in_flight.open

    @property
    def role(self) -> str:
        return self.plan.role

    def internal_topics(self) -> dict[str, tuple[int, dict[str, str]]]:
        """The Faust app's own topics, as Faust would create them (``faust_app.internal_topics``)."""
        return internal_topics(self.app)

    def changelogs(self) -> tuple[str, ...]:
        """The state table's changelog topic (none in the roles that hold no table)."""
        return changelogs(self.app)

    def consumed_topics(self) -> tuple[str, ...]:
        """Every topic the worker's agents consume (the group's lag is read on these)."""
        kafka = self.deps.settings.kafka
        topics = {"memory": self.memory_inputs, "ingest": (kafka.topic_messages, kafka.topic_commands),
                  "model_workers": (kafka.topic_model_requests,), "recall": (kafka.topic_recall_requests,)}
        return tuple(topic for agent in self.plan.agents for topic in topics[agent])

    async def drain(self) -> Drained:
        """The graceful stop, while the consumer is still in the group: the memory agent finishes its batch, commits
        what it handled and handles nothing more (inputs not handled stay uncommitted); no new model or recall call
        starts; the running ones get ``worker.drain_timeout_s``, then are handed back (``drain``)."""
        await self.offsets.close()
        drained = await self.in_flight.drain(self.deps.settings.worker.drain_timeout_s)
        await self.app.producer.flush()  # the results of the calls that finished
        if self.plan.holds_table:
            # the copies of the state table held followed the changelog up to this stop: the next start keeps them
            await self.take_over.keep_local_state()
        await self.watches.group_lag.close()
        await self.partition_log.close()
        if self.context_reader is not None:
            await self.context_reader.close()
        return drained

    async def _commit_offsets(self, offsets: Mapping[TP, int]) -> bool:
        # Faust's own commit step for given offsets: flush the producer (every output acknowledged), commit the
        # offsets of the partitions still assigned, and tell the monitor (the lag metric reads it). Then, v2: the
        # contexts published so far are acknowledged, and those of a generation the group no longer confirms are
        # checked against the erasure ledger
        committed = await commit_offsets(self.app.consumer, offsets)
        if self.late_contexts is not None:
            await self.late_contexts.check()
        return committed

    def _committed_offset(self, tp: TP) -> int | None:
        # the offset Faust sought the partition to when its recovery completed (after the last assignment)
        return sought_offset(self.app.consumer, tp)

    def active_partitions(self) -> set[int]:
        """Partitions of the memory agent's inputs assigned to this worker now."""
        return {tp.partition for tp in self.app.consumer.assignment() if tp.topic in self.memory_inputs}

    def _define_memory_agents(self) -> None:
        app, kafka, worker = self.app, self.deps.settings.kafka, self.deps.settings.worker
        self.agents["memory"] = define_memory_agent(app, self.memory_inputs, batch_max=worker.batch_max,
                                                    within_s=worker.batch_within_s, handle=self.ingest.memory_batch,
                                                    watched=self._watched)
        if "ingest" in self.plan.agents:  # resource scope
            self.agents["ingest"] = define_ingest_agent(app, (kafka.topic_messages, kafka.topic_commands),
                                                        handle=self.ingest.resource_event, watched=self._watched)

        app.timer(interval=worker.timer_interval_s)(self._fire_timers)
        app.timer(interval=worker.commit_interval_s)(self.offsets.commit)
        app.timer(interval=segment_roll_interval_ms(self.deps.settings.lifecycle) / 1000)(self._roll_segments)
        app.timer(interval=MARK_INTERVAL_S)(self.take_over.keep_local_state)
        self.handover.connect()
        self.take_over.connect()

    async def _rescue_stranded(self) -> None:
        # only between batches, and while the ledger takes records (not from a revocation to the next assignment)
        if not self.ingest.handling and self.offsets.accepting:
            await self.handover.rescue_stranded()

    async def _roll_segments(self) -> None:
        if self.recovered and self.in_flight.open:
            await self.segment_roll.roll()
            if self.orphan_sweep is not None and await self.take_over.settled():
                await self.orphan_sweep.sweep()

    async def _fire_timers(self) -> None:
        if not self.in_flight.open:  # stopping: the records' next owner fires their timers
            return
        if await self.take_over.settled():  # after a rebalance, the records held are taken over first
            await self.timer_inputs.send_due()

    def state(self, key: str) -> RecordState | None:
        """The state of a record held by this worker now (None: not held here)."""
        held = self.table.lookup(key)
        return held.state if held is not None else None
