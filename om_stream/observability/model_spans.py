"""A span per model call attempt, named and attributed as the OpenTelemetry GenAI semantic conventions say.

``ModelCallSpans`` is a call observer like ``ModelCallMetrics``: the gateway calls it after every attempt (and
``MeteredModel`` after each call of a model no gateway serves, the offline one). The attempt has ended by then, so
its span is written after the fact: started ``seconds`` ago, ended now, a child of the current span (the cycle's:
the observer runs inside the call, where the cycle's context is current).

Attributes (GenAI conventions, client spans: https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/):
``gen_ai.operation.name`` (``chat``), ``gen_ai.provider.name`` and the older ``gen_ai.system`` (the same value),
``gen_ai.request.model`` (the route's model), ``gen_ai.response.model`` (what the provider says answered),
``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.response.finish_reasons``, ``error.type`` on a failed
attempt; and om-stream's own: ``om.role`` (observer, reflector, extractor), ``om.attempt``, ``om.cost_usd`` (absent
when the price is unknown: never a silent zero). Never the prompt or the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from om_stream.observability.model_metrics import ModelAttempt, operation_name, provider_name
from om_stream.observability.tracing import Tracing

__all__ = ["ModelCallSpans", "each"]


class ModelCallSpans:
    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    def __call__(self, record: ModelAttempt) -> None:
        if not self.tracing.enabled:
            return
        operation, provider = operation_name(record.role), provider_name(record.model)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": operation, "gen_ai.provider.name": provider, "gen_ai.system": provider,
            "gen_ai.request.model": record.model, "om.role": record.role, "om.attempt": record.attempt}
        if record.response_model:
            attributes["gen_ai.response.model"] = record.response_model
        if record.finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [record.finish_reason]
        if record.usage is not None:
            attributes["gen_ai.usage.input_tokens"] = record.usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = record.usage.output_tokens
        if record.cost_usd is not None:
            attributes["om.cost_usd"] = record.cost_usd
        if record.error_kind:
            attributes["error.type"] = record.error_kind
        ended = time.time_ns()
        span = self.tracing.tracer.start_span(f"{operation} {record.model}", kind=SpanKind.CLIENT,
                                              start_time=ended - int(max(0.0, record.seconds) * 1e9),
                                              attributes=attributes)
        if not record.ok:
            span.set_status(Status(StatusCode.ERROR, record.error_kind or "error"))
        span.end(ended)


def each(*observers: Callable[[ModelAttempt], None]) -> Callable[[ModelAttempt], None]:
    """One observer that tells every one of ``observers`` (``MeteredModel`` takes one)."""

    def tell(record: ModelAttempt) -> None:
        for observer in observers:
            observer(record)

    return tell
