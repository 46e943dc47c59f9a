"""The clients' one rule for trace headers, in the Python client: W3C Trace Context always, then what the
application's globally registered propagator writes (it has the last word); nothing without a valid span. The
TypeScript and Go clients test the same rule (clients/ts/test/unit/tracing.test.ts, clients/go/tracing_test.go)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import baggage, propagate
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context, attach, detach
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import CarrierT, Setter, TextMapPropagator, default_setter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer, get_current_span
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from om_stream.client.client import _headers
from om_stream.trace_headers import client_headers, inject


class VendorPropagator(TextMapPropagator):
    """Another format's propagator, which also writes a tracestate of its own."""

    def inject(self, carrier: CarrierT, context: Context | None = None,
               setter: Setter[CarrierT] = default_setter) -> None:
        span = get_current_span(context).get_span_context()
        setter.set(carrier, "x-vendor-trace", f"{span.trace_id:032x}")
        setter.set(carrier, "tracestate", "vendor=1")

    def extract(self, carrier: CarrierT, context: Context | None = None, getter: Any = None) -> Context:
        return context if context is not None else Context()

    @property
    def fields(self) -> set[str]:
        return {"x-vendor-trace", "tracestate"}


@pytest.fixture
def tracer() -> Iterator[Tracer]:
    provider = TracerProvider()
    registered = propagate.get_global_textmap()
    try:
        yield provider.get_tracer("agent")
    finally:
        propagate.set_global_textmap(registered)
        provider.shutdown()


def traceparent_of(span: Any) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def test_the_client_writes_w3c_and_what_the_registered_propagator_writes(tracer: Tracer) -> None:
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()]))
    token = attach(baggage.set_baggage("tenant", "acme"))
    try:
        with tracer.start_as_current_span("agent turn") as span:
            headers = dict(_headers())
        # the worker writes W3C alone: an agent's baggage never travels further than the agent's own records
        with tracer.start_as_current_span("worker"):
            assert {name for name, _ in inject()} <= {"traceparent", "tracestate"}
    finally:
        detach(token)
    assert headers["content-type"] == b"application/json"
    assert headers["traceparent"].decode() == traceparent_of(span)
    assert headers["baggage"] == b"tenant=acme"


def test_the_traceparent_the_worker_reads_is_written_whatever_the_application_registered(tracer: Tracer) -> None:
    propagate.set_global_textmap(VendorPropagator())
    with tracer.start_as_current_span("agent turn") as span:
        headers = client_headers()
    names = [name for name, _ in headers]
    assert names[0] == "traceparent", names  # W3C first, then the application's propagator
    carried = dict(headers)
    assert carried["traceparent"].decode() == traceparent_of(span)
    assert carried["x-vendor-trace"].decode() == f"{span.get_span_context().trace_id:032x}"
    assert carried["tracestate"] == b"vendor=1"  # the application's propagator has the last word
    # without a span the propagator is not asked (this one would write a header of an invalid trace)
    assert client_headers() == []
    assert _headers() == [("content-type", b"application/json")]


def test_with_no_propagator_registered_the_client_still_writes_w3c(tracer: Tracer) -> None:
    propagate.set_global_textmap(CompositePropagator([]))
    with tracer.start_as_current_span("agent turn") as span:
        headers = client_headers()
    assert [name for name, _ in headers] == ["traceparent"]
    assert headers[0][1].decode() == traceparent_of(span)
