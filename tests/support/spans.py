"""Reading the spans an ``InMemorySpanExporter`` holds: by name, their parents and ids, every attribute value
(to check that no content leaked into any). A plugin of every test session (tests/conftest.py): its ``exporter``
fixture is an exporter that holds a test's spans."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["attribute_values", "exporter", "parent_of", "provider_into", "span_id", "spans_named"]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


def provider_into(exporter: InMemorySpanExporter) -> TracerProvider:
    """A provider that hands each span to ``exporter`` as it ends (an application's, or a worker's in a test)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def spans_named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def attribute_values(exporter: InMemorySpanExporter) -> str:
    return " ".join(str(v) for s in exporter.get_finished_spans() for v in (s.attributes or {}).values())
