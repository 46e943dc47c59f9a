"""One trace from the agent's span to the agent reading its context, through a real worker, in a real Jaeger.

The agent (this test) publishes through the Python client under a span of its own, exported to Jaeger by the
OpenTelemetry SDK; a worker process (``om-stream worker``, its Observer a litellm call to the local
OpenAI-compatible server, its content store Cassandra) exports its spans to the same Jaeger
(``OTEL_EXPORTER_OTLP_ENDPOINT``). The messages cross the Observer's threshold with synchronous observation, so the
last one's context waits for the Observer: the blocking case. The trace is read back from Jaeger's API and must be
the whole tree:

    agent turn → om.ingest → om.blocking wait → om.observe (linked to the covered messages' ingests) → chat <model>
               → om.ingest of the result → om.context publish → the agent's consumer span

with the GenAI attributes on the model call, and no message text, thread id or resource id anywhere in it (the ids
only as their keyed digests, ``OM_TRACING_IDS=hashed``); the model call's duration histogram names the trace as
its exemplar. Then a message's path across a worker SIGKILL: the message
read again shows both handlings in its trace.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer, format_trace_id

from om_stream.client import ClientTopics, OMClient
from om_stream.testing.fake_openai import FakeOpenAI, RecordedRequest, Reply, Response, Usage
from om_stream.wire.messages import MessageRecord
from tests.support.jaeger_traces import Trace, TraceSpan, answered, wait_trace
from tests.support.services import JaegerAddresses
from tests.support.worker import WorkerProcess, http_exchange, message_record, worker_process

pytestmark = pytest.mark.integration

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 200, "bufferTokens": False},
                           "reflection": {"observationTokens": 200_000}}
# every message carries the same private sentence: none of its words may reach a span
SECRET = "the quartermaster hid zanzibar lanterns beneath the ninth observatory on thursday"
RESOURCE = "tenant-private-7"
ID_KEY = "trace-id-key"
MODEL = "openai/gpt-4o-mini"


def observer(request: RecordedRequest) -> Response:
    return Reply("<observations>\nDate: Mar 1, 2026\n* 🔴 (09:00) User planned a trip.\n</observations>",
                 usage=Usage(210, 37))




def traced_worker(kafka_bootstrap: str, jaeger: JaegerAddresses, tmp: Path, server: FakeOpenAI,
                  cassandra: tuple[str, str]) -> WorkerProcess:
    hosts, keyspace = cassandra
    return worker_process(kafka_bootstrap, tmp, options=OPTIONS, partitions=2, store="cassandra", extra={
        "OM_CASSANDRA_HOSTS": hosts, "OM_CASSANDRA_KEYSPACE": keyspace, "OM_MEMORY_MODEL": MODEL,
        "OM_MEMORY_API_BASE": server.base_url, "OM_MEMORY_API_KEY": "test",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp, "OTEL_SERVICE_NAME": f"om-worker-{uuid.uuid4().hex[:6]}",
        "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "parentbased_always_on",
        "OM_TRACING_IDS": "hashed", "OM_TRACING_ID_KEY": ID_KEY})


def topics(worker: WorkerProcess) -> ClientTopics:
    t = worker.topics
    return ClientTopics(messages=t["messages"], commands=t["commands"], events=t["events"], context=t["context"],
                        recall_requests=t["recall_requests"], recall_responses=t["recall_responses"])


def only(spans: list[TraceSpan], what: str) -> TraceSpan:
    assert len(spans) == 1, f"{what}: {len(spans)} spans"
    return spans[0]


def digest(value: str) -> str:
    return hmac.new(ID_KEY.encode(), value.encode(), hashlib.sha256).hexdigest()[:32]


async def test_a_blocking_observation_is_one_trace_from_the_agent_to_its_consumer(
        kafka_bootstrap: str, cassandra_hosts: str, keyspace: str, jaeger: JaegerAddresses,
        agent_tracing: tuple[TracerProvider, Tracer], tmp_path: Path) -> None:
    provider, tracer = agent_tracing
    thread = f"trace-{uuid.uuid4().hex[:8]}"
    with FakeOpenAI(default=observer) as server:
        worker = traced_worker(kafka_bootstrap, jaeger, tmp_path, server, (cassandra_hosts, keyspace))
        worker.start()
        try:
            await worker.wait_ready(timeout=240)
            async with OMClient(kafka_bootstrap, topics=topics(worker)) as client:
                crossing = None
                for index in range(1, 40):
                    role = "user" if index % 2 else "assistant"
                    record = MessageRecord.model_validate(message_record(
                        thread, index, role, f"{index}: {SECRET}", resource=RESOURCE))
                    with tracer.start_as_current_span("agent turn") as turn:
                        await client.publish(record)
                    await client.await_context(thread, record.message_id, timeout=120)
                    # the agent's consumer span continues the trace of the context record it read
                    with tracer.start_as_current_span("agent reads context", context=client.context_trace(thread)):
                        pass
                    if any(r.path == "/v1/chat/completions" for r in server.requests):
                        crossing = format_trace_id(turn.get_span_context().trace_id)
                        break
                assert crossing is not None, f"the Observer was never called\n{worker.tail()}"
            provider.force_flush()

            def complete(trace: Trace) -> bool:
                return bool(trace.named("agent reads context")) and bool(trace.named(f"chat {MODEL}")) \
                    and answered(trace)

            trace = await wait_trace(jaeger.query, crossing, complete, timeout=60)
            # exemplars: the model call's duration links to this trace (OpenMetrics, as Prometheus scrapes)
            status, _, body = await http_exchange(worker.metrics_port, "GET", "/metrics", headers={
                "Accept": "application/openmetrics-text; version=1.0.0"})
            assert status == 200
            exposed = [line for line in body.decode().splitlines()
                       if line.startswith("gen_ai_client_operation_duration_seconds_bucket") and "# {" in line]
            assert any(f'trace_id="{crossing}"' in line for line in exposed), exposed
        finally:
            worker.stop()

    tree = trace.tree()
    turn_span = only(trace.named("agent turn"), "agent turn")
    ingest = only(trace.children(turn_span, "om.ingest"), f"the message's ingest\n{tree}")
    assert ingest.tags["om.input"] == "MessageAppended", tree
    assert "om.decode.duration_ms" in ingest.tags and trace.children(ingest, "om.decide"), tree
    writes = trace.children(ingest, "om.store write")
    assert writes, tree
    # on Cassandra each statement is a span of its own, named by its kind, with no value in it
    statements = [s for w in writes for s in trace.children(w)]
    assert statements and all(s.tags["db.system.name"] == "cassandra" for s in statements), tree
    assert {s.tags["db.operation.name"] for s in statements} <= {"INSERT", "UPDATE", "BATCH", "SELECT", "DELETE"}
    wait = only(trace.children(ingest, "om.blocking wait"), f"the blocking wait\n{tree}")
    observe = only(trace.children(wait, "om.observe"), f"the Observer cycle\n{tree}")
    assert observe.tags["gen_ai.operation.name"] == "update_memory", observe.tags
    assert observe.tags["om.cycle.kind"] == "sync", observe.tags
    # the cycle covers several messages, each handled in a trace of its own: it links to their ingest spans
    links = [ref for ref in observe.references if ref[2] != observe.parent]
    assert len(links) >= 2, (observe.references, tree)
    assert ingest.span_id in {ref[2] for ref in links}, tree
    call = only(trace.children(observe, f"chat {MODEL}"), f"the model call\n{tree}")
    assert call.tags["gen_ai.operation.name"] == "chat"
    assert call.tags["gen_ai.provider.name"] == "openai"
    assert call.tags["gen_ai.request.model"] == MODEL
    assert call.tags["gen_ai.response.model"], call.tags
    assert call.tags["gen_ai.usage.input_tokens"] == 210 and call.tags["gen_ai.usage.output_tokens"] == 37
    assert "stop" in str(call.tags["gen_ai.response.finish_reasons"]), call.tags
    assert "om.cost_usd" in call.tags, call.tags
    result = only([s for s in trace.children(observe, "om.ingest") if s.tags.get("om.input") == "ModelResultArrived"],
                  f"the result's ingest\n{tree}")
    publish = only(trace.children(result, "om.context publish"), f"the context publish\n{tree}")
    consumer = only(trace.named("agent reads context"), "the agent's consumer span")
    assert consumer.parent == publish.span_id, tree

    # privacy: no message text, no thread or resource id; the ids only as their keyed digests
    values = " ".join(trace.values())
    for word in ("quartermaster", "zanzibar", "observatory", thread, RESOURCE):
        assert word not in values, (word, tree)
    assert ingest.tags.get("om.thread.hash") == digest(thread), ingest.tags
    assert ingest.tags.get("om.resource.hash") == digest(RESOURCE), ingest.tags
    print(f"\n{tree}")  # the picture docs/operate.md shows (``pytest -s``)


async def test_a_message_read_again_after_a_sigkill_shows_both_handlings_in_its_trace(
        kafka_bootstrap: str, jaeger: JaegerAddresses, agent_tracing: tuple[TracerProvider, Tracer],
        tmp_path: Path) -> None:
    """The worker handles the message and publishes its context, then dies (SIGKILL) before it commits the
    message's offset (the commit interval is longer than the test); the worker started again reads the message
    again: the agent's trace holds both ingests, each a child of the agent's span, each with its context publish."""
    provider, tracer = agent_tracing
    thread = f"kill-{uuid.uuid4().hex[:8]}"
    worker = worker_process(kafka_bootstrap, tmp_path, options={"observation": {"messageTokens": 100_000}},
                            store="sqlite", partitions=2, extra={
                                "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp,
                                "OTEL_SERVICE_NAME": f"om-worker-{uuid.uuid4().hex[:6]}",
                                "OTEL_BSP_SCHEDULE_DELAY": "100", "OM_WORKER_COMMIT_INTERVAL_S": "600"})
    worker.start()
    try:
        await worker.wait_ready(timeout=240)
        async with OMClient(kafka_bootstrap, topics=topics(worker)) as client:
            trace_id = await traced_turn(client, tracer, thread)
            provider.force_flush()
            # the first handling's spans are exported before the kill (the worker's batch schedule is 100 ms)
            await wait_trace(jaeger.query, trace_id, answered, timeout=60)
            worker.kill()
            worker.start()
            await worker.wait_ready(timeout=240)

            def replayed(trace: Trace) -> bool:
                return len(trace.named("om.ingest")) >= 2 and len(trace.named("om.context publish")) >= 2

            trace = await wait_trace(jaeger.query, trace_id, replayed, timeout=120)
    finally:
        worker.stop()
    turn_span = only(trace.named("agent turn"), "agent turn")
    ingests = trace.children(turn_span, "om.ingest")
    assert len(ingests) == 2, trace.tree()
    assert {s.tags["messaging.kafka.offset"] for s in ingests} == {ingests[0].tags["messaging.kafka.offset"]}
    for ingest in ingests:
        assert trace.children(ingest, "om.context publish"), trace.tree()
    assert "zanzibar" not in " ".join(trace.values())


async def traced_turn(client: OMClient, tracer: Tracer, thread: str) -> str:
    """The agent's first message of ``thread`` published under its span ``agent turn``, its context awaited: the
    trace's id."""
    record = MessageRecord.model_validate(message_record(thread, 0, "user", SECRET, resource=RESOURCE))
    with tracer.start_as_current_span("agent turn") as turn:
        await client.publish(record)
    await client.await_context(thread, record.message_id, timeout=120)
    return format_trace_id(turn.get_span_context().trace_id)


