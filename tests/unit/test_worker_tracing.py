"""The memory agent's and the model workers' spans, without a broker: the worker's batch driver (``MemoryProcessor``)
on the in-memory store, records carrying an agent's W3C trace headers, the SDK's in-memory exporter holding the
spans. The whole path with a real broker, worker process and Jaeger is tests/integration/test_tracing.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.context import get_current
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from pydantic import SecretStr

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import RequestObservation
from om_stream.core.config import OMConfig
from om_stream.core.inputs import ModelResultArrived, TimerFired
from om_stream.core.tokens import TokenAccountant
from om_stream.observability.metrics import Metrics
from om_stream.observability.tracing import Tracing
from om_stream.runtime.cycle_traces import CycleTraces
from om_stream.runtime.effects import Effects
from om_stream.runtime.ingest_spans import LINKS_PER_REQUEST
from om_stream.runtime.internal_codec import decode_internal, encode_internal
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.runtime.worker.timer_inputs import TimerInputs
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
        self.metrics, self.timers = Metrics.create(), TimerWheel()
        self.processor = MemoryProcessor(
            kafka=KAFKA, config=self.config, accountant=TokenAccountant(words, message_overhead=1,
                                                                       conversation_overhead=0),
            effects=Effects(InMemoryContentStore(), self.config, count_text=words), publisher=self.producer,
            table=self.table, clock=self, metrics=self.metrics, timers=self.timers, tracing=tracing)

    def now_ms(self) -> int:
        return int(START.timestamp() * 1000) + self.offset * 1000

    def home(self, key: str) -> int | None:
        """Every record this worker holds is on partition 0 (what the timer inputs ask of the table)."""
        return 0 if key in self.table.states else None

    def record(self, topic: str, key: str, value: bytes, headers: list[tuple[str, bytes]]) -> SourceRecord:
        self.offset += 1
        return SourceRecord(topic=topic, partition=0, offset=self.offset, key=key.encode(), value=value,
                            headers=headers, received_at=time.monotonic())

    async def send(self, topic: str, key: str, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        assert await self.processor.process([self.record(topic, key, value, headers)])

    def message(self, thread: str, index: int, headers: list[tuple[str, bytes]]) -> SourceRecord:
        message = MessageRecord.model_validate({
            "message_id": f"{thread}-m{index}", "thread_id": thread, "resource_id": "tenant-r1",
            "role": "user" if index % 2 == 0 else "assistant", "created_at": START + timedelta(minutes=index),
            "parts": [{"type": "text", "text": SECRET}]})
        return self.record(KAFKA.topic_messages, thread, encode(message),
                           [("content-type", b"application/json"), *headers])

    async def say(self, thread: str, index: int, headers: list[tuple[str, bytes]]) -> None:
        assert await self.processor.process([self.message(thread, index, headers)])


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
    for child in ("om.decide", "om.context publish"):
        (span,) = spans_named(exporter, child)
        assert parent_of(span) == span_id(ingest), child
    assert not spans_named(exporter, "om.decode")  # the decode is an attribute of the ingest: a span cost more
    assert 0 <= (ingest.attributes or {})["om.decode.duration_ms"] < 1000
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


# -- a thread's inputs folded into one context publication ------------------------------------------------------------


def agent_headers(tracing: Tracing, name: str) -> tuple[list[tuple[str, bytes]], int]:
    """An agent's trace headers, and the span id they name."""
    with tracing.tracer.start_as_current_span(name) as agent:
        return inject(), agent.get_span_context().span_id


def ingest_under(exporter: InMemorySpanExporter, agent: int) -> ReadableSpan:
    (ingest,) = [s for s in spans_named(exporter, "om.ingest") if parent_of(s) == agent]
    return ingest


def messages_observed(worker: Worker) -> float:
    return worker.metrics.registry.get_sample_value("om_message_to_context_seconds_count") or 0.0


