"""A worker's life in its group, on real Kafka: a restart with static membership, the drain of in-flight model calls
on SIGTERM, and the group's lag read from the brokers.

* static membership: two workers; one is stopped (SIGTERM) and started again within the session timeout. With
  ``OM_KAFKA_GROUP_INSTANCE_ID`` the other never rebalances and the group's assignment (read from the broker) is
  the same afterwards; without it the same restart rebalances the other worker (so the test can fail).
* drain: a model (a local OpenAI-compatible server reached through litellm) answers slowly or stalls. A call that
  answers within ``OM_WORKER_DRAIN_TIMEOUT_S`` is finished and its result applied by the next owner with no second
  model call; a call still stalled at the end is handed back: the process exits within drain + shutdown, and the
  next owner calls the model again at once (its lease was given back) and completes the cycle, with
  ``cycle_timeout_s`` far away.
* lag: messages published while no worker runs are the group's lag on exactly their partitions, as the brokers
  say; once a worker has handled them it is 0, and the worker's own ``/metrics`` says the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocol
from prometheus_client.parser import text_string_to_metric_families

from om_stream.runtime.worker.group_lag import GroupLagProbe
from om_stream.testing.fake_openai import FakeOpenAI, RecordedRequest, Reply, Response, Usage
from tests.support.worker import WorkerProcess, agent_for, listener_ports, message_record, worker_process

OBSERVED = "User said the lighthouse keeper moved to Friday"


@dataclass
class Member:
    """A worker process with its own data folder, API port and metrics/probes port."""

    process: WorkerProcess
    metrics_port: int

    async def ready(self, timeout: float = 240.0) -> None:  # a loaded 2-core machine: litellm imports slowly
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            popen = self.process.popen
            assert popen is not None
            if popen.poll() is not None:
                raise AssertionError(f"worker exited rc={popen.returncode}:\n{self.process.tail()}")
            if await _get(self.metrics_port, "/healthz") is not None:
                return
            await asyncio.sleep(0.3)
        raise AssertionError(f"worker not ready after {timeout}s:\n{self.process.tail()}")

    async def metric(self, name: str, **labels: str) -> float | None:
        text = await _get(self.metrics_port, "/metrics")
        assert text is not None, self.process.tail()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return None


def member_of(template: WorkerProcess, folder: Path, **extra: str) -> Member:
    folder.mkdir(parents=True, exist_ok=True)
    web_port, metrics_port = listener_ports()
    env = {**template.env, "OM_WORKER_DATA_DIR": str(folder), "OM_WORKER_WEB_PORT": str(web_port),
           "OM_WORKER_METRICS_PORT": str(metrics_port), **extra}
    return Member(WorkerProcess(template.bootstrap, env, folder / "worker.log", template.topics, web_port,
                                metrics_port), metrics_port)


async def _get(port: int, path: str) -> str | None:
    """The body of a 200 answer; None for anything else (not listening yet, 503)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    writer.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return body.decode() if b" 200 " in head.split(b"\r\n")[0] else None


async def settle(members: list[Member], quiet_s: float = 6.0, timeout: float = 120.0) -> None:
    """Every member answers ready for ``quiet_s`` in a row (the group has stopped rebalancing)."""
    deadline, since = time.monotonic() + timeout, time.monotonic()
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, "\n".join(m.process.tail() for m in members)
        answers = await asyncio.gather(*(_get(m.metrics_port, "/healthz") for m in members))
        if any(a is None for a in answers):
            since = time.monotonic()
        await asyncio.sleep(0.5)


