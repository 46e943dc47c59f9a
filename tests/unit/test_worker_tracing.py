"""The memory agent's and the model workers' spans, without a broker: the worker's batch driver (``MemoryProcessor``)
on the in-memory store, records carrying an agent's W3C trace headers, the SDK's in-memory exporter holding the
spans. The whole path with a real broker, worker process and Jaeger is tests/integration/test_tracing.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanContext
from pydantic import SecretStr

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import RequestObservation
from om_stream.core.config import OMConfig
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.tokens import TokenAccountant
from om_stream.observability.metrics import Metrics
from om_stream.observability.tracing import Tracing
from om_stream.runtime.cycle_traces import CycleTraces
from om_stream.runtime.effects import Effects
from om_stream.runtime.internal_codec import decode_internal, encode_internal
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.runtime.worker.trace_links import links_of
from om_stream.settings import KafkaSettings, TracingSettings
from om_stream.trace_headers import extract, inject, span_context_of
from om_stream.wire.codec import encode
from om_stream.wire.messages import MessageRecord
from tests.support.processor_doubles import Producer, Table, words
from tests.support.spans import attribute_values, parent_of, provider_into, span_id, spans_named

KAFKA = KafkaSettings()
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SECRET = "the quartermaster hid zanzibar lanterns beneath the observatory"


def tracing_of(exporter: InMemorySpanExporter, settings: TracingSettings | None = None) -> Tracing:
    provider = provider_into(exporter)
    return Tracing(tracer=provider.get_tracer("om_stream"), enabled=True,
                   provider=provider).with_rules(settings or TracingSettings())


class Worker:
    def __init__(self, options: dict[str, Any], tracing: Tracing) -> None:
        self.config = OMConfig.parse(options).resolve()
        self.table, self.producer, self.offset = Table(), Producer(), 0
        self.tracing = tracing
        self.processor = MemoryProcessor(
            kafka=KAFKA, config=self.config, accountant=TokenAccountant(words, message_overhead=1,
                                                                       conversation_overhead=0),
            effects=Effects(InMemoryContentStore(), self.config, count_text=words), publisher=self.producer,
            table=self.table, clock=self, metrics=Metrics.create(), timers=TimerWheel(), tracing=tracing)

    def now_ms(self) -> int:
        return int(START.timestamp() * 1000) + self.offset * 1000

    async def send(self, topic: str, key: str, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        self.offset += 1
        record = SourceRecord(topic=topic, partition=0, offset=self.offset, key=key.encode(), value=value,
                              headers=headers)
        assert await self.processor.process([record])

    async def say(self, thread: str, index: int, headers: list[tuple[str, bytes]]) -> None:
        message = MessageRecord.model_validate({
            "message_id": f"{thread}-m{index}", "thread_id": thread, "resource_id": "tenant-r1",
            "role": "user" if index % 2 == 0 else "assistant", "created_at": START + timedelta(minutes=index),
            "parts": [{"type": "text", "text": SECRET}]})
        await self.send(KAFKA.topic_messages, thread, encode(message),
                        [("content-type", b"application/json"), *headers])


def carried(headers: list[tuple[str, bytes]]) -> SpanContext:
    """The span a record's trace headers name (the record must carry one)."""
    found = span_context_of(headers)
    assert found is not None, headers
    return found


async def test_a_message_is_handled_in_its_agents_trace_and_its_context_carries_it_on(
        exporter: InMemorySpanExporter) -> None:
    tracing = tracing_of(exporter)
    worker = Worker({"observation": {"messageTokens": 10_000}}, tracing)
    with tracing.tracer.start_as_current_span("agent turn") as agent:
        headers = inject()
    await worker.say("t1", 0, headers)

    (ingest,) = spans_named(exporter, "om.ingest")
    assert ingest.context is not None and agent.get_span_context().trace_id == ingest.context.trace_id
    assert parent_of(ingest) == agent.get_span_context().span_id
    assert (ingest.attributes or {})["om.input"] == "MessageAppended"
    for child in ("om.decode", "om.decide", "om.context publish"):
        (span,) = spans_named(exporter, child)
        assert parent_of(span) == span_id(ingest), child
    writes = spans_named(exporter, "om.store write")  # the input's writes, and its message row (with the batch's)
    assert writes and all(parent_of(w) == span_id(ingest) for w in writes)
    assert any("PersistMessage" in (w.attributes or {})["om.store.commands"] for w in writes)
    (decide,) = spans_named(exporter, "om.decide")
    assert "PersistMessage" in (decide.attributes or {})["om.commands"]
    (publish,) = spans_named(exporter, "om.context publish")
    (context,) = worker.producer.to(KAFKA.topic_context)
    assert carried(context.headers).span_id == span_id(publish)  # the agent's consumer continues here
    # no content, no ids (the defaults)
    values = attribute_values(exporter)
    assert "zanzibar" not in values and "t1" not in values.split() and "tenant-r1" not in values