async def test_a_context_for_two_inputs_of_a_thread_links_to_the_earlier_ones_ingest(
        exporter: InMemorySpanExporter) -> None:
    """Two messages of one thread in one batch publish one context: a child of the newest message's ingest, its
    publish span linked to the earlier message's ingest, so that the earlier trace leads to its context too; and
    the latency of each message is observed (the metric is per message)."""
    tracing = tracing_of(exporter)
    worker = Worker({"observation": {"messageTokens": 10_000}}, tracing)
    first_headers, first_agent = agent_headers(tracing, "agent turn 0")
    second_headers, second_agent = agent_headers(tracing, "agent turn 1")
    assert await worker.processor.process([worker.message("t1", 0, first_headers),
                                           worker.message("t1", 1, second_headers)])

    (context,) = worker.producer.to(KAFKA.topic_context)
    (publish,) = spans_named(exporter, "om.context publish")
    first, second = ingest_under(exporter, first_agent), ingest_under(exporter, second_agent)
    assert parent_of(publish) == span_id(second)
    assert carried(context.headers).span_id == span_id(publish)
    assert [link.context.span_id for link in publish.links] == [span_id(first)]
    assert first.context is not None and publish.links[0].context.trace_id == first.context.trace_id
    assert messages_observed(worker) == 2


async def test_a_sampled_out_input_adds_no_link_to_its_threads_context(exporter: InMemorySpanExporter) -> None:
    tracing = tracing_of(exporter)
    worker = Worker({"observation": {"messageTokens": 10_000}}, tracing)
    sampled_out = [("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")]
    headers, agent = agent_headers(tracing, "agent turn 1")
    assert await worker.processor.process([worker.message("t1", 0, sampled_out),
                                           worker.message("t1", 1, headers)])

    (publish,) = spans_named(exporter, "om.context publish")
    assert parent_of(publish) == span_id(ingest_under(exporter, agent))
    assert len(spans_named(exporter, "om.ingest")) == 1  # the sampled-out message's ingest was not recorded
    assert publish.links == ()
    assert messages_observed(worker) == 2  # its latency counts all the same


async def test_a_context_links_to_at_most_the_newest_inputs_it_stands_for(exporter: InMemorySpanExporter) -> None:
    tracing = tracing_of(exporter)
    worker = Worker({"observation": {"messageTokens": 1_000_000}}, tracing)
    count = LINKS_PER_REQUEST + 3
    records, agents = [], []
    for index in range(count):
        headers, agent = agent_headers(tracing, f"agent turn {index}")
        records.append(worker.message("t1", index, headers))
        agents.append(agent)
    assert await worker.processor.process(records)

    (publish,) = spans_named(exporter, "om.context publish")
    newest_folded = agents[-LINKS_PER_REQUEST - 1:-1]
    assert [link.context.span_id for link in publish.links] == [
        span_id(ingest_under(exporter, agent)) for agent in newest_folded]


# -- timers -------------------------------------------------------------------------------------------------------


def timer_inputs(worker: Worker, tracing: Tracing) -> TimerInputs:
    return TimerInputs(worker.producer, KAFKA.topic_model_results, table=worker, timers=worker.timers,
                       clock=worker, tracing=tracing)


async def test_a_timer_firing_is_a_trace_of_its_own_that_its_ingest_continues(exporter: InMemorySpanExporter) -> None:
    tracing = tracing_of(exporter, TracingSettings(ids="hashed", id_key=SecretStr("k")))
    worker = Worker({"observation": {"messageTokens": 10_000, "activateAfterIdle": "5m"}}, tracing)
    await worker.say("t1", 1, [])  # an assistant's turn: the idle timer starts
    (due,) = worker.table.states["t1"].timers.values()
    worker.offset += (due - worker.now_ms()) // 1000 + 7  # the wheel is next asked 7 s after the timer was due
    with tracing.tracer.start_as_current_span("whatever the timer task holds"):
        await timer_inputs(worker, tracing).send_due()

    (fired,) = worker.producer.to(KAFKA.topic_model_results)
    (timer,) = spans_named(exporter, "om.timer")
    assert timer.parent is None and not timer.links  # a root: the task's current span is not its cause
    assert carried(fired.headers).span_id == span_id(timer)
    attributes = timer.attributes or {}
    assert attributes["om.timer.name"] == "idle:observation"
    assert attributes["om.timer.due_at"] == due
    assert attributes["om.timer.late_ms"] == 7_000
    assert attributes["om.thread.hash"] == tracing.digest("t1")
    assert "t1" not in attribute_values(exporter).split()

    await worker.send(KAFKA.topic_model_results, "t1", fired.value or b"", fired.headers)
    ingest = spans_named(exporter, "om.ingest")[-1]
    assert (ingest.attributes or {})["om.input"] == "TimerFired"
    assert parent_of(ingest) == span_id(timer)


