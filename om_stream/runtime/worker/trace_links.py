"""The spans a model request links to, in its ``om_trace_links`` header: the ingest spans of the messages an
observation covers (the memory agent writes it, ``ingest_traces``; the model workers read it, ``cycle_traces``).

W3C ``traceparent`` values, space separated: one header whatever the number of links, readable by any consumer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from opentelemetry.trace import SpanContext, get_current_span

from om_stream.trace_headers import extract

__all__ = ["LINKS_HEADER", "link_header", "links_of"]

LINKS_HEADER = "om_trace_links"


def link_header(spans: Iterable[SpanContext]) -> list[tuple[str, bytes]]:
    """The ``om_trace_links`` header naming ``spans`` (none: no header)."""
    parents = [f"00-{s.trace_id:032x}-{s.span_id:016x}-{int(s.trace_flags):02x}" for s in spans]
    return [(LINKS_HEADER, " ".join(parents).encode())] if parents else []


def links_of(headers: Sequence[tuple[str, bytes]]) -> list[SpanContext]:
    """The spans an ``om_trace_links`` header names (malformed entries are skipped)."""
    value = dict(headers).get(LINKS_HEADER)
    if not value:
        return []
    spans = []
    for parent in value.decode("utf-8", "replace").split():
        context = get_current_span(extract([("traceparent", parent.encode())])).get_span_context()
        if context.is_valid:
            spans.append(context)
    return spans