async def assignment(bootstrap: str, group: str) -> dict[str, set[tuple[str, int]]]:
    """The group's assignment as the broker holds it: member id -> (topic, partition)s."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response, = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    _error, _group, state, _ptype, _protocol, members, *_ = response.groups[0]
    assert state == "Stable", state
    out: dict[str, set[tuple[str, int]]] = {}
    for member in members:
        decoded = ConsumerProtocol.ASSIGNMENT.decode(member[-1])
        out[member[0]] = {(topic, p) for topic, partitions in decoded.assignment for p in partitions}
    return out


# -- static membership -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
async def test_a_restart_within_the_session_timeout_rebalances_nobody_with_static_membership(
        kafka_bootstrap: str, tmp_path: Path, static: bool) -> None:
    template = worker_process(kafka_bootstrap, tmp_path, options={}, partitions=4,
                              extra={"OM_KAFKA_SESSION_TIMEOUT_S": "60"})
    group_id = template.env["OM_WORKER_APP_ID"]

    def instance(name: str) -> dict[str, str]:
        return {"OM_KAFKA_GROUP_INSTANCE_ID": f"{group_id}-{name}"} if static else {}

    stays = member_of(template, tmp_path / "stays", **instance("stays"))
    restarts = member_of(template, tmp_path / "restarts", **instance("restarts"))
    members = [stays, restarts]
    for member in members:
        member.process.start()
    try:
        await asyncio.gather(*(m.ready() for m in members))
        await settle(members)
        before = await assignment(kafka_bootstrap, group_id)
        rebalances = await stays.metric("om_rebalances_total")
        assert len(before) == 2 and rebalances is not None

        began = time.monotonic()
        restarts.process.stop()
        restarts.process.start()
        await restarts.ready()
        restarted_in = time.monotonic() - began
        assert restarted_in < 60, f"the restart took {restarted_in:.1f}s, longer than the session timeout"
        await settle(members)
        after = await assignment(kafka_bootstrap, group_id)
        seen = await stays.metric("om_rebalances_total")
    finally:
        for member in members:
            member.process.stop()

    logs = f"restart {restarted_in:.1f}s\n{stays.process.tail()}\n---\n{restarts.process.tail()}"
    if static:
        assert seen == rebalances, f"the worker that stayed rebalanced ({rebalances} -> {seen})\n{logs}"
        assert sorted(map(sorted, before.values())) == sorted(map(sorted, after.values())), logs
        kept = set(before) & set(after)
        assert len(kept) == 1, f"the member that stayed keeps its member id, the restarted one has a new one\n{logs}"
        stayed = kept.pop()
        assert before[stayed] == after[stayed], logs
    else:
        assert seen is not None and seen > rebalances, f"no rebalance without static membership\n{logs}"


# -- graceful drain ----------------------------------------------------------------------------------------------

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 120, "bufferTokens": False},
                           "reflection": {"observationTokens": 200_000}}
DRAIN_S, SHUTDOWN_S = 6.0, 10.0


def _observation(call: int) -> str:
    return f"<observations>\nDate: Mar 1, 2026\n* 🔴 (09:00) {OBSERVED} (call {call}).\n</observations>"


def _observer(request: RecordedRequest) -> Response:
    return Reply(_observation(request.index), usage=Usage(200, 40))


@asynccontextmanager
async def two_workers(kafka_bootstrap: str, tmp: Path, model: FakeOpenAI,
                      **extra: str) -> AsyncIterator[list[Member]]:
    """Two workers on one partition (one holds it, the other waits), one SQLite content store (``extra``: more
    settings)."""
    template = worker_process(kafka_bootstrap, tmp, options=OPTIONS, store="sqlite", partitions=1, extra={
        "OM_MEMORY_MODEL": "openai/gpt-4o-mini", "OM_MEMORY_API_BASE": model.base_url, "OM_MEMORY_API_KEY": "test",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OM_GATEWAY_TIMEOUT_S": "300", "OM_GATEWAY_DEADLINE_S": "600",
        "OM_WORKER_CYCLE_TIMEOUT_S": "600", "OM_WORKER_BLOCKING_TIMEOUT_S": "600",
        "OM_WORKER_DRAIN_TIMEOUT_S": str(DRAIN_S), "OM_WORKER_SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_S), **extra})
    members = [member_of(template, tmp / name) for name in ("a", "b")]
    for member in members:
        member.process.start()
    try:
        await asyncio.gather(*(m.ready() for m in members))
        await settle(members)
        yield members
    finally:
        for member in members:
            member.process.stop()


async def _owner(members: list[Member]) -> tuple[Member, Member]:
    counts = [await m.metric("om_messages_in_total") or 0.0 for m in members]
    assert sorted(c > 0 for c in counts) == [False, True], counts
    return (members[0], members[1]) if counts[0] > 0 else (members[1], members[0])


async def _readiness(port: int) -> str | None:
    """The status line and body of ``/readyz``; None once nothing listens."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    writer.write(b"GET /readyz HTTP/1.0\r\n\r\n")
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n")[0].decode()
    return f"{status_line} {body.decode()}"


