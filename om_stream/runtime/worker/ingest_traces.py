"""The memory agent's spans: one ``om.ingest`` span per input record, continuing the trace its headers carry.

A record's ``traceparent``/``tracestate`` headers (``om_stream.trace_headers``: the agent's span, or for a model
result the cycle's) make its ingest span a child of that span; a record without them starts a trace of its own,
sampled as the worker's sampler says. A record whose upstream span was sampled out makes no span at all when the
sampler follows the parent (``Tracing.follows_parent``, the SDK's default): the upstream span's context stands for
its ingest, so what follows stays sampled out at the cost of no span. The ingest span covers the record's whole
handling in its batch: decode (the attribute ``om.decode.duration_ms``: a span of its own cost more to record than
the decode it measured), decide (``om.decide``), the store writes (``om.store write``) and the publications it
caused (``om.context publish``; the model requests carry its context on). Those children are opened by the host and
the outlet from the context the record's ``Arrival`` carries (``Arrival.trace``). The span ends when the batch has
committed, or was fenced off (``om.fenced``: a rebalance took it; its records are read again elsewhere).

A thread's context goes out once per batch, its publish span a child of the ingest of the thread's newest input;
it links to the ingest spans of the thread's earlier inputs in the batch (``folded_links``), whose traces would
otherwise end with no sign of the context that answered them.

What the span says of its input, and the spans of the messages a cycle links to, are the embedded runner's too
(``runtime/ingest_spans``); the outlet hands a model request the links of the messages it covers (the
``om_trace_links`` header).

No span carries content unless ``OM_TRACING_CONTENT`` says so, and ids only as ``OM_TRACING_IDS`` says.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, get_current_span, set_span_in_context

from om_stream.observability.tracing import Tracing
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.ingest_spans import LINKS_PER_REQUEST, MessageSpans, describe_input
from om_stream.runtime.spans import failed, recording
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.trace_links import link_header
from om_stream.trace_headers import extract, inject

__all__ = ["IngestSpans", "folded_links", "request_headers"]


class IngestSpans:
    """The ingest spans of one batch, in the order of its records."""

    def __init__(self, tracing: Tracing, messages: MessageSpans, records: Sequence[SourceRecord]) -> None:
        self.tracing = tracing
        self.messages = messages
        self.spans: list[Span] = []
        for record in records:
            parent = extract(record.headers)
            if tracing.follows_parent and _sampled_out(parent):
                # the sampler would only make a span that records nothing: the upstream span stands for it, and
                # what this record causes (its context, its model requests) carries that trace on, sampled out
                self.spans.append(get_current_span(parent))
                continue
            received_ns = time.time_ns() - int(max(0.0, time.monotonic() - record.received_at) * 1e9) \
                if record.received_at else None
            self.spans.append(tracing.tracer.start_span(
                "om.ingest", context=parent, kind=SpanKind.CONSUMER, start_time=received_ns,
                attributes={"messaging.system": "kafka", "messaging.operation.type": "process",
                            "messaging.destination.name": record.topic,
                            "messaging.destination.partition.id": str(record.partition),
                            "messaging.kafka.offset": record.offset}))

    def context(self, index: int) -> Context:
        return set_span_in_context(self.spans[index])

    def decoded(self, index: int, arrival: Arrival[SourceRecord], seconds: float) -> Arrival[SourceRecord]:
        """``arrival`` in its ingest span's trace, the span told what came in and how long its decode took
        (``seconds``)."""
        span = self.spans[index]
        if span.is_recording():
            span.set_attribute("om.decode.duration_ms", round(seconds * 1000, 3))
        describe_input(self.tracing, span, arrival, self.messages)
        # a sampled-out span's context travels on too, so that what follows is sampled out as well
        return Arrival(arrival.key, arrival.resource_id, arrival.input, arrival.source, self.context(index))

    def refused(self, index: int, reason: str) -> None:
        failed(self.spans[index], reason)

    def fenced(self) -> None:
        """The batch straddled a rebalance: nothing of it was committed here, its records are read again."""
        for span in self.spans:
            span.set_attribute("om.fenced", True)

    def end(self) -> None:
        for span in self.spans:
            span.end()


def folded_links(folded: Sequence[Arrival[SourceRecord]]) -> list[Link]:
    """Links to the ingest spans of the inputs a context publication stands for besides its own (a thread's earlier
    inputs in the batch): only those recorded (a sampled-out trace never reaches the backend), the newest
    ``LINKS_PER_REQUEST`` of them."""
    spans = [get_current_span(a.trace).get_span_context() for a in folded if recording(a.trace)]
    return [Link(span) for span in spans[-LINKS_PER_REQUEST:]]


def request_headers(messages: MessageSpans, arrival: Arrival[SourceRecord],
                    key: str, message_ids: Sequence[str]) -> list[tuple[str, bytes]]:
    """A model request's trace headers: its asker's ingest span as parent, and links to the messages it covers."""
    if arrival.trace is None:
        return []
    return [*inject(arrival.trace), *link_header(messages.covering(key, message_ids))]


def _sampled_out(parent: Context) -> bool:
    """The record's headers name an upstream span that was not sampled."""
    span = get_current_span(parent).get_span_context()
    return span.is_valid and not span.trace_flags.sampled
