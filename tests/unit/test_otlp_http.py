"""The worker's OTLP/HTTP exporter against a real HTTP server on loopback: what it posts is the SDK's request, byte for
byte, with the standard variables' headers and compression; it retries what the SDK retries; and it refuses a batch
over the size limit or after shutdown, as the SDK's exporter does."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from om_stream.observability.otlp_http import HttpSpanExporter


@dataclass
class Collector:
    """An OTLP/HTTP receiver: it answers each POST with the next status of ``answers`` (then 200) and keeps it."""

    url: str
    answers: list[int] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def collector() -> Iterator[Collector]:
    state = Collector("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(state.answers.pop(0) if state.answers else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def some_spans() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "om-stream"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("om_stream")
    for n in range(3):
        with (tracer.start_as_current_span("om.ingest", kind=SpanKind.CONSUMER, attributes={"om.batch": n}),
              tracer.start_as_current_span("om.decide", attributes={"om.commands": ("EmitEvent",)})):
            pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def test_it_posts_the_sdk_s_request_with_the_standard_variables_headers_and_compression(
        collector: Collector, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=memory,authorization=Bearer%20t0k")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    spans = some_spans()
    exporter = HttpSpanExporter()
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    [(path, headers, body)] = collector.requests
    assert path == "/v1/traces"
    assert headers["content-type"] == "application/x-protobuf" and headers["content-encoding"] == "gzip"
    assert headers["x-tenant"] == "memory" and headers["authorization"] == "Bearer t0k"
    assert gzip.decompress(body) == encode_spans(spans).SerializeToString()


def test_a_collector_that_is_briefly_unavailable_gets_the_batch_on_a_retry(collector: Collector) -> None:
    collector.answers = [503]
    exporter = HttpSpanExporter(endpoint=f"{collector.url}/v1/traces", timeout=10)
    try:
        assert exporter.export(some_spans()) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert len(collector.requests) == 2 and collector.requests[0][2] == collector.requests[1][2]


def test_a_refusal_is_a_failure_and_is_not_retried(collector: Collector) -> None:
    collector.answers = [400]
    exporter = HttpSpanExporter(endpoint=f"{collector.url}/v1/traces")
    try:
        assert exporter.export(some_spans()) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown()
    assert len(collector.requests) == 1


def test_a_batch_over_the_size_limit_is_dropped_unsent(collector: Collector, caplog: pytest.LogCaptureFixture) -> None:
    spans = some_spans()
    size = len(encode_spans(spans).SerializeToString())
    exporter = HttpSpanExporter(endpoint=f"{collector.url}/v1/traces", max_request_size=size - 1)
    try:
        assert exporter.export(spans) is SpanExportResult.FAILURE
        assert "over the exporter's limit" in caplog.text
        assert exporter.export(spans[:1]) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert len(collector.requests) == 1


def test_after_shutdown_it_sends_nothing(collector: Collector) -> None:
    exporter = HttpSpanExporter(endpoint=f"{collector.url}/v1/traces")
    exporter.shutdown()
    assert exporter.export(some_spans()) is SpanExportResult.FAILURE
    assert collector.requests == []
