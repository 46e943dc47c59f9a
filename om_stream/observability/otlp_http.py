"""The worker's OTLP/HTTP span exporter: the SDK's, with each request encoded by ``otlp_encoding``.

Everything an operator configures stays the SDK's (the endpoint, headers, TLS files, compression, timeout and the
retries with backoff, from the standard ``OTEL_EXPORTER_OTLP_*`` variables); only the encoding of a batch changes,
from the SDK's protobuf objects to ``encode_request``, which writes the same bytes in well under half the time, on
the exporter's thread, which shares the GIL with the event loop.

This is the one place that reaches into the SDK exporter's private parts: its HTTP client (``_client``), its request
size limit and its shutdown flag. The exporter package is pinned in ``pyproject.toml``;
``tests/unit/test_otlp_http.py`` sends through a real HTTP server and fails if those parts move. What it leaves out
is the exporter's own metrics, which the SDK records only with ``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED`` and a
meter provider, neither of which the worker has.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from om_stream.observability.otlp_encoding import encode_request

__all__ = ["HttpSpanExporter"]

log = logging.getLogger(__name__)


class HttpSpanExporter(OTLPSpanExporter):
    """OTLP over HTTP with protobuf, configured as the SDK's exporter is, encoding with ``encode_request``."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return super().export(spans)  # the SDK's answer to a late batch: a warning and a failure
        try:
            body = encode_request(spans)
        except Exception:  # a name protobuf cannot hold (a lone surrogate): the batch is lost, the worker goes on
            log.exception("a batch of %d spans could not be encoded as OTLP and was dropped", len(spans))
            return SpanExportResult.FAILURE
        if 0 < self._max_request_size < len(body):
            log.warning("a batch of %d spans was dropped: its request of %d bytes is over the exporter's limit of %d",
                        len(spans), len(body), self._max_request_size)
            return SpanExportResult.FAILURE
        # the client compresses, sends, retries transient failures within the timeout, and logs what it gives up on
        return SpanExportResult.SUCCESS if self._client.export(body).success else SpanExportResult.FAILURE
