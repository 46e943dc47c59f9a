"""``trace_headers`` reads a plain ``traceparent`` and writes the headers itself, and gives exactly what the W3C
propagator gives: ``extract`` for any header value, well-formed or not, and ``inject`` for any span context."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    TraceFlags,
    TraceState,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from om_stream.trace_headers import TRACE_HEADERS, extract, inject

HEX = "0123456789abcdef"


def by_propagator(headers: list[tuple[str, bytes]]) -> SpanContext:
    carrier = {name: value.decode("utf-8", "replace") for name, value in headers}
    return get_current_span(TraceContextTextMapPropagator().extract(carrier)).get_span_context()


def field(size: int) -> st.SearchStrategy[str]:
    """A field of ``size`` hex digits, now and then zero, upper case, or a digit too many or too few."""
    return st.one_of(st.text(HEX, min_size=size, max_size=size), st.just("0" * size),
                     st.text(HEX + "ABCDEF", min_size=size, max_size=size),
                     st.text(HEX, min_size=size - 1, max_size=size + 1),
                     st.text(HEX + "xg_ -", min_size=size, max_size=size))


traceparents = st.one_of(
    st.builds(lambda v, t, s, f, tail: f"{v}-{t}-{s}-{f}{tail}",
              st.sampled_from(["00", "01", "ff", "0", "cc"]), field(32), field(16), field(2),
              st.sampled_from(["", "", "", "-", "-extra", " ", "\t"])),
    st.text(max_size=80))


@settings(max_examples=600)
@given(traceparent=traceparents, tracestate=st.one_of(st.none(), st.just("vendor=opaque,other=1")))
def test_extract_gives_what_the_propagator_gives(traceparent: str, tracestate: str | None) -> None:
    headers = [("traceparent", traceparent.encode())]
    if tracestate is not None:
        headers.append(("tracestate", tracestate.encode()))
    found = get_current_span(extract(headers)).get_span_context()
    assert found == by_propagator(headers)
    assert found.trace_flags == by_propagator(headers).trace_flags
    assert found.is_remote == by_propagator(headers).is_remote
    assert found.trace_state == by_propagator(headers).trace_state


def test_a_record_without_trace_headers_gives_an_empty_context() -> None:
    assert extract([("content-type", b"application/json")]) == Context()


@settings(max_examples=300)
@given(trace_id=st.one_of(st.just(0), st.integers(1, 2**128 - 1)),
       span_id=st.one_of(st.just(0), st.integers(1, 2**64 - 1)), flags=st.integers(0, 255),
       state=st.sampled_from([None, [], [("vendor", "opaque")], [("a", "1"), ("b", "2")]]))
def test_inject_writes_what_the_propagator_writes(trace_id: int, span_id: int, flags: int,
                                                  state: list[tuple[str, str]] | None) -> None:
    span = SpanContext(trace_id=trace_id, span_id=span_id, is_remote=False, trace_flags=TraceFlags(flags),
                       trace_state=TraceState(state) if state is not None else None)
    context = set_span_in_context(NonRecordingSpan(span))
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=context)
    assert inject(context) == [(name, carrier[name].encode()) for name in TRACE_HEADERS if name in carrier]
