"""The spans of Observer and Reflector cycles: one per cycle, in the trace of the input that asked for it.

Both drivers open them here. The Kafka model workers read the asking input's context and the links from the model
request's headers (``traceparent``/``tracestate``, ``om_trace_links``: ``runtime/worker/trace_links``); the embedded
runner hands them over in process. The cycle's span is a child of the asking input's ingest span and links to the
ingest spans of the messages an observation covers: a cycle outlives the messages it covers, and may cover
messages of many traces. Its model calls are its children (``observability.model_spans``), and the result carries
the cycle's context on (``CycleSpan.headers``, ``CycleSpan.context``), so that the input taking the result in (and
the context it publishes) continues the trace.

A synchronous (blocking) observation is the one an agent waits for: its cycle span is wrapped in an
``om.blocking wait`` span that starts when the request was published (its Kafka timestamp, or the moment the
embedded runner started it), so the trace shows how long the agent's context waited for the Observer, queue
included.

Memory spans carry the GenAI conventions' memory operation names (``gen_ai.operation.name``: ``update_memory``
for an observation or a reflection; the well-known values create_memory, update_memory, search_memory,
delete_memory: https://docs.livekit.io/reference/agents-js/variables/agents.telemetry.traceTypes.GenAIOperationName.html,
and the ``gen_ai.memory.client`` span's ``gen_ai.memory.store.id`` / ``gen_ai.memory.record.count`` of
https://github.com/open-telemetry/semantic-conventions-genai). Never the messages or the observations, unless
``OM_TRACING_CONTENT`` says so (the observations, then).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, set_span_in_context
from opentelemetry.util.types import AttributeValue

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.inputs import ModelResultArrived
from om_stream.observability.tracing import Tracing
from om_stream.runtime.spans import failed, traced
from om_stream.trace_headers import inject

__all__ = ["MEMORY_STORE_ID", "CycleSpan", "CycleTraces"]

MEMORY_STORE_ID = "om-stream"  # gen_ai.memory.store.id: the observational memory (not a thread: ids stay out)


class CycleSpan:
    """The span of one cycle (or nothing, when the driver does not trace)."""

    def __init__(self, tracing: Tracing, span: Span | None) -> None:
        self.tracing = tracing
        self.span = span

    def ended(self, result: ModelResultArrived) -> None:
        span = self.span
        if span is None:
            return
        span.set_attributes({"om.cycle.ok": result.ok, "om.cycle.duration_ms": result.duration_ms})
        if result.model:
            span.set_attribute("om.cycle.model", result.model)
        if result.fallback_model:
            span.set_attribute("om.cycle.fallback_model", result.fallback_model)
        if not result.ok:
            failed(span, result.error_kind or "error")
        span.set_attributes(self.tracing.content_attributes("om.observations", result.observations))

    def context(self) -> Context | None:
        """The cycle's context, which the input taking its result in continues (None: not traced)."""
        return set_span_in_context(self.span) if self.span is not None else None

    def headers(self) -> list[tuple[str, bytes]]:
        """The result's trace headers: the cycle's context, carried to the memory agent on the result's record."""
        context = self.context()
        return inject(context) if context is not None else []


class CycleTraces:
    """Cycle spans of one driver: ``kind`` is CONSUMER for the model workers (the request came over Kafka) and
    INTERNAL in process."""

    def __init__(self, tracing: Tracing, kind: SpanKind = SpanKind.CONSUMER) -> None:
        self.tracing = tracing
        self.kind = kind

    @contextmanager
    def cycle(self, request: RequestObservation | RequestReflection, asker: Context | None,
              covered: Sequence[SpanContext], published_at: float) -> Iterator[CycleSpan]:
        """The cycle's span, a child of ``asker`` (the asking input's ingest span; None: the current context) linked
        to ``covered`` (the covered messages' ingest spans). ``published_at``: when the request was published
        (seconds since the epoch; 0: now)."""
        tracing = self.tracing
        if not tracing.enabled:
            yield CycleSpan(tracing, None)
            return
        observation = isinstance(request, RequestObservation)
        count = len(request.message_ids) if isinstance(request, RequestObservation) else len(request.segment_ids)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "update_memory", "gen_ai.memory.store.id": MEMORY_STORE_ID,
            "gen_ai.memory.record.count": count, "om.cycle.kind": request.kind, "om.cycle.trigger": request.trigger,
            "om.cycle.attempt": request.attempt, "om.cycle.offline": request.use_offline_model,
            **tracing.subject_attributes(resource_id=request.resource_id)}
        context = asker
        with ExitStack() as stack:
            if request.kind == "sync":
                started = int(published_at * 1e9) if published_at else time.time_ns()
                wait = stack.enter_context(traced(
                    tracing.tracer, "om.blocking wait", context=context, start_time=started,
                    attributes={"om.cycle.operation": "observation" if observation else "reflection"}))
                context = set_span_in_context(wait)
            span = stack.enter_context(traced(
                tracing.tracer, "om.observe" if observation else "om.reflect", context=context,
                kind=self.kind, attributes=attributes, links=[Link(linked) for linked in covered]))
            yield CycleSpan(tracing, span)
