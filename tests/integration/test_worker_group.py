"""Three worker processes on 12 partitions under a sustained stream: one joins, one leaves gracefully, one is
SIGKILLed, then every worker is restarted in turn. Nothing may be lost, duplicated or reset: the final contexts
equal those of an uninterrupted single-worker run of the same conversation (Cassandra content store), with the
in-memory table store and with RocksDB (each worker keeps its own data folder across its restarts). The RocksDB run
publishes contexts by reference (``om.context/v2``), read back as the client assembles them."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.cluster import Chaos, Conversation, Outcome, WorkerGroup, new_keyspace, play_uninterrupted

THREADS, TURNS = 16, 48


@pytest.fixture(scope="module")
def reference(kafka_bootstrap: str, cassandra_hosts: str, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The conversation through one worker, uninterrupted: where every other run must end."""
    return asyncio.run(play_uninterrupted(kafka_bootstrap, cassandra_hosts, tmp_path_factory.mktemp("reference"),
                                          Conversation(THREADS, TURNS)))


# the RocksDB run publishes by reference (om.context/v2): its contexts, assembled as the client assembles them, must
# end like the undisturbed run's whole (v1) contexts
@pytest.mark.parametrize(("table_store", "wire"), [("memory://", "v1"), ("rocksdb://", "v2")])
async def test_joins_leaves_kills_and_a_rolling_restart_lose_nothing(kafka_bootstrap: str, cassandra_hosts: str,
                                                                      tmp_path: Path, reference: Outcome,
                                                                      table_store: str, wire: str) -> None:
    group = WorkerGroup(kafka_bootstrap, tmp_path / "chaos", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts),
                        extra={"OM_WORKER_TABLE_STORE": table_store, "OM_CONTEXT_WIRE": wire})
    first, second = group.add(), group.add()
    await group.wait_ready()

    async def join() -> None:
        await group.add().wait_ready()

    async def leave() -> None:
        await asyncio.to_thread(first.stop)

    async def come_back() -> None:
        first.start()
        await first.wait_ready()

    async def kill() -> None:
        assert second.popen is not None
        os.killpg(second.popen.pid, signal.SIGKILL)
        await asyncio.to_thread(second.popen.wait, 10)

    async def revive() -> None:
        second.start()
        await second.wait_ready()

    async def rolling_restart() -> None:
        for member in group.running():
            await asyncio.to_thread(member.stop)
            member.start()
            await member.wait_ready()

    chaos = Chaos(THREADS * TURNS, [(0.10, "join", join), (0.25, "leave", leave), (0.35, "come back", come_back),
                                    (0.50, "SIGKILL", kill), (0.60, "revive", revive),
                                    (0.70, "rolling restart", rolling_restart)])
    slow = Conversation(THREADS, TURNS, think_s=1.0)
    try:
        outcome = await slow.play(group.bootstrap, group.topics, wire=wire, on_progress=chaos.on_progress)
        await chaos.finish()
    finally:
        group.stop_all()

    logs = group.logs()
    assert chaos.done == ["join", "leave", "come back", "SIGKILL", "revive", "rolling restart"], logs
    report = await group.partition_report(outcome.unserved) if outcome.unserved else ""
    assert not outcome.unserved, f"never served: {outcome.unserved[:10]}\n{report}\n{logs}"
    assert not outcome.version_regressions(), f"{outcome.version_regressions()}\n{logs}"
    assert outcome.lost_and_duplicated(TURNS) == (0, 0), f"{outcome.miscounted(TURNS)}\n{logs}"
    for thread in slow.names:
        assert outcome.final[thread] == reference.final[thread], f"{thread}\n{logs}"
