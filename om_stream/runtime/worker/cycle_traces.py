"""The model workers' spans: one per Observer or Reflector cycle, in the trace of the input that asked for it.

A model request's headers carry the asking input's ingest span (``traceparent``/``tracestate``) and the ingest
spans of the messages an observation covers (``om_trace_links``, ``trace_links``). The cycle's span is a child
of the first and links to the others: a cycle outlives the messages it covers, and may cover messages of many
traces. Its model calls are its children (``observability.model_spans``), and the result it publishes carries the
cycle's context on, so that the input taking the result in (and the context it publishes) continues the trace.

A synchronous (blocking) observation is the one an agent waits for: its cycle span is wrapped in an
``om.blocking wait`` span that starts when the request was published (its Kafka timestamp), so the trace shows
how long the agent's context waited for the Observer, queue included.

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

from opentelemetry.trace import Link, Span, SpanKind, set_span_in_context
from opentelemetry.util.types import AttributeValue

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.inputs import ModelResultArrived
from om_stream.observability.tracing import Tracing
from om_stream.runtime.spans import failed, traced
from om_stream.runtime.worker.trace_links import links_of
from om_stream.trace_headers import extract, inject

__all__ = ["MEMORY_STORE_ID", "CycleSpan", "CycleTraces"]

MEMORY_STORE_ID = "om-stream"  # gen_ai.memory.store.id: the observational memory (not a thread: ids stay out)


class CycleSpan:
    """The span of one cycle (or nothing, when the worker does not trace)."""

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

    def headers(self) -> list[tuple[str, bytes]]:
        """The result's trace headers: the cycle's context, which the input taking the result in continues."""
        return inject(set_span_in_context(self.span)) if self.span is not None else []


class CycleTraces:
    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    @contextmanager
    def cycle(self, request: RequestObservation | RequestReflection, headers: Sequence[tuple[str, bytes]],
              published_at: float) -> Iterator[CycleSpan]:
        tracing = self.tracing
        if not tracing.enabled:
            yield CycleSpan(tracing, None)
            return
        observation = isinstance(request, RequestObservation)
        covered = len(request.message_ids) if isinstance(request, RequestObservation) else len(request.segment_ids)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "update_memory", "gen_ai.memory.store.id": MEMORY_STORE_ID,
            "gen_ai.memory.record.count": covered, "om.cycle.kind": request.kind, "om.cycle.trigger": request.trigger,
            "om.cycle.attempt": request.attempt, "om.cycle.offline": request.use_offline_model,
            **tracing.subject_attributes(resource_id=request.resource_id)}
        context = extract(headers)
        with ExitStack() as stack:
            if request.kind == "sync":
                started = int(published_at * 1e9) if published_at else time.time_ns()
                wait = stack.enter_context(traced(
                    tracing.tracer, "om.blocking wait", context=context, start_time=started,
                    attributes={"om.cycle.operation": "observation" if observation else "reflection"}))
                context = set_span_in_context(wait)
            span = stack.enter_context(traced(
                tracing.tracer, "om.observe" if observation else "om.reflect", context=context,
                kind=SpanKind.CONSUMER, attributes=attributes,
                links=[Link(linked) for linked in links_of(headers)]))
            yield CycleSpan(tracing, span)
