"""One trace from a TypeScript or a Go agent through a real worker to the agent's consumer span, in a real Jaeger.

Each client runs a small agent (``test/jaeger`` with vitest; ``go test -tags e2e,jaeger -run JaegerAgent``) with
its own OpenTelemetry SDK exporting to Jaeger over OTLP/HTTP: it publishes a message under its span ``agent turn``,
waits for the message's context, and starts ``agent reads context`` from the context's trace accessors
(``traceContextOf`` / ``ContextRecord.TraceContext``). The worker (``om-stream worker``, tracing on, every trace
sampled) exports to the same Jaeger. The trace read back must be the whole chain, across three processes:

    agent turn (agent) -> om.ingest (worker) -> om.context publish (worker) -> agent reads context (agent)

with no word of the message's text, its thread id or its resource id in any attribute.

    .venv/bin/pytest clients/test_clients_tracing.py
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.jaeger_traces import Trace, TraceSpan, answered, wait_trace
from tests.support.services import JaegerAddresses
from tests.support.worker import WorkerProcess, running_worker

CLIENTS = Path(__file__).resolve().parent
AGENTS = {
    "ts": (["npx", "vitest", "run", "test/jaeger"], CLIENTS / "ts"),
    "go": (["go", "test", "-count=1", "-tags", "e2e,jaeger", "-run", "JaegerAgent", "-v", "."], CLIENTS / "go"),
}
SECRET = "the cartographer buried seventeen saffron compasses under the lighthouse"
RESOURCE = "tenant-private-31"


@pytest.fixture
async def traced_worker(kafka_bootstrap: str, jaeger: JaegerAddresses, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp, "OTEL_SERVICE_NAME": f"om-worker-{uuid.uuid4().hex[:6]}",
             "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER": "always_on"}
    async with running_worker(kafka_bootstrap, tmp_path, options={"observation": {"messageTokens": 100_000}},
                              store="sqlite", partitions=2, extra=extra) as worker:
        yield worker


def only(spans: list[TraceSpan], what: str) -> TraceSpan:
    assert len(spans) == 1, f"{what}: {len(spans)} spans"
    return spans[0]


@pytest.mark.parametrize("agent", sorted(AGENTS))
async def test_an_agent_trace_runs_through_the_worker_to_its_consumer_span(
        traced_worker: WorkerProcess, jaeger: JaegerAddresses, tmp_path: Path, agent: str) -> None:
    command, cwd = AGENTS[agent]
    report = tmp_path / f"{agent}-trace.json"
    service = f"agent-{agent}-{uuid.uuid4().hex[:6]}"
    env = {**traced_worker.env, "OM_OTLP_ENDPOINT": jaeger.otlp, "OM_AGENT_SERVICE": service,
           "OM_TRACE_REPORT": str(report), "OM_TRACE_RESOURCE": RESOURCE, "OM_TRACE_TEXT": SECRET}
    process = await asyncio.create_subprocess_exec(*command, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.STDOUT)
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=300)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    text = output.decode(errors="replace")
    assert process.returncode == 0, f"the {agent} agent failed:\n{text[-6000:]}\n--- worker ---\n{traced_worker.tail()}"
    written = json.loads(report.read_text())

    def complete(trace: Trace) -> bool:
        return bool(trace.named("agent reads context")) and answered(trace)

    trace = await wait_trace(jaeger.query, written["trace_id"], complete, timeout=60)
    tree = trace.tree()
    turn = only(trace.named("agent turn"), f"the agent's span\n{tree}")
    assert turn.service == service, tree
    assert turn.parent is None, tree
    ingest = only(trace.children(turn, "om.ingest"), f"the message's ingest\n{tree}")
    assert ingest.service == traced_worker.env["OTEL_SERVICE_NAME"], tree
    assert ingest.tags["om.input"] == "MessageAppended", tree
    publish = only(trace.children(ingest, "om.context publish"), f"the context publish\n{tree}")
    consumer = only(trace.named("agent reads context"), f"the agent's consumer span\n{tree}")
    assert consumer.service == service, tree
    assert consumer.span_id == written["consumer_span_id"], tree
    assert consumer.parent == publish.span_id, tree
    # privacy: the worker's spans name neither the text nor the conversation (OM_TRACING_IDS unset: no ids at all)
    values = " ".join(trace.values())
    for word in ("cartographer", "saffron", "lighthouse", written["thread"], written["message_id"], RESOURCE):
        assert word not in values, (word, tree)
    print(f"\n{tree}")