async def _sigterm_and_wait(member: Member) -> tuple[int, float]:
    """SIGTERM, then the exit status and how long the stop took; while it drains, ``/readyz`` answers 503
    ``draining`` (the pod leaves the Service before it leaves the group)."""
    assert member.process.popen is not None
    began = time.monotonic()
    member.process.popen.terminate()
    waiting = asyncio.ensure_future(asyncio.to_thread(member.process.wait_exit, DRAIN_S + SHUTDOWN_S + 5))
    answers: list[str] = []
    while not waiting.done():
        answer = await _readiness(member.metrics_port)
        if answer is not None:
            answers.append(answer)
        await asyncio.sleep(0.2)
    status = await waiting
    stopped_in = time.monotonic() - began
    assert any(" 503 " in a and '"draining"' in a for a in answers), answers
    return status, stopped_in


@pytest.mark.parametrize("stall_s", [3.0, 600.0], ids=["answers-within-the-drain", "stalls-past-the-drain"])
async def test_sigterm_drains_in_flight_model_calls_and_hands_the_stalled_ones_back(
        kafka_bootstrap: str, tmp_path: Path, stall_s: float) -> None:
    with FakeOpenAI(default=_observer) as model:
        model.enqueue(Reply(_observation(0), usage=Usage(200, 40), delay=stall_s))  # the first call: slow
        async with two_workers(kafka_bootstrap, tmp_path, model) as members, agent_for(members[0].process) as agent:
            thread = f"drain-{uuid.uuid4().hex[:6]}"
            for index in range(6):
                record = message_record(thread, index, "user" if index % 2 == 0 else "assistant",
                                        f"turn {index}: the lighthouse keeper moved the meeting to Friday, and "
                                        f"the ferry timetable changes next week for the whole island")
                await agent.send(record, key=thread.encode())
            await agent.until(lambda _: len(model.requests) >= 1, timeout=60)
            called_at = model.requests[0].received_at
            owner, other = await _owner(members)

            status, stopped_in = await _sigterm_and_wait(owner)
            assert status == 0, owner.process.tail()
            await agent.until(lambda a: any(OBSERVED in c["observations"] for c in a.contexts.get(thread, [])),
                              timeout=120)
            completed_at = time.time() - called_at
            calls = [r.received_at - called_at for r in model.requests]

    report = (f"stall {stall_s}s: stopped in {stopped_in:.1f}s; model calls at {[round(c, 1) for c in calls]}s and "
              f"the observation in a context at {completed_at:.1f}s after the first call")
    print(report)
    logs = f"{report}\n{owner.process.tail()}\n--- next owner ---\n{other.process.tail()}"
    assert "drained in" in owner.process.tail(20_000), logs
    if stall_s < DRAIN_S:
        assert stopped_in < DRAIN_S, f"the call answered in {stall_s}s: the stop need not wait the drain\n{logs}"
        assert len(calls) == 1, f"the next owner used the stored result, no second call\n{logs}"
    else:
        assert DRAIN_S <= stopped_in < DRAIN_S + SHUTDOWN_S, logs
        assert "handed back" in owner.process.tail(20_000), logs
        assert len(calls) == 2, logs
        # the lease (10 s, renewed every 3.3 s) would have kept the next owner waiting at least 6.7 s past the end
        # of the drain; handed back, the next owner asks as soon as it holds the partition
        assert calls[1] < DRAIN_S + 6.0, logs


