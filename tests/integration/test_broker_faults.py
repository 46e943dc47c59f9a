"""Broker faults under a sustained stream: a single broker restarted, and one broker of a three-broker KRaft cluster
(replication 3, min.insync.replicas 2) killed and brought back. The workers ride it out without a restart (same
processes at the end), nothing is lost, duplicated or reset, the final contexts equal an uninterrupted run's, and a
broker that is gone does not flood the worker's log. The three-broker run publishes by reference (``om.context/v2``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from om_stream.devservices import kafka
from tests.support.cluster import Conversation, Outcome, WorkerGroup, new_keyspace, play_uninterrupted
from tests.support.worker import worker_process

pytestmark = pytest.mark.timeout(600)
THREADS, TURNS = 8, 30


@pytest.fixture(scope="module")
def reference(kafka_bootstrap: str, cassandra_hosts: str, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return asyncio.run(play_uninterrupted(kafka_bootstrap, cassandra_hosts, tmp_path_factory.mktemp("reference"),
                                          Conversation(THREADS, TURNS)))


async def play_through(group: WorkerGroup, fault: list[tuple[float, object]], wire: str = "v1") -> Outcome:
    """The conversation while ``fault`` actions run when the stream reaches their fraction, one after the other
    (its contexts read as ``wire`` carries them)."""
    total, queue = THREADS * TURNS, asyncio.Queue[object]()
    steps = list(fault)

    async def on_progress(sent: int) -> None:
        while steps and sent >= steps[0][0] * total:
            queue.put_nowait(steps.pop(0)[1])

    async def run_faults() -> None:
        while True:
            action = await queue.get()
            await asyncio.to_thread(action)  # type: ignore[arg-type]

    runner = asyncio.create_task(run_faults())
    try:
        return await Conversation(THREADS, TURNS, think_s=0.3).play(group.bootstrap, group.topics, wire=wire,
                                                                    on_progress=on_progress)
    finally:
        runner.cancel()


def running(group: WorkerGroup) -> list[int]:
    return [m.popen.pid for m in group.running() if m.popen is not None]


def judge(group: WorkerGroup, outcome: Outcome, reference: Outcome, pids: list[int], after: list[int]) -> None:
    logs = group.logs()
    assert after == pids, f"the workers recovered without a restart\n{logs}"
    assert not outcome.unserved, f"never served: {outcome.unserved}\n{logs}"
    assert not outcome.version_regressions(), logs
    assert outcome.lost_and_duplicated(TURNS) == (0, 0), f"{outcome.miscounted(TURNS)}\n{logs}"
    assert outcome.final == reference.final, logs


async def test_a_broker_restarted_mid_stream_costs_nothing(own_broker: kafka.KafkaNode, cassandra_hosts: str,
                                                           tmp_path: Path, reference: Outcome) -> None:
    group = WorkerGroup(own_broker.bootstrap, tmp_path / "workers", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts))
    worker = group.add()
    await group.wait_ready()
    pids = running(group)

    def stop_then_restart() -> None:
        own_broker.stop()
        time.sleep(8)  # the broker stays away long enough for every client to notice and retry
        own_broker.restart()
        kafka.wait_ready(own_broker)

    try:
        outcome = await play_through(group, [(0.35, stop_then_restart)])
        await group.wait_ready()
        after = running(group)
    finally:
        group.stop_all()
    judge(group, outcome, reference, pids, after)
    lines = worker.log.read_text(errors="replace").splitlines()
    assert len(lines) < 3000, "a broker away for 8 s must not flood the log"


async def test_a_broker_of_three_killed_and_brought_back_costs_nothing(own_cluster: kafka.KafkaCluster,
                                                                       cassandra_hosts: str, tmp_path: Path,
                                                                       reference: Outcome) -> None:
    # by reference (om.context/v2): the contexts assembled from its three topics must end like the v1 reference's
    group = WorkerGroup(own_cluster.bootstrap, tmp_path / "workers", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts),
                        extra={"OM_KAFKA_REPLICATION": "3", "OM_CONTEXT_WIRE": "v2"})
    members = [group.add(), group.add()]
    await group.wait_ready()
    pids = running(group)
    victim = own_cluster.node(2)
    try:
        outcome = await play_through(group, [(0.35, victim.kill), (0.7, lambda: (victim.restart(),
                                                                                  kafka.wait_ready(victim)))],
                                     wire="v2")
        after = running(group)
    finally:
        group.stop_all()
    judge(group, outcome, reference, pids, after)
    assert len(members) == 2


async def test_a_worker_whose_broker_is_gone_logs_little_and_still_stops_in_bounded_time(
        own_broker: kafka.KafkaNode, tmp_path: Path) -> None:
    worker = worker_process(own_broker.bootstrap, tmp_path, options={}, extra={"OM_WORKER_SHUTDOWN_TIMEOUT_S": "10",
                                                                                  "OM_WORKER_DRAIN_TIMEOUT_S": "2"})
    worker.start()
    await worker.wait_ready()
    before = len(worker.log.read_text(errors="replace").splitlines())
    own_broker.kill()
    await asyncio.sleep(30)
    during = len(worker.log.read_text(errors="replace").splitlines()) - before
    began = time.monotonic()
    assert worker.popen is not None
    worker.popen.terminate()
    await asyncio.to_thread(worker.wait_exit, 60)
    assert time.monotonic() - began < 20, f"SIGTERM ends the process in bounded time\n{worker.tail()}"
    assert during < 300, f"{during} log lines in 30 s without a broker:\n{worker.tail()}"
