"""The Faust app of ``om-stream worker``, built by a factory from settings (no module-level app).

Agents (each with concurrency 1; at-least-once; effects idempotent):
* ``memory``: the table-owning agent. Inputs: messages, commands and the internal results topic (model results
  and timers), all keyed by record and co-partitioned: a record's inputs, its state (``state_table``) and its
  internal records share one partition number, its home. It runs ``core.decide`` in batches (see ``processor``)
  and never awaits a model call. Its offsets are committed by the worker, not by Faust (``offsets``).
* ``ingest`` (resource scope only): validates messages and commands and re-keys them by resource id (offsets
  committed like the memory agent's).
* ``model_workers``: Observer/Reflector requests, run as bounded concurrent tasks, each answered at most once per
  request (``model_calls``); each result goes back to the results topic at the record's home partition. A request
  lost with a crashed worker is asked again when its record is recovered elsewhere, and by its deadline timer. The
  recall index's work (index an observation group, forget a cleared record) travels the same way.
* ``recall``: the recall tool over ``om.recall.requests`` → ``om.recall.responses`` (key = resource id), answered
  as bounded concurrent tasks; the HTTP API answers ``POST /v1/recall`` with the same endpoint.
Timers are checked every ``worker.timer_interval_s`` from table state (``timers.TimerWheel``). Every agent
reports its own crash to ``liveness``, which stops the process (crash-only).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import faust
from faust.types import TP, EventT

from om_stream.core.commands import IndexForRecall, RequestObservation, RequestReflection
from om_stream.core.inputs import TimerFired
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.errors import WireDecodeError
from om_stream.observability.model_metrics import CycleMetrics
from om_stream.observability.worker_metrics import ConsumerLag, RecoveryTimer
from om_stream.runtime.clock import SystemClock
from om_stream.runtime.cycles import CycleRunner
from om_stream.runtime.effects import Effects
from om_stream.runtime.internal_codec import ForgetIndexed, decode_internal, encode_internal
from om_stream.runtime.recall import RecallEndpoint, decode_recall_request
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.deps import WorkerDeps
from om_stream.runtime.worker.liveness import Liveness
from om_stream.runtime.worker.model_calls import ModelCalls
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.runtime.worker.processor import MemoryProcessor, Publication, SourceRecord, dead_letter
from om_stream.runtime.worker.state_table import RecordTable
from om_stream.runtime.worker.web import register_views
from om_stream.wire.codec import decode_command, decode_json, decode_message, encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.recall import RecallFailure, RecallResponse

__all__ = ["Worker"]

log = logging.getLogger(__name__)
AgentBody = Callable[[faust.StreamT[bytes]], AsyncIterator[None]]
_RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


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


class Worker:
    """The assembled worker: the Faust app and the pieces its agents share (for tests and the CLI)."""

    def __init__(self, deps: WorkerDeps) -> None:
        self.deps = deps
        settings = deps.settings
        kafka, worker = settings.kafka, settings.worker
        self.clock = SystemClock()
        self.timers = TimerWheel()
        self.contexts: dict[str, ContextRecord] = {}
        self.started_at = time.monotonic()
        self.app = faust.App(
            worker.app_id,
            broker=[f"kafka://{host}" for host in kafka.bootstrap.split(",")],
            store=worker.table_store,
            datadir=str(Path(worker.data_dir) / f"{worker.app_id}-data"),
            topic_partitions=kafka.partitions,
            topic_replication_factor=kafka.replication,
            table_standby_replicas=worker.table_standby_replicas,
            producer_linger=kafka.producer_linger_ms / 1000,
            broker_session_timeout=kafka.session_timeout_s,
            broker_rebalance_timeout=kafka.session_timeout_s,
            broker_heartbeat_interval=max(1.0, kafka.session_timeout_s / 10),
            processing_guarantee="at_least_once",
            consumer_auto_offset_reset="earliest",
            stream_buffer_maxsize=max(4096, 4 * worker.batch_max),
            web_enabled=True,
            web_bind=worker.web_host,
            web_host=worker.web_host,
            web_port=worker.web_port,
            web_in_thread=False,
            key_serializer="raw",
            value_serializer="raw",
        )
        resource_scope = deps.config.scope == "resource"
        self.memory_inputs = ((kafka.topic_records, kafka.topic_model_results) if resource_scope else
                              (kafka.topic_messages, kafka.topic_commands, kafka.topic_model_results))
        self.table = RecordTable(self.app, partitions=kafka.partitions, active_partitions=self.active_partitions)
        self.offsets = OffsetLedger(self._commit_offsets, TP, committed=self._committed_offset)
        self.liveness = Liveness(deps.metrics, stall_timeout_s=worker.stall_timeout_s)
        self.publisher = _FaustPublisher(self.app)
        self.recall = RecallEndpoint(deps.recall, deps.metrics, retrieval=deps.config.retrieval)
        self.effects = Effects(deps.store, deps.config, count_text=deps.counter.count,
                               cache_bytes=worker.content_cache_mb * 1024 * 1024,
                               search_available=self.recall.indexing)
        self.processor = MemoryProcessor(
            kafka=kafka, config=deps.config, accountant=deps.accountant, effects=self.effects,
            publisher=self.publisher, table=self.table, clock=self.clock, metrics=deps.metrics,
            timers=self.timers, source=f"om-stream/{worker.app_id}", on_context=self._remember_context,
            index_for_recall=self.recall.indexing, generation=self._generation,
            limits=EngineLimits(cycle_timeout_ms=int(worker.cycle_timeout_s * 1000),
                                blocking_timeout_ms=int(worker.blocking_timeout_s * 1000)))
        self.runner = CycleRunner(store=deps.store, model=deps.model, offline=deps.offline, config=deps.config,
                                  count_text=deps.counter.count, observers=[CycleMetrics(deps.metrics)])
        self.model_calls = ModelCalls(self.runner.run, deps.results, deps.metrics,
                                      owner=f"{worker.app_id}/{socket.gethostname()}/{os.getpid()}/"
                                            f"{uuid.uuid4().hex[:8]}")
        self.model_slots = asyncio.Semaphore(worker.model_concurrency)
        self.recall_slots = asyncio.Semaphore(worker.recall_concurrency)
        self._model_tasks: set[asyncio.Task[None]] = set()
        self._rebuild_timers = True
        self._define_agents()
        self._lag = ConsumerLag(deps.metrics)
        self._recovery = RecoveryTimer(deps.metrics, self.started_at)
        register_views(self)

    def _remember_context(self, context: ContextRecord) -> None:
        self.contexts[context.thread_id] = context

    @property
    def recovered(self) -> bool:
        """The state table is recovered and no rebalance is under way."""
        recovery = cast(Any, self.app.tables).recovery
        return bool(recovery.completed.is_set() and not self.app.in_recovery and not self.app.rebalancing)

    @property
    def ready(self) -> bool:
        """What ``/healthz`` says: recovered, and live."""
        return self.recovered and self.liveness.live

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
        admitted, seeks = self.offsets.admit(records, lambda r: (r.topic, r.partition, r.offset))
        for tp, offset in seeks:
            await self.app.consumer.seek(tp, offset)
        return admitted

    def _generation(self) -> int:
        """The consumer generation a batch may commit in; none (-1) from a revocation to the next assignment."""
        return int(self.app.consumer_generation_id) if self.offsets.accepting else -1

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

    def _define_agents(self) -> None:
        app, kafka, worker = self.app, self.deps.settings.kafka, self.deps.settings.worker
        # no Faust acknowledgements on these topics: the offset ledger commits what was handled (see offsets.py)
        memory_topic = app.topic(*self.memory_inputs, acks=False, **_RAW)
        watched = self._watched

        @app.agent(memory_topic, name="memory", concurrency=1)
        @watched("memory")
        async def memory(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
            batches = cast(Any, stream).noack_take(worker.batch_max, within=worker.batch_within_s)
            async for events in batches:
                async with self.offsets.batch():
                    records = await self._admit([_source(event) for event in events])
                    # False: read before a rebalance and not handled; the records are read again from the committed
                    # offset by whoever owns them now
                    if records and await self.processor.process(records):
                        self.offsets.handled((r.topic, r.partition, r.offset) for r in records)
                yield None

        @app.agent(app.topic(kafka.topic_model_requests, **_RAW), name="model_workers", concurrency=1)
        @watched("model_workers")
        async def model_workers(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
            async for event in stream.events():
                await self.model_slots.acquire()
                message = event.message
                task = asyncio.create_task(self._run_model_call(message.key, message.value, message.partition))
                self._model_tasks.add(task)
                task.add_done_callback(self._model_tasks.discard)
                yield None

        responses_topic = app.topic(kafka.topic_recall_responses, **_RAW)

        @app.agent(app.topic(kafka.topic_recall_requests, **_RAW), name="recall", concurrency=1)
        @watched("recall")
        async def recall(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
            async for event in stream.events():
                await self.recall_slots.acquire()
                task = asyncio.create_task(self._answer_recall(_source(event), responses_topic))
                self._model_tasks.add(task)
                task.add_done_callback(self._model_tasks.discard)
                yield None

        self.agents = {"memory": memory, "model_workers": model_workers, "recall": recall}
        if self.deps.config.scope == "resource":
            @app.agent(app.topic(kafka.topic_messages, kafka.topic_commands, acks=False, **_RAW), name="ingest",
                       concurrency=1)
            @watched("ingest")
            async def ingest(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
                async for event in stream.events():
                    async with self.offsets.batch():
                        if self._current(event) and await self._admit([_source(event)]):
                            await self._rekey(event)
                            message = event.message
                            self.offsets.handled([(message.topic, message.partition, message.offset)])
                    yield None

            self.agents["ingest"] = ingest

        app.timer(interval=worker.timer_interval_s)(self._fire_timers)
        app.timer(interval=1.0)(self._watch)
        app.timer(interval=worker.commit_interval_s)(self.offsets.commit)

        def on_rebalance(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.deps.metrics.rebalances.inc()
            self._rebuild_timers = True

        async def on_revoked(sender: Any, *args: Any, **kwargs: Any) -> None:
            await self.offsets.revoke()

        def on_assigned(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.offsets.assigned()

        cast(Any, app.on_rebalance_complete).connect(on_rebalance)
        cast(Any, app.on_partitions_revoked).connect(on_revoked)
        cast(Any, app.on_partitions_assigned).connect(on_assigned)

    async def _watch(self) -> None:
        """Every second: the table's recovery time, the consumer lag, and whether the partitions make progress."""
        recovered = self.recovered
        self._recovery.tick(recovered)
        if not recovered:
            self.liveness.check_progress((), ready=False)
            return
        lags = self._lags()
        self._lag.update(lags)
        self.liveness.check_progress(lags, ready=True)

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

    async def _send_timer(self, key: str, partition: int, timer: str) -> None:
        """A timer input for a record, on the results topic at the record's home partition (the memory agent
        handles it in order with the record's other inputs)."""
        await self.publisher.send(Publication(self.deps.settings.kafka.topic_model_results, key.encode(),
                                              encode_internal(TimerFired(timer)), partition=partition))

    async def _fire_timers(self) -> None:
        if not self.recovered:
            self._rebuild_timers = True
            return
        if self._rebuild_timers:
            self._rebuild_timers = False
            self.table.forget_others()
            held = self.table.held()
            threads = {thread for record in held for thread in record.state.threads}
            for thread in [t for t in self.contexts if t not in threads]:
                del self.contexts[thread]
            self.timers.rebuild((record.key, record.state.timers) for record in held)
            # a model call in flight when its record changed hands may be lost with the previous owner; asked
            # again, it is answered from the stored result or waits for the call still running elsewhere
            for record in held:
                for cycle in record.state.cycles:
                    await self._send_timer(record.key, record.partition, f"resend:{cycle.id}")
        for key, timer in self.timers.due(self.clock.now_ms()):
            home = self.table.home(key)
            if home is not None:
                await self._send_timer(key, home, timer)

    async def _run_model_call(self, key: bytes | None, value: bytes | None, partition: int) -> None:
        """One request from the model-requests topic; a model result goes back to the same partition number of the
        results topic, the home of the record that asked."""
        kafka = self.deps.settings.kafka
        try:
            request = decode_internal(value or b"")
            if isinstance(request, IndexForRecall):
                await self.recall.index(request)
                return
            if isinstance(request, ForgetIndexed):
                await self.recall.forget(request.resource_id, request.record_key)
                return
            if not isinstance(request, RequestObservation | RequestReflection):
                raise WireDecodeError("invalid_fields", f"{type(request).__name__} is not a model request")
            result = await self.model_calls.answer(request)
            await self.publisher.send(Publication(kafka.topic_model_results, key or request.record_key.encode(),
                                                  encode_internal(result), partition=partition))
        except WireDecodeError as exc:
            log.error("unreadable model request dropped: %s", exc)
        except Exception:
            log.exception("model call failed unexpectedly; its deadline timer will ask again")
        finally:
            self.model_slots.release()

    async def _dead_letter(self, source: SourceRecord, error: WireDecodeError) -> None:
        kafka = self.deps.settings.kafka
        await self.publisher.send(dead_letter(kafka, self.deps.metrics, source, error.reason, error.detail))

    async def _answer_recall(self, source: SourceRecord, responses_topic: Any) -> None:
        """One recall call from the request topic. An unreadable request is answered with ``invalid_request`` when
        it names its correlation id (the caller is waiting), else it goes to the dead-letter topic."""
        try:
            try:
                request = decode_recall_request(source.value, self.deps.settings.kafka.max_message_bytes)
            except WireDecodeError as exc:
                refusal = _refusal(source.value, exc, self.deps.settings.kafka.max_message_bytes)
                if refusal is None:
                    await self._dead_letter(source, exc)
                else:
                    self.deps.metrics.recall_requests.labels("kafka", "unknown", "invalid_request").inc()
                    await responses_topic.send(key=source.key, value=encode(refusal))
                return
            response = await self.recall.answer(request, "kafka")
            await responses_topic.send(key=request.resource_id.encode(), value=encode(response))
        except Exception:
            log.exception("recall request at %s[%d]@%d was not answered", source.topic, source.partition,
                          source.offset)
        finally:
            self.recall_slots.release()

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
            await self._dead_letter(_source(event), exc)
            return
        await self.publisher.send(Publication(
            kafka.topic_records, resource.encode(), value or b"",
            [*_headers(message.headers), ("om_source_topic", message.topic.encode())]))

    def state(self, key: str) -> RecordState | None:
        """The state of a record held by this worker now (None: not held here)."""
        held = self.table.lookup(key)
        return held.state if held is not None else None


def _refusal(raw: bytes | None, error: WireDecodeError, max_bytes: int) -> RecallResponse | None:
    """The ``invalid_request`` answer to an unreadable recall request that still names its correlation id."""
    try:
        correlation = decode_json(raw, max_bytes).get("correlation_id")
    except WireDecodeError:
        return None
    if not isinstance(correlation, str) or not 0 < len(correlation) <= 256:
        return None
    return RecallResponse(correlation_id=correlation, error=RecallFailure(
        code="invalid_request", message=f"{error.reason}: {error.detail}"))


def _headers(raw: Any) -> list[tuple[str, bytes]]:
    items = raw.items() if isinstance(raw, dict) else (raw or [])
    return [(str(k), v if isinstance(v, bytes) else str(v).encode()) for k, v in items]


def _source(event: EventT[bytes]) -> SourceRecord:
    message = event.message
    headers = _headers(message.headers)
    return SourceRecord(topic=message.topic, partition=message.partition, offset=message.offset,
                        key=message.key, value=message.value, headers=headers, received_at=time.monotonic(),
                        generation=int(message.generation_id or 0), handle=event)
