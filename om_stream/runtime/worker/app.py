"""The Faust app of ``om-stream worker``, built by a factory from settings (no module-level app).

The worker's role (``roles``) decides which of these agents the app defines and its consumer group (the app id, or
``<app_id>-models`` / ``<app_id>-recall``); the state table, its timers and the ``/v1/*`` API exist only with the
memory agent. Agents (each with concurrency 1; at-least-once; effects idempotent):
* ``memory``: the table-owning agent. Inputs: messages, commands and the internal results topic (model results
  and timers), all keyed by record and co-partitioned: a record's inputs, its state (``state_table``) and its
  internal records share one partition number, its home. It runs ``core.decide`` in batches (see ``processor``)
  and never awaits a model call. Its offsets are committed by the worker, not by Faust (``offsets``).
* ``ingest`` (resource scope only): validates messages and commands and re-keys them by resource id (offsets
  committed like the memory agent's).
* ``model_workers`` (``model_requests``): Observer/Reflector requests and the recall index's work, run as bounded
  concurrent tasks, each answered at most once per request; each result goes back to the results topic at the
  record's home partition.
* ``recall`` (``recall_requests``): the recall tool over ``om.recall.requests`` → ``om.recall.responses``, answered
  as bounded concurrent tasks; the HTTP API answers ``POST /v1/recall`` with the same endpoint.
Timers are checked every ``worker.timer_interval_s`` from table state (``timers.TimerWheel``). Every agent
reports its own crash to ``liveness``, which stops the process (crash-only).

Membership: with ``kafka.group_instance_id`` the consumer is a static member (``group.instance.id``): a restart
within ``kafka.session_timeout_s`` gets the same partitions back without a rebalance of the group, and a stop sends
no LeaveGroup, so a stopped worker's partitions wait for the session timeout before another worker takes them.

Stop (:meth:`Worker.drain`, before the consumer leaves the group): the memory agent stops handling and commits, no
new call starts, the calls running get ``worker.drain_timeout_s`` to finish, the rest are handed back (``drain``).
Every ``GROUP_LAG_INTERVAL_S`` the group's lag is read from the brokers (``group_lag``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import faust
from aiokafka.errors import KafkaError
from faust.types import TP, EventT
from mode.utils.times import want_seconds

from om_stream.core.engine import record_config
from om_stream.core.expiry import PURGE_TIMER, purge_missing
from om_stream.core.inputs import TimerFired
from om_stream.core.state import RecordState
from om_stream.errors import WireDecodeError
from om_stream.observability.worker_metrics import ConsumerLag, GroupLag, RecoveryTimer
from om_stream.retention import changelog_config, fence_window_ms, segment_roll_interval_ms
from om_stream.runtime.clock import SystemClock
from om_stream.runtime.effects import Effects
from om_stream.runtime.erasure import Sweeper
from om_stream.runtime.internal_codec import encode_internal
from om_stream.runtime.recall import RecallEndpoint
from om_stream.runtime.settled import StateWatch
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.deps import WorkerDeps, engine_limits, kafka_client_options
from om_stream.runtime.worker.drain import Drained, InFlight
from om_stream.runtime.worker.erasure import ErasureTable, WorkerErasures
from om_stream.runtime.worker.group_lag import GroupLagProbe
from om_stream.runtime.worker.inventory import INVENTORY_INTERVAL_S, Inventory
from om_stream.runtime.worker.kafka_records import Publication, SourceRecord, dead_letter
from om_stream.runtime.worker.kafka_security import broker_credentials
from om_stream.runtime.worker.liveness import Liveness
from om_stream.runtime.worker.local_state import MARK_INTERVAL_S, LocalTableState
from om_stream.runtime.worker.membership import Membership
from om_stream.runtime.worker.model_requests import ModelRequests
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.runtime.worker.partition_log import PartitionLog
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.runtime.worker.recall_requests import RecallRequests
from om_stream.runtime.worker.recent_contexts import RecentContexts
from om_stream.runtime.worker.records import header_list, source_record
from om_stream.runtime.worker.roles import RolePlan, role_plan
from om_stream.runtime.worker.segment_roll import SegmentRoll
from om_stream.runtime.worker.state_table import TABLE_NAME, RecordTable
from om_stream.runtime.worker.web import register_views
from om_stream.wire.codec import decode_command, decode_message

__all__ = ["Worker"]

log = logging.getLogger(__name__)
AgentBody = Callable[[faust.StreamT[bytes]], AsyncIterator[None]]
_RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
GROUP_LAG_INTERVAL_S = 15.0


class _FaustPublisher:
    def __init__(self, app: faust.App) -> None:
        self.app = app
        self._topics: dict[str, Any] = {}

    def topic(self, name: str) -> Any:
        channel = self._topics.get(name)
        if channel is None:
            channel = self._topics[name] = self.app.topic(name, **_RAW)
        return channel

    async def send(self, publication: Publication) -> Awaitable[object]:
        # queued in the producer now; the returned future resolves on the broker's acknowledgement
        future: Awaitable[object] = await self.topic(publication.topic).send(
            key=publication.key, value=publication.value, headers=publication.headers,
            partition=publication.partition)
        return future

    async def tombstone(self, topic: str, key: bytes, partition: int) -> Awaitable[object]:
        """A record of ``key`` without a value at ``partition``: a tombstone on a compacted topic."""
        future: Awaitable[object] = await self.topic(topic).send(key=key, value=None, partition=partition)
        return future


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
        self.started_at = time.monotonic()
        self.app = faust.App(
            self.plan.group_id,
            broker=[f"kafka://{host}" for host in kafka.bootstrap.split(",")],
            broker_credentials=broker_credentials(kafka),
            store=worker.table_store,
            datadir=str(Path(worker.data_dir) / f"{self.plan.group_id}-data"),
            topic_partitions=kafka.partitions,
            topic_replication_factor=kafka.replication,
            table_standby_replicas=worker.table_standby_replicas,
            producer_linger=kafka.producer_linger_ms / 1000,
            broker_session_timeout=kafka.session_timeout_s,
            broker_rebalance_timeout=kafka.session_timeout_s,
            broker_heartbeat_interval=max(1.0, kafka.session_timeout_s / 10),
            consumer_group_instance_id=kafka.group_instance_id or None,
            processing_guarantee="at_least_once",
            consumer_auto_offset_reset="earliest",
            stream_buffer_maxsize=max(4096, 4 * worker.batch_max),
            web_enabled=self.plan.holds_table,  # the /v1/* API reads the table (the probes have their own listener)
            web_bind=worker.web_host,
            web_host=worker.web_host,
            web_port=worker.web_port,
            web_in_thread=False,
            key_serializer="raw",
            value_serializer="raw",
        )
        self.memory_inputs = ((kafka.topic_records, kafka.topic_model_results) if resource_scope else
                              (kafka.topic_messages, kafka.topic_commands, kafka.topic_model_results))
        # the topics whose offsets the ledger commits (the memory agent's, and the ingest agent's in resource scope)
        self._ledger_topics = {*self.memory_inputs, *((kafka.topic_messages, kafka.topic_commands)
                                                      if resource_scope else ())}
        # the brokers, asked before a gap in the inputs is taken for a real one, and where a partition starts while
        # Faust does not know (the app reads uncommitted records)
        self.partition_log = PartitionLog(kafka.bootstrap, client_options=kafka_client_options(kafka),
                                          group_id=self.plan.group_id)
        self.offsets = OffsetLedger(self._commit_offsets, TP, committed=self._committed_offset,
                                    first_offset=self.partition_log.first_offset,
                                    group_start=self.partition_log.group_start)
        self.membership = Membership(lambda: self.app.consumer, session_timeout_s=kafka.session_timeout_s)
        self.liveness = Liveness(deps.metrics, stall_timeout_s=worker.stall_timeout_s, diagnose=self._diagnose,
                                 outages=deps.outages, outage_budget_s=worker.store_outage_budget_s)
        self.publisher = _FaustPublisher(self.app)
        self.recall = RecallEndpoint(deps.recall, deps.metrics, retrieval=deps.config.retrieval)
        self.in_flight = InFlight()
        self.inventory = Inventory(deps.metrics)  # what the process holds, on gauges (inventory.py)
        self.inventory.entries("inflight_calls", lambda: len(self.in_flight))
        self._handling = 0  # batches the memory and ingest agents have in hand
        self._rebuild_timers = True
        self.agents: dict[str, Any] = {}
        if self.plan.holds_table:
            self._hold_table()
        if self.plan.calls_models:
            requests = ModelRequests(deps, self.publisher, self.recall, self.in_flight)
            self.agents["model_workers"] = requests.define(self.app, self._watched, _RAW)
            self.inventory.entries("model_calls", lambda: len(requests.calls))
        if self.plan.answers_recall:
            self.agents["recall"] = RecallRequests(deps, self.publisher, self.recall, self.in_flight).define(
                self.app, self._watched, _RAW)
        self._define_watch()
        self._lag = ConsumerLag(deps.metrics)
        self._group_lag = GroupLag(deps.metrics)
        self.group_lag = GroupLagProbe(kafka.bootstrap, self.plan.group_id, self.consumed_topics(), kafka.partitions,
                                       client_options=kafka_client_options(kafka))
        self._recovery = RecoveryTimer(deps.metrics, self.started_at)
        deps.metrics.worker_role.labels(self.plan.role).set(1)
        if self.plan.holds_table:
            register_views(self)

    def _hold_table(self) -> None:
        """The memory side: the state table, the processor that folds inputs into it, its agents and timers. These
        attributes exist only in the roles that hold the table (``all``, ``memory``)."""
        deps, kafka, worker = self.deps, self.deps.settings.kafka, self.deps.settings.worker
        lifecycle = deps.settings.lifecycle
        self.watch = StateWatch()  # wakes the HTTP API's settled waits when a record's state is written
        self.table = RecordTable(self.app, partitions=kafka.partitions, active_partitions=self.active_partitions,
                                 changelog_config=changelog_config(lifecycle), on_write=self.watch.changed)
        # erasures' fences and progress (runtime/worker/erasure.py): a changelog like the record table's
        self.erasure_table = ErasureTable(self.app, partitions=kafka.partitions,
                                          changelog_config=changelog_config(lifecycle))
        # erased records must leave the compacted topics and the local copies of the table (see the modules)
        self.segment_roll = SegmentRoll(self.publisher.tombstone, (kafka.topic_context, *self.changelogs()),
                                        self.active_partitions)
        self.local_state = (LocalTableState(Path(self.app.conf.tabledir), TABLE_NAME,
                                            tombstone_retention_s=lifecycle.tombstone_retention_s)
                            if worker.table_store.startswith("rocksdb") else None)
        self.effects = Effects(deps.store, deps.config, count_text=deps.counter.count,
                               cache_bytes=worker.content_cache_mb * 1024 * 1024,
                               search_available=self.recall.indexing)
        self.processor = MemoryProcessor(
            kafka=kafka, config=deps.config, accountant=deps.accountant, effects=self.effects,
            publisher=self.publisher, table=self.table, clock=self.clock, metrics=deps.metrics,
            timers=self.timers, source=f"om-stream/{worker.app_id}", on_context=self.contexts.remember,
            index_for_recall=self.recall.indexing, generation=self._generation, confirm=self.membership.confirm,
            limits=engine_limits(self.deps.settings),
            on_forget=self.contexts.forget, erasures=self._erasures)
        inventory, cache = self.inventory, self.effects.cache
        inventory.table(self.table.local_records)
        inventory.cache(lambda: cache.size_bytes)
        for name, size in (("decoded_states", lambda: self.table.decoded_size), ("recent_contexts",
                           lambda: len(self.contexts)), ("content_cache", lambda: len(cache)),
                           ("timers", lambda: len(self.timers)), ("timer_heap", lambda: self.timers.heap_size),
                           ("settled_waiters", lambda: self.watch.waiters),
                           ("near_block_after", lambda: len(self.processor.near_limit))):
            inventory.entries(name, size)
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
            indexing=self.recall.indexing, decide_clear=processor.clear_now)

    @property
    def recovered(self) -> bool:
        """The state table is recovered and no rebalance is under way (without a table, Faust's recovery completes
        as soon as the consumer has its assignment, even an empty one: a models or recall worker has joined its
        group)."""
        recovery = cast(Any, self.app.tables).recovery
        return bool(recovery.completed.is_set() and not self.app.in_recovery and not self.app.rebalancing)

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
        """The Faust app's own topics, name -> (partitions, configuration), as Faust would create them: each
        table's changelog and the leader assignor's topic (``topics.ensure_topics`` creates them first)."""
        conf = self.app.conf
        found: dict[str, tuple[int, dict[str, str]]] = {}
        for table in cast(Any, self.app.tables).values():
            topic = table.changelog_topic
            config = {key: str(value) for key, value in (topic.config or {}).items()}
            policy = [flag for flag, on in (("compact", topic.compacting), ("delete", topic.deleting)) if on]
            if policy:
                config["cleanup.policy"] = ",".join(policy)
            if topic.retention:
                config["retention.ms"] = str(int(want_seconds(topic.retention) * 1000))
            found[topic.get_topic_name()] = (int(topic.partitions or conf.topic_partitions), config)
        if not conf.topic_disable_leader:
            found[f"{conf.id}-__assignor-__leader"] = (1, {})
        return found

    def changelogs(self) -> tuple[str, ...]:
        """The state table's changelog topic (none in the roles that hold no table)."""
        return tuple(table.changelog_topic.get_topic_name() for table in cast(Any, self.app.tables).values())

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
        await cast(Any, self.app.producer).flush()  # the results of the calls that finished
        await self.group_lag.close()
        await self.partition_log.close()
        return drained

    async def _commit_offsets(self, offsets: Mapping[Any, int]) -> bool:
        # Faust's own commit step for given offsets: flush the producer (every output acknowledged), commit the
        # offsets of the partitions still assigned, and tell the monitor (the lag metric reads it)
        return bool(await cast(Any, self.app.consumer)._commit_offsets(offsets))

    def _committed_offset(self, tp: TP) -> int | None:
        # the offset Faust sought the partition to when its recovery completed (after the last assignment)
        offset = cast(Any, self.app.consumer)._committed_offset.get(tp)
        return int(offset) if offset is not None else None

    async def _admit(self, records: list[SourceRecord]) -> list[SourceRecord]:
        """The records handed over in sequence; a gap (records Faust dropped) is read again (see offsets.py)."""
        admitted, seeks = await self.offsets.admit(records, lambda r: (r.topic, r.partition, r.offset))
        for tp, offset in seeks:
            await self.app.consumer.seek(tp, offset)
        return admitted

    def _generation(self) -> int:
        """The consumer generation a batch may commit in; none (-1) from a revocation to the next assignment, and
        once the coordinator no longer holds it (this member was dropped: see membership.py)."""
        if not self.offsets.accepting:
            return -1
        generation = int(self.app.consumer_generation_id)
        return generation if self.membership.current(generation) else -1

    def _current(self, event: EventT[bytes]) -> bool:
        return int(event.message.generation_id or 0) == self._generation()

    def active_partitions(self) -> set[int]:
        """Partitions of the memory agent's inputs assigned to this worker now."""
        return {tp.partition for tp in self.app.consumer.assignment() if tp.topic in self.memory_inputs}

    def _watched(self, name: str) -> Callable[[AgentBody], AgentBody]:
        """An agent body that reports its own crash to liveness (crash-only: the process then stops)."""
        def wrap(body: AgentBody) -> AgentBody:
            @functools.wraps(body)
            async def agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
                try:
                    async for item in body(stream):
                        yield item
                except Exception as exc:
                    self.liveness.agent_crashed(name, exc)
                    raise
            return agent
        return wrap

    def _define_memory_agents(self) -> None:
        app, kafka, worker = self.app, self.deps.settings.kafka, self.deps.settings.worker
        # no Faust acknowledgements on these topics: the offset ledger commits what was handled (see offsets.py)
        memory_topic = app.topic(*self.memory_inputs, acks=False, **_RAW)
        watched = self._watched

        @app.agent(memory_topic, name="memory", concurrency=1)
        @watched("memory")
        async def memory(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
            batches = cast(Any, stream).noack_take(worker.batch_max, within=worker.batch_within_s)
            async for events in batches:
                self._handling += 1
                try:
                    # the ledger's lock for the whole batch: a rebalance waits for it. A batch fenced off (read
                    # before a rebalance, or by a member the group dropped: membership.py) is not handled; its
                    # records are read again from the committed offset by whoever owns them now
                    async with self.offsets.batch():
                        records = await self._admit([source_record(event) for event in events])
                        if records and await self.processor.process(records):
                            self.offsets.handled((r.topic, r.partition, r.offset) for r in records)
                finally:
                    self._handling -= 1
                yield None

        self.agents["memory"] = memory
        if "ingest" in self.plan.agents:  # resource scope
            @app.agent(app.topic(kafka.topic_messages, kafka.topic_commands, acks=False, **_RAW), name="ingest",
                       concurrency=1)
            @watched("ingest")
            async def ingest(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
                async for event in stream.events():
                    self._handling += 1
                    try:
                        async with self.offsets.batch():
                            if self._current(event) and await self._admit([source_record(event)]):
                                await self._rekey(event)
                                message = event.message
                                self.offsets.handled([(message.topic, message.partition, message.offset)])
                    finally:
                        self._handling -= 1
                    yield None

            self.agents["ingest"] = ingest

        app.timer(interval=worker.timer_interval_s)(self._fire_timers)
        app.timer(interval=worker.commit_interval_s)(self.offsets.commit)
        app.timer(interval=segment_roll_interval_ms(self.deps.settings.lifecycle) / 1000)(self._roll_segments)
        app.timer(interval=MARK_INTERVAL_S)(self._keep_local_state)

        async def on_revoked(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.membership.revoking(True)
            try:
                await self.offsets.revoke()
            finally:
                self.membership.revoking(False)

        def on_assigned(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.offsets.assigned()

        cast(Any, app.on_partitions_revoked).connect(on_revoked)
        cast(Any, app.on_partitions_assigned).connect(on_assigned)

    def _define_watch(self) -> None:
        """Every role: liveness, lag and recovery every second, the group's lag, rebalances counted."""
        app = self.app
        app.timer(interval=1.0)(self._watch)
        app.timer(interval=GROUP_LAG_INTERVAL_S)(self._read_group_lag)
        app.timer(interval=INVENTORY_INTERVAL_S)(self._read_inventory)

        def on_rebalance(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.deps.metrics.rebalances.inc()
            self._rebuild_timers = True

        cast(Any, app.on_rebalance_complete).connect(on_rebalance)

    async def _watch(self) -> None:
        """Every second: the table's recovery time, the consumer lag, and whether the partitions make progress."""
        recovered = self.recovered
        self._recovery.tick(recovered)
        if not recovered:
            self.liveness.check_progress((), ready=False)
            return
        lags = self._lags()
        self._lag.update(lags)
        self.liveness.check_progress(lags + self._unseen_lags(lags), ready=True)
        if self.plan.holds_table and not self._handling and self.offsets.accepting:
            await self._rescue_stranded()

    async def _rescue_stranded(self) -> None:
        """Seek back the partitions of the worker's own agents whose last records Faust dropped (offsets.py)."""
        consumer = cast(Any, self.app.consumer)
        ends = {}
        for tp in consumer.assignment():
            if tp.topic in self._ledger_topics:
                try:
                    end = consumer.highwater(tp)
                except (AssertionError, KeyError, AttributeError, TypeError):  # not fetched yet
                    continue
                if end is not None:
                    ends[tp] = int(end)
        for tp, offset in await self.offsets.stranded(ends):
            await consumer.seek(tp, offset)

    def _diagnose(self, topic: str, partition: int) -> str:
        """What the consumer and the offset ledger know of a partition (for a stall's log line): whether Faust
        fetches it (active, paused, held back by a full buffer), where it fetches from, the log's end it saw, and
        where the ledger expects the next record."""
        consumer = cast(Any, self.app.consumer)
        tp = TP(topic, partition)
        facts = []
        for name, found in (("active", getattr(consumer, "_active_partitions", None)),
                            ("paused", getattr(consumer, "_paused_partitions", None)),
                            ("buffered", getattr(consumer, "_buffered_partitions", None))):
            facts.append(f"{name}={tp in found if found is not None else 'unknown'}")
        try:
            facts.append(f"highwater={consumer.highwater(tp)}")
        except Exception as exc:  # noqa: BLE001 - a diagnosis: what cannot be read is said so
            facts.append(f"highwater=unknown ({type(exc).__name__})")
        facts.append(f"sought_to={self._committed_offset(tp)}")
        facts.append(f"ledger_next={self.offsets.next_offset(tp)}")
        facts.append(f"flow_active={bool(getattr(consumer, 'flow_active', 'unknown'))}")
        return ", ".join(facts)

    def _unseen_lags(self, seen: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
        """The brokers' view (the last group-lag reading) of the assigned partitions the consumer cannot judge
        itself: never fetched, or never committed since the assignment. Without it a partition stuck from its first
        record on (records waiting, nothing committed) would never count as stalled."""
        known = {(topic, partition) for topic, partition, _, _ in seen}
        reading = self.group_lag.last
        found = []
        for tp in cast(Any, self.app.consumer).assignment():
            key = (tp.topic, tp.partition)
            if key not in known and key in reading:
                lag, start = reading[key]
                found.append((tp.topic, tp.partition, lag, start))
        return found

    def _lags(self) -> list[tuple[str, int, int, int]]:
        """(topic, partition, lag, committed offset) of every assigned partition read so far: the lag is the
        consumer's high watermark minus the committed offset."""
        consumer = cast(Any, self.app.consumer)
        committed = self.app.monitor.tp_committed_offsets or {}
        lags: list[tuple[str, int, int, int]] = []
        for tp in consumer.assignment():
            try:
                end = consumer.highwater(tp)
            except (AssertionError, KeyError, AttributeError, TypeError):  # not fetched yet
                continue
            done = committed.get(tp)
            if end is not None and done is not None:
                lags.append((tp.topic, tp.partition, int(end) - int(done), int(done)))
        return lags

    async def _read_inventory(self) -> None:
        self.inventory.read()

    async def _read_group_lag(self) -> None:
        if not self.in_flight.open:
            return
        try:
            lags = await self.group_lag.measure()
        except (KafkaError, OSError, TimeoutError) as exc:  # brokers unreachable: the gauges keep their reading
            log.warning("the consumer group's lag could not be read from the brokers: %r", exc)
            return
        self._group_lag.update(lags)

    async def _roll_segments(self) -> None:
        if self.recovered and self.in_flight.open:
            await self.segment_roll.roll()

    async def _keep_local_state(self) -> None:
        """The local copies of the partitions held (active or standby) are in step once the table is recovered;
        a copy of a partition not held that has gone stale meanwhile is wiped before Faust could open it again."""
        if self.local_state is None or not self.recovered:
            return
        changelogs = set(self.changelogs())
        standbys = {tp.partition for tp in cast(Any, self.app.assignor).assigned_standbys() if tp.topic in changelogs}
        held = self.active_partitions() | standbys
        self.local_state.mark_in_step(held)
        self.local_state.wipe_stale(held=held)

    async def _send_timer(self, key: str, partition: int, timer: TimerFired) -> None:
        """A timer input for a record, on the results topic at the record's home partition (the memory agent
        handles it in order with the record's other inputs)."""
        await self.publisher.send(Publication(self.deps.settings.kafka.topic_model_results, key.encode(),
                                              encode_internal(timer), partition=partition))

    async def _fire_timers(self) -> None:
        if not self.in_flight.open:  # stopping: the records' next owner fires their timers
            return
        if not self.recovered:
            self._rebuild_timers = True
            return
        if self._rebuild_timers:
            self._rebuild_timers = False
            self.table.forget_others()
            held = self.table.held()
            self.processor.keep_held({record.key for record in held})
            threads = {thread for record in held for thread in record.state.threads}
            for thread in [t for t in self.contexts if t not in threads]:
                del self.contexts[thread]
            self.timers.rebuild((record.key, record.state.timers) for record in held)
            self.watch.changed_all()  # the records held here, recovered: waits look again (or learn they moved)
            # a model call in flight when its record changed hands may be lost with the previous owner; asked
            # again, it is answered from the stored result or waits for the call still running elsewhere
            for record in held:
                for cycle in record.state.cycles:
                    await self._send_timer(record.key, record.partition, TimerFired(f"resend:{cycle.id}"))
                if purge_missing(record.state, record_config(self.deps.config, record.state)):
                    # retention was turned on while the record sat idle: its purge sets its timer
                    await self._send_timer(record.key, record.partition, TimerFired(PURGE_TIMER))
        for key, timer in self.timers.due(self.clock.now_ms()):
            home = self.table.home(key)
            if home is not None:
                await self._send_timer(key, home, timer)

    async def _dead_letter(self, source: SourceRecord, error: WireDecodeError) -> None:
        kafka = self.deps.settings.kafka
        await self.publisher.send(dead_letter(kafka, self.deps.metrics, source, error.reason, error.detail))

    async def _rekey(self, event: EventT[bytes]) -> None:
        """Resource scope: validate, then re-key by resource id so one record owner sees all its threads."""
        kafka = self.deps.settings.kafka
        message = event.message
        key, value = message.key, message.value
        try:
            if message.topic == kafka.topic_messages:
                resource = decode_message(key, value, max_bytes=kafka.max_message_bytes).resource_id
            else:
                command = decode_command(key, value, max_bytes=kafka.max_message_bytes)
                if command.resource_id is None:
                    raise WireDecodeError("invalid_fields", "resource scope: commands need resource_id")
                resource = command.resource_id
        except WireDecodeError as exc:
            await self._dead_letter(source_record(event), exc)
            return
        # where it came from: its topic, and its position in it (an erase's fence is defined on om.messages)
        await self.publisher.send(Publication(
            kafka.topic_records, resource.encode(), value or b"",
            [*header_list(message.headers), ("om_source_topic", message.topic.encode()),
             ("om_source_partition", str(message.partition).encode()),
             ("om_source_offset", str(message.offset).encode())]))

    def state(self, key: str) -> RecordState | None:
        """The state of a record held by this worker now (None: not held here)."""
        held = self.table.lookup(key)
        return held.state if held is not None else None
