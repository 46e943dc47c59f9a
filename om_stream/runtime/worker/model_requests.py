"""The ``model_workers`` agent: the requests of ``om.model-requests``, each run as a bounded concurrent task.

Observer/Reflector requests are answered at most once per request (``model_calls``) by the cycle runner (the
configured model, the offline model when the request says so); each result goes back to the results topic at the
partition the request came from, the home of the record that asked. The recall index's work (index an observation
group, forget a cleared record, remove a retention purge's points) travels the same way. A request lost with a
crashed worker is asked again when its record is recovered elsewhere, and by its deadline timer.

It never touches the state table or the memory agent's offsets: it runs in the ``all`` and ``models`` roles alike.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

import faust
from faust.types import EventT

from om_stream.core.commands import ExpireIndex, IndexForRecall, RequestObservation, RequestReflection
from om_stream.core.erasure import EraseIndexDone
from om_stream.errors import WireDecodeError
from om_stream.observability.model_metrics import CycleMetrics
from om_stream.runtime.cycle_traces import CycleTraces
from om_stream.runtime.cycles import CycleRunner
from om_stream.runtime.internal_codec import EraseIndexed, ForgetIndexed, decode_internal, encode_internal
from om_stream.runtime.recall import RecallEndpoint
from om_stream.runtime.worker.deps import WorkerDeps
from om_stream.runtime.worker.drain import InFlight
from om_stream.runtime.worker.kafka_records import Publication, Publisher
from om_stream.runtime.worker.model_calls import ModelCalls
from om_stream.runtime.worker.records import header_list
from om_stream.runtime.worker.trace_links import links_of
from om_stream.trace_headers import extract

__all__ = ["ModelRequests"]

log = logging.getLogger(__name__)
AgentBody = Callable[[faust.StreamT[bytes]], AsyncIterator[None]]


class ModelRequests:
    def __init__(self, deps: WorkerDeps, publisher: Publisher, recall: RecallEndpoint, in_flight: InFlight) -> None:
        self.deps = deps
        self.publisher = publisher
        self.recall = recall
        self.in_flight = in_flight
        worker = deps.settings.worker
        self.runner = CycleRunner(store=deps.store, model=deps.model, offline=deps.offline, config=deps.config,
                                  count_text=deps.counter.count, observers=[CycleMetrics(deps.metrics)])
        self.calls = ModelCalls(self.runner.run, deps.results, deps.metrics,
                                owner=f"{worker.app_id}/{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}",
                                ledger=deps.store)
        self.slots = asyncio.Semaphore(worker.model_concurrency)
        self.traces = CycleTraces(deps.tracing)

    def define(self, app: faust.App, watched: Callable[[str], Callable[[AgentBody], AgentBody]],
               raw: dict[str, Any]) -> Any:
        """The agent on ``app``: a request is taken once a slot is free, and runs beside the next ones."""

        @app.agent(app.topic(self.deps.settings.kafka.topic_model_requests, **raw), name="model_workers",
                   concurrency=1)
        @watched("model_workers")
        async def model_workers(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
            async for done in self.in_flight.serve(stream, self.slots, self._call):
                yield done

        return model_workers

    def _call(self, event: EventT[bytes]) -> Coroutine[Any, Any, None]:
        message = event.message
        return self.run(message.key, message.value, message.partition, header_list(message.headers),
                        message.timestamp or 0.0)

    async def run(self, key: bytes | None, value: bytes | None, partition: int,
                  headers: Sequence[tuple[str, bytes]] = (), published_at: float = 0.0) -> None:
        """One request from the model-requests topic; a model result goes back to the same partition number of the
        results topic, the home of the record that asked. ``headers``: the request's trace (``cycle_traces``);
        ``published_at``: its Kafka timestamp (seconds), where the wait of a blocking observation starts."""
        try:
            await self._run(key, value, partition, headers, published_at)
        finally:
            self.slots.release()

    async def _run(self, key: bytes | None, value: bytes | None, partition: int,
                   headers: Sequence[tuple[str, bytes]], published_at: float) -> None:
        kafka = self.deps.settings.kafka
        try:
            request = decode_internal(value or b"")
            if isinstance(request, IndexForRecall):
                await self.recall.index(request)
                return
            if isinstance(request, ForgetIndexed):
                await self.recall.forget(request.resource_id, request.record_key)
                return
            if isinstance(request, ExpireIndex):
                await self.recall.expire(request)
                return
            if isinstance(request, EraseIndexed):
                removed, remaining = await self.recall.erase(request.resource_id, request.thread_id)
                await self.publisher.send(Publication(
                    kafka.topic_model_results, key or request.erase_id.encode(),
                    encode_internal(EraseIndexDone(request.erase_id, removed, remaining)), partition=partition))
                return
            if not isinstance(request, RequestObservation | RequestReflection):
                raise WireDecodeError("invalid_fields", f"{type(request).__name__} is not a model request")
            with self.traces.cycle(request, extract(headers), links_of(headers), published_at) as cycle:
                result = await self.calls.answer(request)
                if result is None:
                    return  # its record was erased: nothing is published (``model_calls``)
                cycle.ended(result)
                await self.publisher.send(Publication(kafka.topic_model_results, key or request.record_key.encode(),
                                                      encode_internal(result), cycle.headers(),
                                                      partition=partition))
        except WireDecodeError as exc:
            log.error("unreadable model request dropped: %s", exc)
        except Exception:
            log.exception("model call failed unexpectedly; its deadline timer will ask again")