async def test_a_worker_exports_its_spans_over_otlp_grpc(
        kafka_bootstrap: str, jaeger: JaegerAddresses, agent_tracing: tuple[TracerProvider, Tracer],
        tmp_path: Path) -> None:
    """``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``: the worker's spans reach Jaeger through its OTLP gRPC receiver (the
    worker is given only the gRPC port, so a span that arrives came that way), in the agent's trace."""
    assert jaeger.otlp_grpc, "OM_JAEGER_QUERY is set without OM_OTLP_GRPC_ENDPOINT (make services-up prints both)"
    provider, tracer = agent_tracing
    thread = f"grpc-{uuid.uuid4().hex[:8]}"
    service = f"om-worker-grpc-{uuid.uuid4().hex[:6]}"
    worker = worker_process(kafka_bootstrap, tmp_path, options={"observation": {"messageTokens": 100_000}},
                            store="sqlite", partitions=2, extra={
                                "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_grpc, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                                "OTEL_SERVICE_NAME": service, "OTEL_BSP_SCHEDULE_DELAY": "100",
                                "OTEL_TRACES_SAMPLER": "always_on"})
    worker.start()
    try:
        await worker.wait_ready(timeout=240)
        async with OMClient(kafka_bootstrap, topics=topics(worker)) as client:
            trace_id = await traced_turn(client, tracer, thread)
        provider.force_flush()
        trace = await wait_trace(jaeger.query, trace_id, answered, timeout=60)
    finally:
        worker.stop()
    ingest = only(trace.children(only(trace.named("agent turn"), "agent turn"), "om.ingest"), trace.tree())
    assert ingest.service == service, trace.tree()
    assert trace.children(ingest, "om.context publish"), trace.tree()
    assert "zanzibar" not in " ".join(trace.values())
