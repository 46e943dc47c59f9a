"""What an ``om.ingest`` span says of the input it handles, and the ingest spans of the messages taken in lately.

Both drivers open an ingest span per input (the Kafka memory agent per record, ``runtime/worker/ingest_traces``;
the embedded runner per applied input) and describe it here, so that a trace reads the same whichever ran it:
``om.input`` (the input's kind), a message's role (its text only with ``OM_TRACING_CONTENT``, its thread and
resource only as ``OM_TRACING_IDS`` says), a model result's operation and outcome.

A cycle outlives the messages it covers: the cycle's span links to their ingest spans. So a driver remembers the
span of each message it took in (``MessageSpans``: the newest ``MESSAGE_SPANS_KEPT``, in memory: after a restart a
cycle links to what this process saw). Only recorded spans are remembered: no cycle should link to a trace the
backend never gets.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import Span, SpanContext
from opentelemetry.util.types import AttributeValue

from om_stream.core.inputs import MessageAppended, ModelResultArrived
from om_stream.observability.tracing import Tracing
from om_stream.runtime.host_ports import Arrival

__all__ = ["LINKS_PER_REQUEST", "MESSAGE_SPANS_KEPT", "MessageSpans", "describe_input"]

MESSAGE_SPANS_KEPT = 65_536  # ~100 bytes each: the messages a cycle of this process may still link to
LINKS_PER_REQUEST = 64  # a cycle over more messages links to the newest of them (a span's links are bounded too)


class MessageSpans:
    """The ingest span of each message taken in lately, by record and message id."""

    def __init__(self, kept: int = MESSAGE_SPANS_KEPT) -> None:
        self.kept = kept
        self._spans: OrderedDict[tuple[str, str], SpanContext] = OrderedDict()

    def remember(self, key: str, message_id: str, span: SpanContext) -> None:
        self._spans[(key, message_id)] = span
        self._spans.move_to_end((key, message_id))
        while len(self._spans) > self.kept:
            self._spans.popitem(last=False)

    def covering(self, key: str, message_ids: Sequence[str]) -> list[SpanContext]:
        found = [self._spans.get((key, m)) for m in message_ids[-LINKS_PER_REQUEST:]]
        return [span for span in found if span is not None]


def describe_input(tracing: Tracing, span: Span, arrival: Arrival[Any], messages: MessageSpans) -> None:
    """Tell ``span`` (the ingest span of ``arrival``) what came in, and remember it when a message came in. A span
    that is not recorded (sampled out) is told nothing."""
    if not span.is_recording():
        return
    event = arrival.input
    attributes: dict[str, AttributeValue] = {"om.input": type(event).__name__}
    if isinstance(event, MessageAppended):
        message = event.message
        attributes.update(tracing.subject_attributes(thread_id=message.thread_id, resource_id=message.resource_id))
        attributes.update(tracing.content_attributes("om.message.text", message.text))
        attributes["om.message.role"] = message.role
        messages.remember(arrival.key, message.message_id, span.get_span_context())
    elif isinstance(event, ModelResultArrived):
        attributes.update({"om.cycle.operation": event.operation, "om.cycle.ok": event.ok})
    if arrival.resource_id:
        attributes.update(tracing.subject_attributes(resource_id=arrival.resource_id))
    span.set_attributes(attributes)