async def test_a_timer_resent_by_a_take_over_links_to_it(exporter: InMemorySpanExporter) -> None:
    tracing = tracing_of(exporter)
    worker = Worker({"observation": {"messageTokens": 10_000}}, tracing)
    with tracing.tracer.start_as_current_span("om.rebalance recovery") as recovery:
        await timer_inputs(worker, tracing).send("t1", 0, TimerFired("resend:obs-1a2b3c4d-0-7"),
                                                 cause=get_current())
    (timer,) = spans_named(exporter, "om.timer")
    assert timer.parent is None
    assert [link.context.span_id for link in timer.links] == [recovery.get_span_context().span_id]
    assert (timer.attributes or {})["om.timer.name"] == "resend:obs"  # a cycle id carries its record's hash
    assert "om.timer.due_at" not in (timer.attributes or {})  # a resend was never scheduled


async def test_untraced_timers_carry_no_headers_and_make_no_span(exporter: InMemorySpanExporter) -> None:
    traced_off = Tracing(tracer=tracing_of(exporter).tracer, enabled=False)
    worker = Worker({"observation": {"messageTokens": 10_000, "activateAfterIdle": "5m"}}, Tracing.off())
    await worker.say("t1", 1, [])
    worker.offset += 3600
    await timer_inputs(worker, traced_off).send_due()
    (fired,) = worker.producer.to(KAFKA.topic_model_results)
    assert fired.headers == [] and exporter.get_finished_spans() == ()


async def test_a_message_sampled_out_by_its_agent_makes_no_span_and_its_context_carries_that_on(
        exporter: InMemorySpanExporter) -> None:
    """A parent-based sampler (the SDK's default) follows the agent's decision: the worker makes no span for the
    record at all, and the context and model requests carry the agent's trace on, sampled out."""
    provider = TracerProvider(sampler=ParentBased(ALWAYS_ON))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(tracer=provider.get_tracer("om_stream"), enabled=True, provider=provider,
                      follows_parent=True).with_rules(TracingSettings())
    worker = Worker({"observation": {"messageTokens": 30, "bufferTokens": False}}, tracing)
    agent = SpanContext(trace_id=0xA1, span_id=0xB2, is_remote=False, trace_flags=TraceFlags(0))
    for index in range(4):  # the fourth message asks for a synchronous observation
        await worker.say("t1", index, inject(set_span_in_context(NonRecordingSpan(agent))))
    assert exporter.get_finished_spans() == ()
    contexts = worker.producer.to(KAFKA.topic_context)
    (request,) = worker.producer.to(KAFKA.topic_model_requests)
    for record in [*contexts, request]:
        carried_on = carried(record.headers)
        assert (carried_on.trace_id, carried_on.trace_flags.sampled) == (0xA1, False)

    # a message its agent sampled is traced as before, the span a child of the agent's
    sampled = SpanContext(trace_id=0xC3, span_id=0xD4, is_remote=False, trace_flags=TraceFlags(1))
    await worker.say("t1", 4, inject(set_span_in_context(NonRecordingSpan(sampled))))
    (ingest,) = spans_named(exporter, "om.ingest")
    assert parent_of(ingest) == 0xD4
