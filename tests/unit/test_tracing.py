"""Tracing's rules without a backend: on only when the standard variables ask for it, the W3C headers every record
carries, what a span may say (no content unless opted in, ids omitted or keyed digests), the model-call span's
GenAI attributes, and a failed span naming the error's kind, never its message. The SDK's in-memory exporter holds
the spans (the real backend is tests/integration/test_tracing.py's Jaeger)."""

from __future__ import annotations

import hashlib
import hmac
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracer, StatusCode, get_current_span, set_span_in_context
from prometheus_client.exposition import choose_encoder
from pydantic import SecretStr

from om_stream.adapters.gateway.gateway import CallRecord
from om_stream.core.prompts.chat import Usage
from om_stream.errors import ConfigError
from om_stream.observability.metrics import Metrics
from om_stream.observability.model_spans import ModelCallSpans
from om_stream.observability.tracing import CONTENT_LIMIT, Tracing, exemplar, otlp_exporter, tracing_enabled
from om_stream.runtime.ingest_spans import MessageSpans
from om_stream.runtime.spans import traced
from om_stream.runtime.worker.trace_links import link_header, links_of
from om_stream.settings import Settings, TracingSettings
from om_stream.trace_headers import extract, inject, span_context_of


@pytest.fixture
def recorded() -> Iterator[tuple[Tracing, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield Tracing(tracer=provider.get_tracer("test"), enabled=True, provider=provider), exporter
    finally:
        provider.shutdown()


@pytest.mark.parametrize(("environ", "on"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
])
def test_tracing_is_on_only_when_an_endpoint_is_set(environ: dict[str, str], on: bool) -> None:
    assert tracing_enabled(environ) is on
    tracing = Tracing.from_environment(TracingSettings(), environ)
    try:
        assert tracing.enabled is on
        assert isinstance(tracing.tracer, NoOpTracer) is not on
        assert (tracing.provider is not None) is on
    finally:
        tracing.shutdown()


def test_the_sdk_reads_the_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.1")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging")
    tracing = Tracing.from_environment(TracingSettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    try:
        assert tracing.provider is not None
        assert "0.1" in tracing.provider.sampler.get_description()
        assert not tracing.follows_parent  # a plain ratio sampler may sample a child of a sampled-out parent
        attributes = tracing.provider.resource.attributes
        assert attributes["service.name"] == "om-stream"  # no name given: om-stream's own
        assert attributes["deployment.environment"] == "staging"
    finally:
        tracing.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memory-eu")
    named = Tracing.from_environment(TracingSettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                                         "OTEL_SERVICE_NAME": "memory-eu"})
    try:
        assert named.provider is not None and named.provider.resource.attributes["service.name"] == "memory-eu"
    finally:
        named.shutdown()


def test_the_settings_read_om_tracing_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OM_TRACING_CONTENT", "true")
    monkeypatch.setenv("OM_TRACING_IDS", "hashed")
    monkeypatch.setenv("OM_TRACING_ID_KEY", "k")
    settings = Settings().tracing
    assert settings.content and settings.ids == "hashed" and settings.id_key is not None
    monkeypatch.setenv("OM_TRACING_IDS", "plain")
    with pytest.raises(ValueError, match="ids"):
        Settings()


def test_ids_are_omitted_or_keyed_digests_and_content_only_when_opted_in() -> None:
    default = Tracing.off().with_rules(TracingSettings())
    assert default.subject_attributes(thread_id="t-1", resource_id="r-1") == {}
    assert default.content_attributes("om.message.text", "hello") == {}
    hashed = Tracing.off().with_rules(TracingSettings(ids="hashed", id_key=SecretStr("secret"), content=True))
    attributes = hashed.subject_attributes(thread_id="t-1", resource_id="r-1")
    expected = hmac.new(b"secret", b"t-1", hashlib.sha256).hexdigest()[:32]
    assert attributes == {"om.thread.hash": expected, "om.resource.hash": hashed.digest("r-1")}
    assert hashed.digest("t-1") != Tracing.off().with_rules(TracingSettings(ids="hashed")).digest("t-1")
    assert hashed.content_attributes("om.message.text", "x" * (CONTENT_LIMIT + 10)) == {
        "om.message.text": "x" * CONTENT_LIMIT}


def test_a_record_carries_the_current_span_in_w3c_headers(recorded: tuple[Tracing, InMemorySpanExporter]) -> None:
    tracing, _ = recorded
    assert inject() == []  # no span active: no headers
    with tracing.tracer.start_as_current_span("agent") as span:
        headers = inject()
    names = [name for name, _ in headers]
    assert names[0] == "traceparent" and set(names) <= {"traceparent", "tracestate"}
    context = span.get_span_context()
    assert headers[0][1].decode() == f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert context.trace_flags.sampled
    carried = get_current_span(extract([("content-type", b"application/json"), *headers])).get_span_context()
    assert (carried.trace_id, carried.span_id, carried.is_remote) == (context.trace_id, context.span_id, True)
    assert span_context_of(headers) == carried
    # a malformed header is no trace: the record starts one of its own
    assert span_context_of([("traceparent", b"00-zz-yy-01")]) is None
    assert extract([]) == {}


def test_a_cycle_links_to_the_messages_it_covers(recorded: tuple[Tracing, InMemorySpanExporter]) -> None:
    tracing, _ = recorded
    spans = MessageSpans(kept=2)
    contexts = []
    for message in ("m1", "m2", "m3"):
        with tracing.tracer.start_as_current_span(message) as span:
            spans.remember("thread", message, span.get_span_context())
            contexts.append(span.get_span_context())
    covered = spans.covering("thread", ["m1", "m2", "m3", "m4"])
    assert covered == contexts[1:]  # m1 was forgotten (kept=2), m4 never seen
    assert [(c.trace_id, c.span_id) for c in links_of(link_header(covered))] == [
        (c.trace_id, c.span_id) for c in covered]
    assert link_header([]) == [] and links_of([("om_trace_links", b"garbage 00-1-2-01")]) == []


def test_a_model_call_span_follows_the_genai_conventions(recorded: tuple[Tracing, InMemorySpanExporter]) -> None:
    tracing, exporter = recorded
    spans = ModelCallSpans(tracing)
    spans(CallRecord(role="observer", model="openai/gpt-4o-mini", ok=True, seconds=0.25, attempt=1, entry=0,
                     usage=Usage(120, 30), cost_usd=0.0012, response_model="gpt-4o-mini-2024-07-18",
                     finish_reason="stop"))
    spans(CallRecord(role="reflector", model="gemini/gemini-2.5-flash", ok=False, seconds=1.0, attempt=2, entry=1,
                     error_kind="rate_limited"))
    ok, failed = exporter.get_finished_spans()
    assert ok.name == "chat openai/gpt-4o-mini"
    assert dict(ok.attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
        "gen_ai.request.model": "openai/gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.finish_reasons": ("stop",), "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30, "om.cost_usd": 0.0012, "om.role": "observer", "om.attempt": 1}
    assert ok.end_time is not None and ok.start_time is not None
    assert 0.2e9 < ok.end_time - ok.start_time < 0.3e9
    assert failed.status.status_code == StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "rate_limited"
    assert (failed.attributes or {})["gen_ai.provider.name"] == "gcp.gemini"
    assert "om.cost_usd" not in (failed.attributes or {})  # unknown, never a silent zero
    ModelCallSpans(Tracing.off())(CallRecord(role="observer", model="m", ok=True, seconds=0.1, attempt=1, entry=0))
    assert len(exporter.get_finished_spans()) == 2


def test_a_failed_span_names_the_kind_of_error_never_its_message(
        recorded: tuple[Tracing, InMemorySpanExporter]) -> None:
    tracing, exporter = recorded
    with pytest.raises(ValueError, match="secret"), traced(tracing.tracer, "om.store write"):
        raise ValueError("the user's secret message")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR and span.status.description == "ValueError"
    assert (span.attributes or {})["error.type"] == "ValueError"
    assert span.events == ()  # no exception event: its message could quote content
    with traced(tracing.tracer, "parent") as parent, traced(tracing.tracer, "child") as child:
        assert get_current_span() is child
    assert child.parent is not None and child.parent.span_id == parent.get_span_context().span_id
    context = set_span_in_context(parent)
    with traced(tracing.tracer, "explicit", context=context) as explicit:
        assert explicit.parent is not None and explicit.parent.span_id == parent.get_span_context().span_id


def test_a_latency_sample_links_to_its_sampled_trace_in_openmetrics(
        recorded: tuple[Tracing, InMemorySpanExporter]) -> None:
    tracing, _ = recorded
    assert exemplar() is None  # no span: no exemplar
    metrics = Metrics.create()
    with tracing.tracer.start_as_current_span("om.ingest") as span:
        metrics.message_to_context.observe(0.42, exemplar=exemplar())
    trace_id = f"{span.get_span_context().trace_id:032x}"
    encode, content_type = choose_encoder("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    exposed = encode(metrics.registry).decode()
    assert f'trace_id="{trace_id}"' in exposed
    classic, classic_type = choose_encoder("")
    assert classic_type.startswith("text/plain") and "trace_id" not in classic(metrics.registry).decode()
    unsampled = TracerProvider(sampler=ALWAYS_OFF).get_tracer("t")
    with unsampled.start_as_current_span("dropped"):
        assert exemplar() is None


@pytest.mark.parametrize(("environ", "module"), [
    ({}, "om_stream.observability.otlp_http"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "om_stream.observability.otlp_http"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": " GRPC "}, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"),
    # the traces' own variable wins over the general one, as the specification says
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
     "om_stream.observability.otlp_http"),
    ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"),
])
def test_the_protocol_variables_pick_the_exporter(environ: dict[str, str], module: str) -> None:
    exporter = otlp_exporter(environ)
    try:
        assert type(exporter).__module__ == module
    finally:
        exporter.shutdown()
    tracing = Tracing.from_environment(TracingSettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                                           **environ})
    tracing.shutdown()


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"])
def test_a_protocol_the_worker_cannot_speak_stops_it_naming_the_variable(variable: str) -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", variable: "http/json"}
    with pytest.raises(ConfigError, match=f"^{variable}: 'http/json' is not a protocol"):
        Tracing.from_environment(TracingSettings(), environ)


def test_grpc_without_its_package_stops_the_worker_naming_the_variable_and_the_package(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a None entry in sys.modules makes the import fail as an absent package does (the image leaves the extra out)
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", None)
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(ConfigError, match=r"^OTEL_EXPORTER_OTLP_PROTOCOL: grpc needs the package "
                                          r"opentelemetry-exporter-otlp-proto-grpc"):
        Tracing.from_environment(TracingSettings(), environ)


@pytest.mark.parametrize(("sampler", "follows"), [(None, True), ("parentbased_traceidratio", True),
                                                  ("parentbased_always_off", True), ("always_on", False)])
def test_the_worker_knows_whether_its_sampler_follows_the_parent(
        monkeypatch: pytest.MonkeyPatch, sampler: str | None, follows: bool) -> None:
    if sampler is None:
        monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)  # the SDK's default: parent-based always-on
    else:
        monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    tracing = Tracing.from_environment(TracingSettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    try:
        assert tracing.follows_parent is follows
        assert tracing.with_rules(TracingSettings(content=True)).follows_parent is follows
    finally:
        tracing.shutdown()
