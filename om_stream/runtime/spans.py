"""How the runtime opens a span: as a child of the context it is given (or the current one), made current for what
runs inside it, and, when what runs inside fails, marked failed with the error's type only (``error.type``).

The SDK's own ``start_as_current_span`` records an exception as an event with its message and sets the status
description to it; an error's text can quote what a model or a store was given, so neither is used here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer, get_current_span, use_span
from opentelemetry.util.types import AttributeValue

__all__ = ["failed", "recording", "traced"]


def recording(context: Context | None) -> bool:
    """Whether ``context`` holds a span that is recorded (sampled): the children of an unsampled span are skipped,
    not made (its context still travels on, so that what follows knows it was not sampled)."""
    return context is not None and get_current_span(context).is_recording()


def failed(span: Span, error: BaseException | str) -> None:
    """``span`` ended in failure: its status and ``error.type`` name the error's kind, never its message."""
    kind = error if isinstance(error, str) else type(error).__name__
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


@contextmanager
def traced(tracer: Tracer, name: str, *, context: Context | None = None, kind: SpanKind = SpanKind.INTERNAL,
           attributes: Mapping[str, AttributeValue] | None = None, links: list[Link] | None = None,
           start_time: int | None = None) -> Iterator[Span]:
    span = tracer.start_span(name, context=context, kind=kind, attributes=attributes, links=links,
                             start_time=start_time, record_exception=False, set_status_on_exception=False)
    with use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield span
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                failed(span, exc)
            raise