async def _until_records(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> None:
    """Until the one-partition ``topic`` holds ``count`` records."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        deadline = time.monotonic() + timeout
        while (held := (await consumer.end_offsets([partition]))[partition]) < count:
            assert time.monotonic() < deadline, f"{topic} holds {held} records, not {count}"
            await asyncio.sleep(0.2)
    finally:
        await consumer.stop()


async def _send_turns(agent: Any, thread: str) -> None:
    for index in range(6):
        record = message_record(thread, index, "user" if index % 2 == 0 else "assistant",
                                f"turn {index}: the lighthouse keeper moved the meeting to Friday, and the ferry "
                                f"timetable changes next week for the whole island")
        await agent.send(record, key=thread.encode())


async def test_a_request_waiting_for_a_slot_when_the_drain_begins_is_left_to_the_next_owner_without_holding_the_stop(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    """One slot for model calls: the first observation's call stalls, the second request waits in the topic behind
    it. The drain hands the stalled call back, and the freed slot lets the agent take the second request, which it
    may no longer run. Faust's stop waits for every request an agent took to be acknowledged: before the fix it waited
    on that one until the worker's deadline (drain + shutdown) ended the process, so a graceful leave took as long
    as the deadline allows and left as a crash does (the soak's "drain hang", ``wait_empty: Waiting for tasks``).
    Now the stop goes on at once, and the next owner runs both requests: the request was left uncommitted."""
    with FakeOpenAI(default=_observer) as model:
        model.enqueue(Reply(_observation(0), usage=Usage(200, 40), delay=600.0))  # the first call stalls
        async with two_workers(kafka_bootstrap, tmp_path, model, OM_WORKER_MODEL_CONCURRENCY="1") as members, \
                agent_for(members[0].process) as agent:
            first, second = (f"slot-{name}-{uuid.uuid4().hex[:6]}" for name in ("a", "b"))
            await _send_turns(agent, first)
            await agent.until(lambda _: len(model.requests) >= 1, timeout=60)
            owner, other = await _owner(members)
            await _send_turns(agent, second)
            # the second observation is asked for (its request is in the topic) and waits for the one slot
            await _until_records(kafka_bootstrap, owner.process.topics["model_requests"], 2)
            assert len(model.requests) == 1, "one slot: the second call waits for the first"

            status, stopped_in = await _sigterm_and_wait(owner)
            assert status == 0, owner.process.tail()
            for thread in (first, second):
                await agent.until(lambda a, t=thread: any(OBSERVED in c["observations"] for c in a.contexts.get(t, [])),
                                  timeout=120)

    logs = f"stopped in {stopped_in:.1f}s\n{owner.process.tail(20_000)}\n--- next owner ---\n{other.process.tail()}"
    assert "wait_empty" not in owner.process.tail(200_000), logs
    assert DRAIN_S <= stopped_in < DRAIN_S + 5.0, f"the stop waited for the request left to the next owner\n{logs}"
    assert len(model.requests) == 3, f"the stalled call, then both calls again by the next owner\n{logs}"


# -- every stop is bounded by drain + shutdown -------------------------------------------------------------------

# ``run_worker`` around a stand-in for Faust's worker, in a process of its own: the stop runs (Faust calls
# ``on_worker_shutdown`` first), then a non-daemon thread that never ends is left behind, as an executor's thread or
# a slow interpreter shutdown would be; "stuck": the stop itself never ends either
_BOUNDED_STOP = """
import logging, sys, threading, time, types
from om_stream.runtime.worker import main
from om_stream.settings import Settings

class FaustStandIn:
    def __init__(self, *args, **kwargs): ...
    def on_worker_shutdown(self): ...
    def execute_from_commandline(self):
        print("stopping at", time.monotonic(), flush=True)
        self.on_worker_shutdown()
        threading.Thread(target=threading.Event().wait, name="never-ends").start()
        if sys.argv[1] == "stuck":
            threading.Event().wait()
        raise SystemExit(0)

async def no_topics(_worker): ...

main.SignalledWorker = FaustStandIn  # Faust's worker, as run_worker subclasses it
main._prepare = no_topics
held = types.SimpleNamespace(deps=types.SimpleNamespace(metrics=None), app=None,
                             liveness=types.SimpleNamespace(on_fatal=lambda _callback: None))
logging.basicConfig(level="INFO", format="%(levelname)s %(message)s")
sys.exit(main.run_worker(Settings(), held))
"""


@pytest.mark.parametrize(("how", "status"), [("ends", 0), ("stuck", 1)])
def test_a_stop_ends_the_process_within_drain_plus_shutdown_whatever_is_left_running(
        tmp_path: Path, how: str, status: int) -> None:
    drain_s, shutdown_s = 1.0, 2.0
    web_port, metrics_port = listener_ports()  # checked free before the start: not the defaults, maybe in use
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OM_LOG_LEVEL": "info",
           "OM_WORKER_WEB_PORT": str(web_port), "OM_WORKER_METRICS_PORT": str(metrics_port),
           "OM_WORKER_DATA_DIR": str(tmp_path), "OM_WORKER_DRAIN_TIMEOUT_S": str(drain_s),
           "OM_WORKER_SHUTDOWN_TIMEOUT_S": str(shutdown_s)}
    # imports are slow on a loaded machine: the stop is timed from its start
    child = subprocess.run([sys.executable, "-c", _BOUNDED_STOP, how], env=env, capture_output=True, text=True,
                           check=False, timeout=240)
    ended = time.monotonic()
    output = child.stdout + child.stderr
    stopping = [line for line in child.stdout.splitlines() if line.startswith("stopping at ")]
    assert stopping, output
    stopped_in = ended - float(stopping[0].split()[-1])  # CLOCK_MONOTONIC: one clock for both processes
    assert child.returncode == status, f"{how}: exit status {child.returncode} after {stopped_in:.1f}s\n{output}"
    assert stopped_in < drain_s + shutdown_s + 1.5, f"{how}: stopped in {stopped_in:.1f}s\n{output}"
    assert "stopping (the worker stopped); at most 3s" in output, output
    if how == "ends":  # at once, not at the deadline
        assert stopped_in < drain_s + shutdown_s, f"stopped in {stopped_in:.1f}s\n{output}"
    else:
        assert "did not stop within 3s" in output, output


# -- the group's lag from the brokers ----------------------------------------------------------------------------

async def test_the_group_lag_read_from_the_brokers_counts_what_no_worker_has_handled(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    template = worker_process(kafka_bootstrap, tmp_path, options={}, partitions=3)
    worker = member_of(template, tmp_path / "w")
    group_id, messages = template.env["OM_WORKER_APP_ID"], template.topics["messages"]
    probe = GroupLagProbe(kafka_bootstrap, group_id, [messages, template.topics["commands"]], 3, client_options={})
    worker.process.start()
    try:
        await worker.ready()
        worker.process.stop()  # the group has committed offsets now (or none), and nobody reads
        baseline = await probe.measure()
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            sent = {0: 5, 2: 3}
            for partition, count in sent.items():
                for index in range(count):
                    record = message_record(f"lag-{partition}", index, "user", f"message {index}")
                    await producer.send_and_wait(messages, json.dumps(record).encode(),
                                                 key=f"lag-{partition}".encode(), partition=partition)
        finally:
            await producer.stop()
        behind = await probe.measure()
        for partition in range(3):
            assert behind[(messages, partition)] - baseline[(messages, partition)] == sent.get(partition, 0), behind
        assert all(lag == 0 for (topic, _), lag in behind.items() if topic != messages), behind

        worker.process.start()
        await worker.ready()
        deadline = time.monotonic() + 60
        while any((await probe.measure()).values()):
            assert time.monotonic() < deadline, f"{await probe.measure()}\n{worker.process.tail()}"
            await asyncio.sleep(0.5)
        # the worker's own reading, every 15 s
        while (await worker.metric("om_consumer_group_lag_records", topic=messages, partition="0")) != 0:
            assert time.monotonic() < deadline + 30, worker.process.tail()
            await asyncio.sleep(1)
    finally:
        worker.process.stop()
        await probe.close()
