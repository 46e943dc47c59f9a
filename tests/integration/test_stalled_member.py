"""A member whose batch outlasts the group's patience: its content store stalls in the middle of a batch (a Cassandra
node in a long GC pause, seen by this worker only) while the group rebalances, or the whole process is frozen past
the session timeout (a VM paused, a container throttled) with a batch in hand. The group goes on without it; when
the member comes back to its batch, it must not write its record states or publish over the new owners' (a late
write to the state table's changelog would be what the next owner recovers, and with RocksDB the member's own
database would skip the changelog records written while it was away). Nothing may be lost, duplicated or reset, no
context version may go backwards, and the final contexts equal an uninterrupted run's."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.cluster import (
    Chaos,
    Conversation,
    Outcome,
    WorkerGroup,
    new_keyspace,
    play_uninterrupted,
    stalling_member,
)

pytestmark = pytest.mark.timeout(900)
THREADS, TURNS = 8, 36
STALL_S = 16.0  # well past the rebalance and session timeouts (6 s): the group moves on without the member


@pytest.fixture(scope="module")
def reference(kafka_bootstrap: str, cassandra_hosts: str, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return asyncio.run(play_uninterrupted(kafka_bootstrap, cassandra_hosts, tmp_path_factory.mktemp("reference"),
                                          Conversation(THREADS, TURNS)))


@pytest.mark.parametrize("table_store", ["memory://", "rocksdb://"])
@pytest.mark.parametrize("fault", ["store stalls through a rebalance", "process frozen past the session timeout"])
async def test_a_member_back_from_a_stall_writes_nothing_over_the_new_owners(
        kafka_bootstrap: str, cassandra_hosts: str, tmp_path: Path, reference: Outcome, table_store: str,
        fault: str) -> None:
    group = WorkerGroup(kafka_bootstrap, tmp_path / "group", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts), extra={"OM_WORKER_TABLE_STORE": table_store})
    stall = tmp_path / "stall"
    slow = stalling_member(group, stall)
    group.add()
    await group.wait_ready()

    async def stall_through_a_rebalance() -> None:
        stall.touch()
        await asyncio.sleep(1.0)  # the member's next batch is held in its content-store writes
        joined = asyncio.ensure_future(group.add().wait_ready())  # a rebalance while the batch is held
        await asyncio.sleep(STALL_S)
        # released only once the group has moved on (the new member holds partitions): on a loaded machine the
        # new member took longer than STALL_S to start, the batch was released before any rebalance, and there
        # was nothing to fence
        await joined
        stall.unlink()

    async def freeze_past_the_session() -> None:
        assert slow.popen is not None
        stall.touch()
        await asyncio.sleep(1.0)
        os.killpg(slow.popen.pid, signal.SIGSTOP)  # heartbeats stop too: the group drops the member
        await asyncio.sleep(STALL_S)
        stall.unlink()  # released while frozen: the batch goes on the moment the process does
        os.killpg(slow.popen.pid, signal.SIGCONT)

    action = stall_through_a_rebalance if fault.startswith("store") else freeze_past_the_session
    chaos = Chaos(THREADS * TURNS, [(0.3, fault, action)])
    try:
        outcome = await Conversation(THREADS, TURNS, think_s=0.5).play(group.bootstrap, group.topics,
                                                                       on_progress=chaos.on_progress)
        await chaos.finish()
    finally:
        stall.unlink(missing_ok=True)
        group.stop_all()

    logs = group.logs()
    assert chaos.done == [fault], logs
    held = slow.log.read_text()
    assert "content-store write stalled" in held, "the fault never held a batch"
    after = held[held.index("content-store write released"):]
    assert "straddled a rebalance was dropped" in after, f"the held batch was not fenced off\n{logs}"
    assert not outcome.unserved, f"never served: {outcome.unserved[:10]}\n{logs}"
    assert not outcome.version_regressions(), f"{outcome.version_regressions()}\n{logs}"
    assert outcome.lost_and_duplicated(TURNS) == (0, 0), f"{outcome.miscounted(TURNS)}\n{logs}"
    for thread in reference.final:
        assert outcome.final[thread] == reference.final[thread], f"{thread}\n{logs}"
