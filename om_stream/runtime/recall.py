"""Recall in a running om-stream: answering the recall tool (HTTP and the request/reply topics share this) and
indexing observation groups for semantic search (the engine's ``IndexForRecall`` commands).

The recall tool reads the content store, so it needs a store that can be browsed (SQLite or Cassandra). Search
also needs ``retrieval.vector`` in the OM options, an embedder and the Qdrant index; without them a search call is
answered with the tool's own "search is not configured" result, never an error.

Indexing runs beside the memory agent, never inside it: a failure is retried with backoff, then counted
(``om_recall_index_failures_total``) and logged. An unindexed group weakens search; it loses no conversation.

A recall call is a ``search_memory`` span when the worker traces, in the trace its request carried (the request
topic's trace headers); the query only when ``OM_TRACING_CONTENT`` says so.
"""

from __future__ import annotations

import asyncio
import logging
import time

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from om_stream.core.commands import ExpireIndex, IndexForRecall
from om_stream.core.config import RetrievalConfig
from om_stream.errors import ModelError, RecallError, StorageError, WireDecodeError
from om_stream.observability.metrics import Metrics
from om_stream.observability.tracing import Tracing
from om_stream.runtime.recall_service import RecallService
from om_stream.runtime.spans import failed, traced
from om_stream.wire.codec import decode_json
from om_stream.wire.recall import RECALL_REQUEST_SCHEMA, RecallFailure, RecallRequest, RecallResponse

__all__ = ["RecallEndpoint", "decode_recall_request"]

log = logging.getLogger(__name__)

NO_STORE = ("recall is unavailable: it reads the content store, and this deployment keeps contents in memory only "
            "(set OM_MEMORY_STORE to cassandra or sqlite)")


def decode_recall_request(raw: bytes | None, max_bytes: int) -> RecallRequest:
    """An ``om.recall.request/v1`` from bytes; raises ``WireDecodeError`` with the reason it cannot be read. The JSON
    is bounded as every input record's is (``decode_json``)."""
    if not raw:
        raise WireDecodeError("invalid_json", "the request has no body")
    data = decode_json(raw, max_bytes)
    if data.get("schema", RECALL_REQUEST_SCHEMA) != RECALL_REQUEST_SCHEMA:
        raise WireDecodeError("unknown_schema", f"schema {data.get('schema')!r} is not {RECALL_REQUEST_SCHEMA}")
    try:
        return RecallRequest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])
        raise WireDecodeError("invalid_fields", problems) from None