async def test_a_record_without_trace_headers_starts_its_own_trace(exporter: InMemorySpanExporter) -> None:
    worker = Worker({"observation": {"messageTokens": 10_000}}, tracing_of(exporter))
    await worker.say("t1", 0, [])
    (ingest,) = spans_named(exporter, "om.ingest")
    assert ingest.parent is None


async def test_an_observation_links_to_the_messages_it_covers_and_its_result_continues_the_trace(
        exporter: InMemorySpanExporter) -> None:
    tracing = tracing_of(exporter, TracingSettings(ids="hashed", id_key=SecretStr("k")))
    worker = Worker({"observation": {"messageTokens": 30, "bufferTokens": False}}, tracing)
    agents = []
    for index in range(4):  # 10 words a message: the fourth crosses the threshold (synchronous observation)
        with tracing.tracer.start_as_current_span(f"agent turn {index}") as agent:
            headers = inject()
        agents.append(agent)
        await worker.say("t1", index, headers)
        if worker.producer.to(KAFKA.topic_model_requests):
            break
    (request_record,) = worker.producer.to(KAFKA.topic_model_requests)
    request = decode_internal(request_record.value or b"")
    assert isinstance(request, RequestObservation) and request.kind == "sync"
    ingests = spans_named(exporter, "om.ingest")
    asker = ingests[-1]
    assert carried(request_record.headers).span_id == span_id(asker)

    # the model worker's side: the cycle in the asker's trace, linked to every covered message's ingest
    traces = CycleTraces(tracing)
    with traces.cycle(request, extract(request_record.headers), links_of(request_record.headers),
                      published_at=0.0) as cycle:
        result = ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation="observation",
                                    ok=True, observations="* 🔴 (09:00) User planned a trip.")
        cycle.ended(result)
        result_headers = cycle.headers()
    (wait,) = spans_named(exporter, "om.blocking wait")
    (observe,) = spans_named(exporter, "om.observe")
    assert parent_of(wait) == span_id(asker) and parent_of(observe) == span_id(wait)
    assert {link.context.span_id for link in observe.links} == {span_id(s) for s in ingests}
    attributes = observe.attributes or {}
    assert attributes["gen_ai.operation.name"] == "update_memory"
    assert attributes["gen_ai.memory.record.count"] == len(request.message_ids)
    assert "om.observations" not in attributes  # content is off

    # the result's ingest continues the cycle's trace, and so does the context it publishes
    await worker.send(KAFKA.topic_model_results, "t1", encode_internal(result), result_headers)
    result_ingest = spans_named(exporter, "om.ingest")[-1]
    assert (result_ingest.attributes or {})["om.input"] == "ModelResultArrived"
    assert parent_of(result_ingest) == span_id(observe)
    publish = spans_named(exporter, "om.context publish")[-1]
    assert parent_of(publish) == span_id(result_ingest)
    assert carried(worker.producer.to(KAFKA.topic_context)[-1].headers).span_id == span_id(publish)
    assert (asker.attributes or {})["om.thread.hash"] == tracing.digest("t1")
    assert "zanzibar" not in attribute_values(exporter)


async def test_untraced_workers_publish_no_trace_headers() -> None:
    worker = Worker({"observation": {"messageTokens": 10_000}}, Tracing.off())
    await worker.say("t1", 0, [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")])
    (context,) = worker.producer.to(KAFKA.topic_context)
    assert span_context_of(context.headers) is None


async def test_a_sampled_out_message_is_remembered_by_nothing_and_its_context_says_sampled_out(
        exporter: InMemorySpanExporter) -> None:
    """At a sampling ratio, most records are sampled out: no span of theirs reaches the backend, so no cycle may
    link to them, and their context carries the not-sampled flag on so that the agent's consumer follows suit."""
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(tracer=provider.get_tracer("om_stream"), enabled=True,
                      provider=provider).with_rules(TracingSettings())
    worker = Worker({"observation": {"messageTokens": 10_000}}, tracing)
    await worker.say("t1", 0, [])
    assert exporter.get_finished_spans() == ()
    assert worker.processor.message_spans.covering("t1", ["t1-m0"]) == []
    published = carried(worker.producer.to(KAFKA.topic_context)[-1].headers)
    assert published.is_valid and not published.trace_flags.sampled
