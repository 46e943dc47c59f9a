"""A worker on three Cassandra nodes (replication 3, LOCAL_QUORUM) while nodes die.

One node SIGKILLed mid-stream is a node a LOCAL_QUORUM client does without: the worker must not notice (no stall,
no outage reported, nothing at ERROR, /livez healthy throughout: a few seconds' wait for the contexts of the moment
at most), lose nothing, and carry on when the node returns.

Two nodes down is a quorum out of reach: every write fails. The worker must stall and say so (the log and
``om_store_unavailable`` name the store and why), keep ``/livez`` healthy within ``worker.store_outage_budget_s``
and fail it past the budget, dead-letter nothing, and, once the nodes are back, serve every message it held with
nothing lost: the final contexts equal those of an undisturbed run.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from om_stream.devservices import cassandra_cluster
from om_stream.devservices.cassandra_cluster import CassandraCluster
from tests.cluster.conftest import THREADS, TURNS, cluster_group, conversation
from tests.support.cassandra_cluster import (
    PhasedConversation,
    ProbeMonitor,
    dead_letters,
    error_lines,
)
from tests.support.cluster import Outcome

# a message waits at most this long for its context while one node is lost. The driver retries a request the dead
# node held on another coordinator at once, and the store's retries start at 0.1 s; but until the other nodes'
# failure detector counts the dead one out (~18 s), a coordinator may still ask it and wait for the answer that does
# not come (a replica read until speculative retry, a lightweight transaction until its timeout): measured, the
# longest wait from the kill on was 3.1 to 4.6 s (0.3 to 0.5 s before it). A stall waits longer: a request timeout
# (10 s), or until the node is back; and a model call once waited 18 s behind its lease's transactions, which the
# model workers now give 2 s each (model_calls.STORE_WAIT_S)
NO_STALL_S = 10.0
STALL_TIMEOUT_S = 5.0  # the worker's: a stall is noticed soon, so that the budget alone keeps /livez healthy
BUDGET_S = 45.0
# the agents' pause between turns while the quorum is lost: without one, an idle machine plays the phase's 16 turns
# in about a second, and a kill that came after the last of them left nothing to write without a quorum (CI of
# 4f9f08e, docs/ci.md); with it, the kill comes at the phase's second turn with 14 x THINK_S still to play
THINK_S = 0.3
# why the store fails, as the worker says it: a level (plain writes, or the lightweight transactions' serial level)
# out of reach, or replicas that did not answer in time (before the coordinator counts the dead nodes out)
QUORUM_OUT_OF_REACH = re.compile(r"LOCAL_(QUORUM|SERIAL) (cannot be reached, it needs 2 replicas and 1 is alive|"
                                 r"(write|read) timed out, 1 of 2 replicas answered)")


def _judge(outcome: Outcome, reference: Outcome, logs: str) -> None:
    assert not outcome.unserved, f"never served: {outcome.unserved[:10]}\n{logs}"
    assert not outcome.version_regressions(), f"{outcome.version_regressions()}\n{logs}"
    assert outcome.lost_and_duplicated(TURNS) == (0, 0), f"{outcome.miscounted(TURNS)}\n{logs}"
    for thread, final in reference.final.items():
        assert outcome.final[thread] == final, f"{thread}\n{logs}"


async def test_one_node_killed_mid_stream_goes_unnoticed(kafka_bootstrap: str, cluster: CassandraCluster,
                                                         keyspace: str, reference: Outcome, tmp_path: Path) -> None:
    group = cluster_group(kafka_bootstrap, tmp_path, cluster, keyspace)
    worker = group.add()
    await group.wait_ready()
    talk = conversation(think_s=0.3)
    try:
        async with PhasedConversation(talk, group.bootstrap, group.topics) as phases, ProbeMonitor(worker) as probes:
            await phases.play("before", range(12))
            errors_before = len(error_lines(worker))

            async def kill_soon() -> float:
                await asyncio.sleep(2.0)  # the stream is flowing: requests are in flight on every node
                cluster.kill(0)  # the first contact point: the node the driver's control connection uses
                return time.monotonic()

            killer = asyncio.create_task(kill_soon())
            await phases.play("node down", range(12, 30))
            killed_at = await killer
            cluster.restart(0)  # it comes back while the stream flows (launched from the main thread)
            back = asyncio.create_task(asyncio.to_thread(cassandra_cluster.wait_ready, cluster))
            await phases.play("node returning", range(30, 42))
            await back
            returned_at = time.monotonic()
            await phases.play("node back", range(42, TURNS))
            outcome = await phases.outcome()
    finally:
        group.stop_all()

    logs = group.logs()
    print(f"\nlongest wait for a context from the kill on: {phases.slowest(killed_at):.2f}s, before it: "
          f"{phases.slowest(0, killed_at):.2f}s")  # a measurement
    _judge(outcome, reference, logs)
    assert phases.slowest(killed_at) < NO_STALL_S, f"a message waited {phases.slowest(killed_at):.1f}s\n{logs}"
    disturbed = probes.between(killed_at - 3)
    assert len(disturbed) > 20 and all(s.live == 200 and "waiting" not in s.body for s in disturbed), logs
    assert max(s.unavailable for s in disturbed) == 0, f"an outage was reported\n{logs}"
    assert disturbed[-1].store_errors == 0, f"a store operation failed past the session's retries\n{logs}"
    assert error_lines(worker)[errors_before:] == [], logs
    assert returned_at > killed_at


async def test_two_nodes_down_stall_the_worker_which_says_why_loses_nothing_and_resumes(
        kafka_bootstrap: str, cluster: CassandraCluster, keyspace: str, reference: Outcome, tmp_path: Path) -> None:
    group = cluster_group(kafka_bootstrap, tmp_path, cluster, keyspace, OM_WORKER_STALL_TIMEOUT_S=str(STALL_TIMEOUT_S),
                          OM_WORKER_STORE_OUTAGE_BUDGET_S=str(BUDGET_S))
    worker = group.add()
    await group.wait_ready()
    talk = conversation(think_s=THINK_S)
    try:
        async with PhasedConversation(talk, group.bootstrap, group.topics) as phases, ProbeMonitor(worker) as probes:
            await phases.play("before", range(16))
            stalled = asyncio.create_task(phases.play("quorum lost", range(16, 32)))
            while len(phases.sent.get("quorum lost", ())) < 2 * THREADS:  # two turns of every thread under way
                await asyncio.sleep(0.05)
            down_at = time.monotonic()
            cluster.kill(1)
            cluster.kill(2)
            assert not stalled.done(), "the phase ended before the quorum was lost: the test proved nothing"

            # within the budget: stalled and live, and both the metric and /livez say which store and why
            said = await probes.until(lambda s: s.unavailable == 1, 30, "om_store_unavailable{store=cassandra} 1")
            waiting = await probes.until(lambda s: "waiting" in s.body, STALL_TIMEOUT_S + 10, "/livez waiting")
            assert "content store cassandra unavailable" in waiting.body["waiting"][0]
            assert QUORUM_OUT_OF_REACH.search(waiting.body["waiting"][0]), waiting.body
            assert not stalled.done(), "the stream went on without a quorum"
            # past the budget: /livez fails, naming the store
            dead = await probes.until(lambda s: s.live == 503, BUDGET_S + 15, "/livez 503 past the budget")
            for index in (1, 2):
                cluster.restart(index)
            await asyncio.to_thread(cassandra_cluster.wait_ready, cluster)
            back_at = time.monotonic()
            live_again = await probes.until(lambda s: s.live == 200 and s.unavailable == 0, 120,
                                            "/livez 200 and om_store_unavailable 0 once the nodes are back")
            await stalled
            await phases.play("quorum back", range(32, TURNS))
            outcome = await phases.outcome()
    finally:
        group.stop_all()

    logs = group.logs()
    _judge(outcome, reference, logs)
    assert await dead_letters(group.bootstrap, group.topics["dlq"]) == [], logs
    within = probes.between(down_at, down_at + BUDGET_S - 1)
    assert within and all(s.live == 200 for s in within), [(round(s.at - down_at), s.live) for s in within]
    assert said.at - down_at < 30 and dead.at - down_at >= BUDGET_S, (said.at - down_at, dead.at - down_at)
    assert "past worker.store_outage_budget_s" in dead.body["reasons"][0] and "cassandra" in dead.body["reasons"][0]
    assert live_again.at >= back_at - 1
    text = worker.log.read_text(errors="replace")
    said_at_error = [line for line in text.splitlines()
                     if re.search(r"\[ERROR\] content store cassandra (still )?unavailable (for|after) \d+ s: ", line)]
    assert said_at_error and all(QUORUM_OUT_OF_REACH.search(line) for line in said_at_error), logs
    assert any("[ERROR]" in line and "past worker.store_outage_budget_s" in line for line in text.splitlines()), logs
    assert "content store cassandra available again after" in text, logs