class RecallEndpoint:
    def __init__(self, service: RecallService | None, metrics: Metrics, *,
                 retrieval: RetrievalConfig | None = None, index_attempts: int = 4,
                 index_backoff_s: float = 0.5, tracing: Tracing | None = None) -> None:
        self.service = service
        self.tracing = tracing or Tracing.off()
        self.retrieval = retrieval  # the deployment's: applies to calls that do not carry their own
        self.metrics = metrics
        self.index_attempts = index_attempts
        self.index_backoff_s = index_backoff_s

    @property
    def indexing(self) -> bool:
        return self.service is not None and self.service.search_available

    async def answer(self, request: RecallRequest, transport: str, trace: Context | None = None) -> RecallResponse:
        """``trace``: the context the call came in (a Kafka request's trace headers), the parent of its span."""
        if not self.tracing.enabled:
            return await self._answer(request, transport)
        tracing = self.tracing
        # gen_ai.operation.name search_memory: the GenAI conventions' memory search (see cycle_traces.py)
        with traced(tracing.tracer, "search_memory om-stream", context=trace, kind=SpanKind.SERVER, attributes={
                "gen_ai.operation.name": "search_memory", "gen_ai.memory.store.id": "om-stream",
                "om.recall.mode": request.arguments.mode, "om.recall.transport": transport,
                **tracing.subject_attributes(thread_id=request.thread_id, resource_id=request.resource_id),
                **tracing.content_attributes("gen_ai.memory.query.text", request.arguments.query)}) as span:
            response = await self._answer(request, transport)
            if response.error is not None:
                failed(span, response.error.code)
            return response

    async def _answer(self, request: RecallRequest, transport: str) -> RecallResponse:
        mode = request.arguments.mode
        began = time.perf_counter()
        if "retrieval" not in request.model_fields_set and self.retrieval is not None:
            request = request.model_copy(update={"retrieval": self.retrieval})
        if self.service is None:
            response = RecallResponse(correlation_id=request.correlation_id,
                                      error=RecallFailure(code="unavailable", message=NO_STORE))
        else:
            response = await self._handle(request)
        self.metrics.recall_seconds.labels(mode).observe(time.perf_counter() - began)
        outcome = "ok" if response.error is None else response.error.code
        self.metrics.recall_requests.labels(transport, mode, outcome).inc()
        return response

    async def _handle(self, request: RecallRequest) -> RecallResponse:
        """A wire request in, a wire response out: a call that cannot be answered as asked is ``invalid_request``,
        a store or embedder that fails is ``unavailable``."""
        assert self.service is not None
        try:
            result = await self.service.recall(request.scope(), request.arguments)
        except RecallError as exc:
            return RecallResponse(correlation_id=request.correlation_id,
                                  error=RecallFailure(code="invalid_request", message=str(exc)))
        except (StorageError, ModelError) as exc:
            log.warning("recall %s failed: %s", request.correlation_id, type(exc).__name__)
            return RecallResponse(correlation_id=request.correlation_id,
                                  error=RecallFailure(code="unavailable", message=f"recall is unavailable: {exc}"))
        return RecallResponse(correlation_id=request.correlation_id, result=result)

    async def index(self, command: IndexForRecall) -> None:
        """Index one observation group and its messages; retried, then counted as a failure (never raised)."""
        if self.service is None or not self.service.search_available:
            return
        delay = self.index_backoff_s
        for attempt in range(1, self.index_attempts + 1):
            try:
                points = await self.service.index_segment(command)
            except (ModelError, StorageError) as exc:
                if attempt == self.index_attempts:
                    self.metrics.recall_index_failures.inc()
                    log.error("segment %s of %s left out of the recall index after %d attempts: %s",
                              command.segment_id, command.record_key, attempt, exc)
                    return
                log.warning("indexing segment %s failed (attempt %d), retrying in %.1fs: %s", command.segment_id,
                            attempt, delay, exc)
                await asyncio.sleep(delay)
                delay *= 2
            else:
                self.metrics.recall_indexed_points.inc(points)
                return

    async def erase(self, resource_id: str, thread_id: str | None) -> tuple[int, int]:
        """An erase's sweep of the index: (points removed, points found after). Retried through an index outage:
        an erase does not finish without it."""
        if not self.indexing:
            return 0, 0
        assert self.service is not None
        delay = self.index_backoff_s
        while True:
            try:
                return await self.service.erase(resource_id, thread_id)
            except StorageError as exc:
                log.warning("erasing from the recall index failed, retrying in %.1fs: %s", delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def expire(self, command: ExpireIndex) -> None:
        """A retention purge's side of the index; retried, then counted as a failure and logged (the next purge of
        the record removes every point past the cutoff again, and recall never shows one meanwhile)."""
        if not self.indexing:
            return
        assert self.service is not None
        delay = self.index_backoff_s
        for attempt in range(1, self.index_attempts + 1):
            try:
                removed = await self.service.expire(command)
            except StorageError as exc:
                if attempt == self.index_attempts:
                    self.metrics.recall_index_failures.inc()
                    log.error("recall index purge of %s failed after %d attempts: %s", command.record_key, attempt,
                              exc)
                    return
                await asyncio.sleep(delay)
                delay *= 2
            else:
                self.metrics.expired_items.labels("recall_points").inc(removed)
                return

    async def forget(self, resource_id: str, record_key: str) -> None:
        if self.indexing:
            assert self.service is not None
            await self.service.forget(resource_id, record_key)
