"""``encode_request`` writes the very bytes the SDK's encoder serializes, for any spans: the worker's own, spans made
through the SDK with events, links, statuses and limits, and spans whose attribute values OTLP cannot carry."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from om_stream.observability.otlp_encoding import encode_request


def sdk_bytes(spans: list[ReadableSpan]) -> bytes | type[Exception]:
    try:
        return encode_spans(spans).SerializeToString()
    except Exception as error:
        return type(error)


def ours(spans: list[ReadableSpan]) -> bytes | type[Exception]:
    try:
        return encode_request(spans)
    except Exception as error:
        return type(error)


def same_as_the_sdk(spans: list[ReadableSpan]) -> None:
    expected, got = sdk_bytes(spans), ours(spans)
    if isinstance(expected, bytes):
        assert got == expected, (ExportTraceServiceRequest.FromString(expected),
                                 ExportTraceServiceRequest.FromString(got) if isinstance(got, bytes) else got)
    else:  # a name or description protobuf cannot hold: the whole batch fails with both encoders
        assert not isinstance(got, bytes), f"the SDK raised {expected.__name__}, ours encoded"


surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2)
texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "om.ingest", "gen_ai.operation.name", "é", "😀"]))
names = st.one_of(texts, texts, texts, surrogates)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=2**63, max_value=2**70), st.integers(min_value=-(2**70), max_value=-(2**63) - 1),
    st.floats(allow_nan=True, allow_infinity=True), texts, surrogates, st.binary(max_size=8),
    st.builds(bytearray, st.binary(max_size=3)), st.builds(object), st.sampled_from([StatusCode.OK, SpanKind.CLIENT]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                      st.dictionaries(texts, inner, max_size=3)), max_leaves=6)
attribute_maps = st.dictionaries(texts, values, max_size=5)
ids = st.integers(min_value=0, max_value=2**64 - 1)
trace_ids = st.integers(min_value=0, max_value=2**128 - 1)
trace_states = st.one_of(st.just(TraceState()), st.builds(
    TraceState, st.lists(st.tuples(st.sampled_from(["vendor", "om", "a1"]), st.sampled_from(["x", "0.5", "k-v"])),
                         max_size=2, unique_by=lambda entry: entry[0])))
contexts = st.builds(SpanContext, trace_id=trace_ids, span_id=ids, is_remote=st.booleans(),
                     trace_flags=st.sampled_from([TraceFlags(0), TraceFlags(1)]), trace_state=trace_states)
times = st.one_of(st.none(), st.just(0), st.integers(min_value=1, max_value=2**64 - 1))


def bounded_attributes(attributes: dict[str, Any], limit: int | None) -> Any:
    """As given (values OTLP may refuse included), or held by the SDK's bounded map, which counts what it drops."""
    return attributes if limit is None else BoundedAttributes(maxlen=limit, attributes=attributes, immutable=True)


limits = st.one_of(st.none(), st.integers(min_value=0, max_value=3))
events = st.builds(lambda name, attributes, limit, at: Event(name, bounded_attributes(attributes, limit), at),
                   names, attribute_maps, limits,
                   st.one_of(st.sampled_from([0, 1]), st.integers(min_value=0, max_value=2**64 - 1)))
links = st.builds(lambda context, attributes, limit: Link(context, bounded_attributes(attributes, limit)),
                  contexts, st.one_of(st.none(), attribute_maps), limits)
# equal resources and scopes that are distinct objects: the SDK groups by equality, not identity
RESOURCES = [Resource({"service.name": "om-stream"}), Resource({"service.name": "om-stream"}),
             Resource({"service.name": "agent", "k8s.pod.name": "w-0"}, "https://opentelemetry.io/schemas/1.4.0")]
SCOPES = [None, InstrumentationScope("om_stream"), InstrumentationScope("om_stream"),
          InstrumentationScope("agent", "1.2", "https://opentelemetry.io/schemas/1.4.0", {"team": "memory"})]


def sequence(items: list[Any], limit: int | None) -> Any:
    return items if limit is None else BoundedList.from_seq(limit, items)


spans = st.builds(
    lambda name, context, parent, resource, attributes, attribute_limit, event_list, event_limit, link_list,
    link_limit, kind, status, start, end, scope: ReadableSpan(
        name, context, parent, resource, bounded_attributes(attributes, attribute_limit),
        sequence(event_list, event_limit), sequence(link_list, link_limit), kind, status=status, start_time=start,
        end_time=end, instrumentation_scope=scope),
    names, contexts, st.one_of(st.none(), contexts), st.sampled_from(RESOURCES), attribute_maps, limits,
    st.lists(events, max_size=3), limits, st.lists(links, max_size=3), limits, st.sampled_from(list(SpanKind)),
    st.builds(Status, st.sampled_from(list(StatusCode)), st.one_of(st.none(), names)), times, times,
    st.sampled_from(SCOPES))


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans, max_size=6))
def test_any_spans_are_encoded_to_the_sdk_s_bytes(batch: list[ReadableSpan]) -> None:
    logging.disable(logging.ERROR)  # both encoders log each value they leave out: thousands of lines otherwise
    try:
        same_as_the_sdk(batch)
    finally:
        logging.disable(logging.NOTSET)


def test_the_worker_s_spans_made_through_the_sdk_are_encoded_to_its_bytes() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "om-stream"}),
                              span_limits=SpanLimits(max_attributes=4, max_events=2, max_links=1))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("om_stream", "1.0")
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1), trace_state=TraceState([("om", "1")]))
    with tracer.start_as_current_span("om.ingest", kind=SpanKind.CONSUMER, links=[Link(remote, {"why": "cycle"})],
                                      attributes={"messaging.system": "kafka", "om.batch": 20}) as ingest:
        with tracer.start_as_current_span("om.decide", attributes={"om.commands": ("EmitEvent", "PersistMessage")}):
            pass
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as call:
            call.set_attributes({"gen_ai.usage.input_tokens": 1200, "gen_ai.cost": 0.0042, "a": True, "b": 2.5,
                                 "c": [1, 2]})  # one past the limit of four: counted as dropped
            call.record_exception(ValueError("the provider stalled"))
            for n in range(3):
                call.add_event(f"retry {n}", {"attempt": n})
            call.set_status(Status(StatusCode.ERROR, "timed out"))
        ingest.set_status(StatusCode.OK)
    provider.shutdown()
    finished = list(exporter.get_finished_spans())
    assert len(finished) == 3 and any(span.dropped_attributes for span in finished)
    assert any(span.dropped_events for span in finished)
    same_as_the_sdk(finished)
    same_as_the_sdk(finished[::-1] + finished)


def test_a_value_otlp_cannot_carry_loses_that_attribute_only_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    span = ReadableSpan("om.ingest", SpanContext(1, 2, False), attributes={
        "kept": "yes", "too big": 2**64, "not a value": object(), "nested too big": [1, [2**70]], "nan": math.nan})
    with caplog.at_level(logging.ERROR, "om_stream.observability.otlp_encoding"):
        encoded = encode_request([span])
    decoded = ExportTraceServiceRequest.FromString(encoded).resource_spans[0].scope_spans[0].spans[0]
    assert [attribute.key for attribute in decoded.attributes] == ["kept", "nan"]
    assert [record.getMessage().split(":")[0] for record in caplog.records] == [
        "Failed to encode key too big", "Failed to encode key not a value", "Failed to encode key nested too big"]
    same_as_the_sdk([span])


def test_no_spans_is_an_empty_request() -> None:
    assert encode_request([]) == b"" == ExportTraceServiceRequest().SerializeToString()
