"""The Faust app of ``om-stream worker``, built by a factory from settings (no module-level app).

Agents (each with concurrency 1; at-least-once; effects idempotent):
* ``memory``: the table-owning agent. Inputs: messages, commands and the internal results topic (model results
  and timers), all keyed by record. It runs ``core.decide`` in batches (see ``processor``) and never awaits a
  model call.
* ``ingest`` (resource scope only): validates messages and commands and re-keys them by resource id.
* ``model_workers``: Observer/Reflector requests, run as bounded concurrent tasks; each result goes back to the
  results topic. A request lost with a crashed worker is asked again by the record's deadline timer. The recall
  index's work (index an observation group, forget a cleared record) travels the same way.
* ``recall``: the recall tool over ``om.recall.requests`` → ``om.recall.responses`` (key = resource id), answered
  as bounded concurrent tasks; the HTTP API answers ``POST /v1/recall`` with the same endpoint.
Timers are checked every ``worker.timer_interval_s`` from table state (``timers.TimerWheel``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterable, Awaitable
from pathlib import Path
from typing import Any, cast

import faust
from faust.types import EventT

from om_stream.core.commands import IndexForRecall
from om_stream.core.inputs import TimerFired
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.errors import WireDecodeError
from om_stream.observability.worker_metrics import instrument_worker
from om_stream.runtime.cycles import CycleRunner
from om_stream.runtime.effects import Effects
from om_stream.runtime.embedded import SystemClock
from om_stream.runtime.internal_codec import ForgetIndexed, decode_internal, encode_internal
from om_stream.runtime.recall import RecallEndpoint, decode_recall_request
from om_stream.runtime.worker.deps import WorkerDeps
from om_stream.runtime.worker.processor import MemoryProcessor, SourceRecord
from om_stream.runtime.worker.timers import TimerWheel
from om_stream.runtime.worker.web import register_views
from om_stream.wire.codec import decode_command, decode_message, encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.recall import RecallFailure, RecallResponse

__all__ = ["Worker", "build_app"]

log = logging.getLogger(__name__)
_RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


class _FaustPublisher:
    def __init__(self, app: faust.App) -> None:
        self.app = app
        self._topics: dict[str, Any] = {}

    async def send(self, topic: str, key: bytes, value: bytes,
                   headers: list[tuple[str, bytes]]) -> Awaitable[object]:
        channel = self._topics.get(topic)
        if channel is None:
            channel = self._topics[topic] = self.app.topic(topic, **_RAW)
        # queued in the producer now; the returned future resolves on the broker's acknowledgement
        future: Awaitable[object] = await channel.send(key=key, value=value, headers=headers)
        return future


class _Table:
    def __init__(self, table: Any) -> None:
        self.table = table

    def get(self, key: str) -> bytes | None:
        value = self.table.get(key)
        return value if isinstance(value, bytes) else None

    def set(self, key: str, value: bytes) -> None:
        self.table[key] = value


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
        # keys and values are raw bytes everywhere (the app's serializers): the table key is the record key as
        # UTF-8, partitioned by the producer's partitioner exactly like the input topics' keys
        self.table = self.app.Table("om_state", default=None, partitions=kafka.partitions, use_partitioner=True,
                                    key_type=str, value_type=bytes)
        self.recall = RecallEndpoint(deps.recall, deps.metrics, retrieval=deps.config.retrieval)
        self.effects = Effects(deps.store, deps.config, cache_bytes=worker.content_cache_mb * 1024 * 1024,
                               search_available=self.recall.indexing)
        self.processor = MemoryProcessor(
            kafka=kafka, config=deps.config, accountant=deps.accountant, effects=self.effects,
            publisher=_FaustPublisher(self.app), table=_Table(self.table), clock=self.clock, metrics=deps.metrics,
            timers=self.timers, source=f"om-stream/{worker.app_id}", on_context=self._remember_context,
            index_for_recall=self.recall.indexing,
            limits=EngineLimits(cycle_timeout_ms=int(worker.cycle_timeout_s * 1000),
                                blocking_timeout_ms=int(worker.blocking_timeout_s * 1000)))
        self.runner = CycleRunner(store=deps.store, model=deps.model, offline=deps.offline, config=deps.config,
                                  count_text=deps.counter.count)
        self.model_slots = asyncio.Semaphore(worker.model_concurrency)
        self.recall_slots = asyncio.Semaphore(worker.recall_concurrency)
        self._model_tasks: set[asyncio.Task[None]] = set()
        self._rebuild_timers = True
        self._define_agents()
        register_views(self)
        instrument_worker(self)  # model-call, cycle, lag and recovery metrics (registers a timer: before start)

    def _remember_context(self, context: ContextRecord) -> None:
        self.contexts[context.thread_id] = context

    @property
    def ready(self) -> bool:
        recovery = cast(Any, self.app.tables).recovery
        return bool(recovery.completed.is_set() and not self.app.in_recovery and not self.app.rebalancing)

    def _define_agents(self) -> None:
        app, kafka, worker = self.app, self.deps.settings.kafka, self.deps.settings.worker
        resource_scope = self.deps.config.scope == "resource"
        inputs = ([kafka.topic_records, kafka.topic_model_results] if resource_scope else
                  [kafka.topic_messages, kafka.topic_commands, kafka.topic_model_results])
        memory_topic = app.topic(*inputs, **_RAW)
        results_topic = app.topic(kafka.topic_model_results, **_RAW)

        @app.agent(memory_topic, name="memory", concurrency=1)
        async def memory(stream: faust.StreamT[bytes]) -> AsyncIterable[None]:
            # take_events acks a batch only after it is processed (faust's StreamT type omits the method)
            batches = cast(Any, stream).take_events(worker.batch_max, within=worker.batch_within_s)
            async for events in batches:
                await self.processor.process([_source(event) for event in events])
                yield None

        @app.agent(app.topic(kafka.topic_model_requests, **_RAW), name="model_workers", concurrency=1)
        async def model_workers(stream: faust.StreamT[bytes]) -> AsyncIterable[None]:
            async for key, value in stream.items():
                await self.model_slots.acquire()
                task = asyncio.create_task(self._run_model_call(key, value, results_topic))
                self._model_tasks.add(task)
                task.add_done_callback(self._model_tasks.discard)
                yield None

        responses_topic = app.topic(kafka.topic_recall_responses, **_RAW)

        @app.agent(app.topic(kafka.topic_recall_requests, **_RAW), name="recall", concurrency=1)
        async def recall(stream: faust.StreamT[bytes]) -> AsyncIterable[None]:
            async for event in stream.events():
                await self.recall_slots.acquire()
                task = asyncio.create_task(self._answer_recall(_source(event), responses_topic))
                self._model_tasks.add(task)
                task.add_done_callback(self._model_tasks.discard)
                yield None

        if resource_scope:
            records_topic = app.topic(kafka.topic_records, **_RAW)
            dlq_topic = app.topic(kafka.topic_dlq, **_RAW)

            @app.agent(app.topic(kafka.topic_messages, kafka.topic_commands, **_RAW), name="ingest", concurrency=1)
            async def ingest(stream: faust.StreamT[bytes]) -> AsyncIterable[None]:
                async for event in stream.events():
                    await self._rekey(event, records_topic, dlq_topic)
                    yield None

        async def fire_timers() -> None:
            if not self.ready:
                self._rebuild_timers = True
                return
            if self._rebuild_timers:
                held = [(key, json.loads(raw)) for key, raw in list(self.table.items()) if isinstance(raw, bytes)]
                self.timers.rebuild((key, state.get("timers", {})) for key, state in held)
                self._rebuild_timers = False
                # model calls in flight when these records changed hands may be lost with the previous owner
                for key, state in held:
                    for cycle in state.get("cycles", []):
                        await results_topic.send(key=key.encode(),
                                                 value=encode_internal(TimerFired(f"resend:{cycle['id']}")))
            for key, timer in self.timers.due(self.clock.now_ms()):
                await results_topic.send(key=key.encode(), value=encode_internal(TimerFired(timer)))

        app.timer(interval=worker.timer_interval_s)(fire_timers)

        def on_rebalance(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.deps.metrics.rebalances.inc()
            self._rebuild_timers = True

        cast(Any, app.on_rebalance_complete).connect(on_rebalance)

        self.agents = {"memory": memory, "model_workers": model_workers, "recall": recall}

    async def _run_model_call(self, key: bytes, value: bytes, results_topic: Any) -> None:
        try:
            request = decode_internal(value)
            if isinstance(request, IndexForRecall):
                await self.recall.index(request)
                return
            if isinstance(request, ForgetIndexed):
                await self.recall.forget(request.resource_id, request.record_key)
                return
            result = await self.runner.run(request)  # type: ignore[arg-type]
            await results_topic.send(key=key, value=encode_internal(result))
        except WireDecodeError as exc:
            log.error("unreadable model request dropped: %s", exc)
        except Exception:
            log.exception("model call failed unexpectedly; its deadline timer will ask again")
        finally:
            self.model_slots.release()

    async def _answer_recall(self, source: SourceRecord, responses_topic: Any) -> None:
        """One recall call from the request topic. An unreadable request is answered with ``invalid_request`` when
        it names its correlation id (the caller is waiting), else it goes to the dead-letter topic."""
        try:
            try:
                request = decode_recall_request(source.value, self.deps.settings.kafka.max_message_bytes)
            except WireDecodeError as exc:
                refusal = _refusal(source.value, exc)
                if refusal is None:
                    topic, key, body, headers = self.processor._dead_letter(source, exc.reason, exc.detail)
                    await self.app.topic(topic, **_RAW).send(key=key, value=body, headers=headers)
                else:
                    self.deps.metrics.recall_requests.labels("kafka", "unknown", "invalid_request").inc()
                    await responses_topic.send(key=source.key, value=encode(refusal))
                return
            await self.effects.start()
            response = await self.recall.answer(request, "kafka")
            await responses_topic.send(key=request.resource_id.encode(), value=encode(response))
        except Exception:
            log.exception("recall request at %s[%d]@%d was not answered", source.topic, source.partition,
                          source.offset)
        finally:
            self.recall_slots.release()

    async def _rekey(self, event: EventT[bytes], records_topic: Any, dlq_topic: Any) -> None:
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
            source = _source(event)
            _topic, dlq_key, body, headers = self.processor._dead_letter(source, exc.reason, exc.detail)
            await dlq_topic.send(key=dlq_key, value=body, headers=headers)
            return
        await records_topic.send(key=resource.encode(), value=value,
                                 headers=[*_headers(message.headers), ("om_source_topic", message.topic.encode())])

    def state(self, key: str) -> RecordState | None:
        raw = self.table.get(key)
        return RecordState.from_dict(json.loads(raw)) if isinstance(raw, bytes) else None


def _refusal(raw: bytes | None, error: WireDecodeError) -> RecallResponse | None:
    """The ``invalid_request`` answer to an unreadable recall request that still names its correlation id."""
    try:
        correlation = json.loads(raw or b"").get("correlation_id")
    except (ValueError, AttributeError):
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
                        key=message.key, value=message.value, headers=headers, received_at=time.monotonic())


def build_app(deps: WorkerDeps) -> Worker:
    return Worker(deps)
