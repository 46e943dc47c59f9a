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

import re
from collections.abc import Iterable, Sequence

from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter
from opentelemetry.trace import (
    INVALID_SPAN_CONTEXT,
    NonRecordingSpan,
    SpanContext,
    TraceFlags,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["TRACE_HEADERS", "client_headers", "extract", "inject", "span_context_of"]

TRACE_HEADERS = ("traceparent", "tracestate")
_W3C = TraceContextTextMapPropagator()
_TRACEPARENT_00 = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


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
    """The trace context a record's headers carry (an empty context when they carry none, or a malformed one).

    The common case, a version-00 ``traceparent`` alone, is read here directly: the worker reads one per record, and
    the propagator's general path costs several microseconds of it. It gives exactly what the propagator gives
    (``tests/unit/test_trace_headers``); anything else (a ``tracestate``, another version, a malformed value) is left
    to the propagator."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in TRACE_HEADERS and value is not None:
            carrier[name] = value.decode("utf-8", "replace")
    if not carrier:
        return Context()
    if len(carrier) == 1 and (parent := _plain_traceparent(carrier.get("traceparent"))) is not None:
        return set_span_in_context(NonRecordingSpan(parent), Context())
    return _W3C.extract(carrier, getter=_GET)


def _plain_traceparent(value: str | None) -> SpanContext | None:
    """The remote span a version-00 ``traceparent`` names; None for anything the propagator should judge."""
    found = _TRACEPARENT_00.fullmatch(value) if value is not None else None
    if found is None:
        return None
    trace_id, span_id = int(found[1], 16), int(found[2], 16)
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=TraceFlags(int(found[3], 16)))


def inject(context: Context | None = None) -> list[tuple[str, bytes]]:
    """The headers of ``context`` (the current one by default); none when no valid span is active. Written here as
    the W3C propagator writes them (one per publication: its general path costs more than the formatting)."""
    span = get_current_span(context).get_span_context()
    if span == INVALID_SPAN_CONTEXT:
        return []
    headers = [("traceparent", f"00-{span.trace_id:032x}-{span.span_id:016x}-{span.trace_flags:02x}".encode())]
    if span.trace_state:
        headers.append(("tracestate", span.trace_state.to_header().encode()))
    return headers


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
