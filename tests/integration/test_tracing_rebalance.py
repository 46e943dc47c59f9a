"""The trace tree across a rebalance: a second worker joins a group in the middle of the conversations.

Eight threads (two on each of the four partitions, so that both workers own threads after the join) talk to a group
of one traced worker; a second traced worker joins while every thread publishes; the conversations go on until the
group has settled. Every message is published under the agent's span ``agent turn`` and its context read in the
agent's consumer span, as in ``test_tracing.py``; the workers (Cassandra store, every trace sampled) export to a
real Jaeger, each under a service name of its own. Then, read back from Jaeger:

* every message's trace is whole: its ingest a child of its agent span, a context publish under it, and the agent's
  consumer span a child of a context publish of that same trace (a context published under another message's
  trace, or a handling that started a trace of its own, would split it);
* no message is handled outside its agent's trace: every ``om.ingest`` of a message on either worker since the
  start has its agent span as its parent;
* the rebalance's own spans exist on the worker that ran them: ``om.rebalance revoke`` on the first worker after the
  join (it gave partitions up), ``om.rebalance recovery`` on the joining one (it took them over);
* both workers handled messages after the join.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer, format_span_id, format_trace_id

from om_stream.client import ClientTopics, OMClient
from om_stream.wire.messages import MessageRecord
from tests.support.cluster import WorkerGroup
from tests.support.jaeger_traces import Trace, answered, find_traces, wait_trace
from tests.support.services import JaegerAddresses
from tests.support.worker import message_record

pytestmark = pytest.mark.integration

PARTITIONS = 4
THREADS_PER_PARTITION = 2
SECRET = "the archivist folded nine vermilion maps into the harbour bell"


@dataclass(frozen=True)
class Turn:
    message_id: str
    trace_id: str
    agent_span: str
    consumer_span: str
    after_join: bool




def spread_threads() -> list[str]:
    """Thread ids that put ``THREADS_PER_PARTITION`` threads on every partition (the client's partitioner)."""
    prefix, partitioner, every = uuid.uuid4().hex[:6], DefaultPartitioner(), list(range(PARTITIONS))
    by_partition: dict[int, list[str]] = {p: [] for p in every}
    index = 0
    while any(len(threads) < THREADS_PER_PARTITION for threads in by_partition.values()):
        thread = f"rb-{prefix}-{index}"
        index += 1
        chosen = by_partition[partitioner(thread.encode(), every, every)]
        if len(chosen) < THREADS_PER_PARTITION:
            chosen.append(thread)
    return [thread for threads in by_partition.values() for thread in threads]


async def test_traces_stay_whole_across_a_rebalance(
        kafka_bootstrap: str, cassandra_hosts: str, keyspace: str, jaeger: JaegerAddresses,
        agent_tracing: tuple[TracerProvider, Tracer], tmp_path: Path) -> None:
    provider, tracer = agent_tracing
    services = [f"om-worker-a-{uuid.uuid4().hex[:6]}", f"om-worker-b-{uuid.uuid4().hex[:6]}"]
    group = WorkerGroup(kafka_bootstrap, tmp_path, cassandra_hosts=cassandra_hosts, keyspace=keyspace,
                        partitions=PARTITIONS, options={"observation": {"messageTokens": 100_000}}, extra={
                            "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp, "OTEL_BSP_SCHEDULE_DELAY": "100",
                            "OTEL_TRACES_SAMPLER": "always_on"})
    t = group.topics
    topics = ClientTopics(messages=t["messages"], commands=t["commands"], events=t["events"], context=t["context"],
                          recall_requests=t["recall_requests"], recall_responses=t["recall_responses"])
    threads = spread_threads()
    turns: list[Turn] = []
    started_us = time.time_ns() // 1000
    joined = asyncio.Event()
    try:
        group.add(extra={"OTEL_SERVICE_NAME": services[0]})
        await group.wait_ready(timeout=240)
        async with OMClient(kafka_bootstrap, topics=topics) as client:

            async def talk(thread: str, index: int) -> None:
                after = joined.is_set()
                record = MessageRecord.model_validate(message_record(
                    thread, index, "user" if index % 2 == 0 else "assistant", f"{index}: {SECRET}"))
                with tracer.start_as_current_span("agent turn") as span:
                    await client.publish(record)
                await client.await_context(thread, record.message_id, timeout=180)
                with tracer.start_as_current_span("agent reads context",
                                                  context=client.context_trace(thread)) as consumer:
                    pass
                turns.append(Turn(record.message_id, format_trace_id(span.get_span_context().trace_id),
                                  format_span_id(span.get_span_context().span_id),
                                  format_span_id(consumer.get_span_context().span_id), after))

            async def conversation(thread: str, first: int, count: int) -> None:
                for index in range(first, first + count):
                    await talk(thread, index)

            await asyncio.gather(*(conversation(thread, 0, 2) for thread in threads))
            # the second worker joins while every thread goes on talking
            join_us = time.time_ns() // 1000
            group.add(extra={"OTEL_SERVICE_NAME": services[1]})
            joined.set()
            talking = asyncio.gather(*(conversation(thread, 2, 4) for thread in threads))
            await group.settle(quiet_s=3, timeout=240)
            await talking
            await asyncio.gather(*(conversation(thread, 6, 2) for thread in threads))
        provider.force_flush()

        def whole(trace: Trace) -> bool:
            return bool(trace.named("agent reads context")) and answered(trace)

        traces = [await wait_trace(jaeger.query, turn.trace_id, whole, timeout=60) for turn in turns]
        # a rebalance's spans end before the messages of the last round are handled, and a worker exports its spans
        # in the order they end: the last round's traces being whole, the searches below see every rebalance span
        revokes = find_traces(jaeger.query, services[0], "om.rebalance revoke", since_us=join_us)
        recoveries = find_traces(jaeger.query, services[1], "om.rebalance recovery", since_us=started_us)
        ingests = {service: find_traces(jaeger.query, service, "om.ingest", since_us=started_us, limit=2000)
                   for service in services}
    finally:
        group.stop_all()

    assert len(turns) == len(threads) * 8
    handled_after_join: set[str] = set()
    for turn, trace in zip(turns, traces, strict=True):
        tree = trace.tree()
        agent_span = trace.by_id(turn.agent_span)
        assert agent_span is not None, (turn, tree)
        message_ingests = [s for s in trace.children(agent_span, "om.ingest")
                           if s.tags.get("om.input") == "MessageAppended"]
        assert message_ingests, (turn, tree)
        publishes = [p for i in message_ingests for p in trace.children(i, "om.context publish")]
        assert publishes, (turn, tree)
        consumer = trace.by_id(turn.consumer_span)
        assert consumer is not None, f"{turn.message_id}: the context it read came under another trace\n{tree}"
        parent = trace.by_id(consumer.parent or "")
        assert parent is not None, (turn, tree)
        assert parent.name == "om.context publish", (turn, tree)
        assert "vermilion" not in " ".join(trace.values()), tree
        if turn.after_join:
            handled_after_join |= {s.service for s in message_ingests}

    # no handling of a message outside its agent's trace, on either worker
    agent_spans = {turn.agent_span for turn in turns}
    for service, found in ingests.items():
        orphans = [s for trace in found for s in trace.named("om.ingest")
                   if s.service == service and s.tags.get("om.input") == "MessageAppended"
                   and s.parent not in agent_spans]
        assert not orphans, (service, [s.tags for s in orphans])
    assert handled_after_join == set(services), handled_after_join

    revoke_spans = [s for trace in revokes for s in trace.named("om.rebalance revoke")
                    if s.service == services[0] and s.start_us >= join_us]
    assert revoke_spans, "no om.rebalance revoke on the first worker after the join"
    recovery_spans = [s for trace in recoveries for s in trace.named("om.rebalance recovery")
                      if s.service == services[1]]
    assert recovery_spans, "no om.rebalance recovery on the joining worker"
    assert all(s.tags["om.records.held"] >= 0 for s in recovery_spans)
