"""The ``recall`` agent: the recall tool over ``om.recall.requests`` → ``om.recall.responses`` (key = resource id),
each call answered as a bounded concurrent task by the same endpoint as ``POST /v1/recall``.

An unreadable request is answered with ``invalid_request`` when it names its correlation id (the caller is
waiting), else it goes to the dead-letter topic. It reads the content store and the recall index only: it runs in
the ``all`` and ``recall`` roles alike.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import faust

from om_stream.errors import WireDecodeError
from om_stream.runtime.recall import RecallEndpoint, decode_recall_request
from om_stream.runtime.worker.deps import WorkerDeps
from om_stream.runtime.worker.drain import InFlight
from om_stream.runtime.worker.kafka_records import Publisher, SourceRecord, dead_letter
from om_stream.runtime.worker.records import source_record
from om_stream.trace_headers import extract
from om_stream.wire.codec import decode_json, encode
from om_stream.wire.recall import RecallFailure, RecallResponse

__all__ = ["RecallRequests"]

log = logging.getLogger(__name__)
AgentBody = Callable[[faust.StreamT[bytes]], AsyncIterator[None]]


class RecallRequests:
    def __init__(self, deps: WorkerDeps, publisher: Publisher, recall: RecallEndpoint, in_flight: InFlight) -> None:
        self.deps = deps
        self.publisher = publisher
        self.recall = recall
        self.in_flight = in_flight
        self.slots = asyncio.Semaphore(deps.settings.worker.recall_concurrency)

    def define(self, app: faust.App, watched: Callable[[str], Callable[[AgentBody], AgentBody]],
               raw: dict[str, Any]) -> Any:
        kafka = self.deps.settings.kafka
        responses_topic = app.topic(kafka.topic_recall_responses, **raw)

        @app.agent(app.topic(kafka.topic_recall_requests, **raw), name="recall", concurrency=1)
        @watched("recall")
        async def recall(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
            async for done in self.in_flight.serve(
                    stream, self.slots, lambda event: self.answer(source_record(event), responses_topic)):
                yield done

        return recall

    async def answer(self, source: SourceRecord, responses_topic: Any) -> None:
        """One recall call from the request topic."""
        max_bytes = self.deps.settings.kafka.max_message_bytes
        try:
            try:
                request = decode_recall_request(source.value, max_bytes)
            except WireDecodeError as exc:
                refusal = _refusal(source.value, exc, max_bytes)
                if refusal is None:
                    await self.publisher.send(dead_letter(self.deps.settings.kafka, self.deps.metrics, source,
                                                          exc.reason, exc.detail))
                else:
                    self.deps.metrics.recall_requests.labels("kafka", "unknown", "invalid_request").inc()
                    await responses_topic.send(key=source.key, value=encode(refusal))
                return
            response = await self.recall.answer(request, "kafka",
                                                trace=extract(source.headers) if self.recall.tracing.enabled else None)
            await responses_topic.send(key=request.resource_id.encode(), value=encode(response))
        except Exception:
            log.exception("recall request at %s[%d]@%d was not answered", source.topic, source.partition,
                          source.offset)
        finally:
            self.slots.release()


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
