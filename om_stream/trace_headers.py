"""W3C trace context in Kafka record headers: what every om-stream record carries so that one trace follows a message
from the agent through the worker to its context.

Two headers, named as the W3C recommends for the HTTP fields (``traceparent``, ``tracestate``), values UTF-8 bytes;
the TypeScript and Go clients write and read the same two.

One rule for what the clients write, the same in Python, TypeScript and Go (``client_headers``): W3C Trace Context
always (the headers the worker reads, whatever propagator the application uses), then the propagator the
application registered globally (``opentelemetry.propagate.set_global_textmap``, or ``OTEL_PROPAGATORS``; Python's
default is W3C trace context and baggage), which has the last word on what it writes (its own ``tracestate``,
baggage, another format's headers); nothing at all when no valid span is active. Reading is always W3C alone. The
worker writes W3C only (``inject``): an agent's baggage could hold anything, and never travels further than the
agent's own records.

Needs the OpenTelemetry API only (no SDK): the agent-side client and the worker both use it. With no span active
``inject`` writes nothing, and ``extract`` of a record without the headers gives an empty context (its handling
starts a trace of its own, sampled as the process's sampler says).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import SpanContext, get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["TRACE_HEADERS", "client_headers", "extract", "inject", "span_context_of"]

TRACE_HEADERS = ("traceparent", "tracestate")
_W3C = TraceContextTextMapPropagator()


class _HeaderGetter(Getter[dict[str, str]]):
    def get(self, carrier: dict[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return None if value is None else [value]

    def keys(self, carrier: dict[str, str]) -> list[str]:
        return list(carrier)


class _HeaderSetter(Setter[dict[str, str]]):
    def set(self, carrier: dict[str, str], key: str, value: str) -> None:
        carrier[key] = value


_GET = _HeaderGetter()
_SET = _HeaderSetter()


def extract(headers: Iterable[tuple[str, bytes | None]]) -> Context:
    """The trace context a record's headers carry (an empty context when they carry none, or a malformed one)."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in TRACE_HEADERS and value is not None:
            carrier[name] = value.decode("utf-8", "replace")
    return _W3C.extract(carrier, getter=_GET) if carrier else Context()


def inject(context: Context | None = None) -> list[tuple[str, bytes]]:
    """The headers of ``context`` (the current one by default); none when no valid span is active."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=context, setter=_SET)
    return [(name, carrier[name].encode()) for name in TRACE_HEADERS if name in carrier]


def client_headers(context: Context | None = None) -> list[tuple[str, bytes]]:
    """What an agent's record carries: W3C trace context, then what the globally registered propagator writes (it
    may replace a W3C header: the last word is the application's); none when no valid span is active."""
    if not get_current_span(context).get_span_context().is_valid:
        return []  # the application's propagator is not asked either: it could write an invalid trace's header
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=context, setter=_SET)
    propagate.get_global_textmap().inject(carrier, context=context, setter=_SET)
    return [(name, value.encode()) for name, value in carrier.items()]


def span_context_of(headers: Sequence[tuple[str, bytes]]) -> SpanContext | None:
    """The remote span a record's headers name, for a span link; None when they name none."""
    span = get_current_span(extract(headers)).get_span_context()
    return span if span.is_valid else None
