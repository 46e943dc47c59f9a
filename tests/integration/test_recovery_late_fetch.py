"""A table recovery whose records come back from a late fetch while the flow is stopped.

Faust's fetch loop waits up to a second for records; a rebalance that stops the flow meanwhile does not end that
wait. When the table's recovery seeks its changelog partitions before the wait ends, the fetch can drain the records
just sought and return them while the flow is still stopped. Faust then drops them and seeks back only the
partitions that have a committed offset: a changelog partition has none, so its position stays past the records the
recovery waits for, and the recovery never ends (the fresh-clone CI run of 2026-12-05: three changelog partitions
that moved to the surviving worker after a SIGKILL got no event for minutes, and their threads were never served).
``tests.support.late_fetch_worker`` makes that interleaving happen at every rebalance of one member. Here that
member is the survivor of a SIGKILL, recovers the dead member's partitions, and must serve every message.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.cluster import Chaos, Conversation, WorkerGroup, new_keyspace

pytestmark = pytest.mark.timeout(600)
THREADS, TURNS = 8, 16


async def test_a_recovery_whose_records_a_late_fetch_drained_while_the_flow_stopped_still_ends(
        kafka_bootstrap: str, cassandra_hosts: str, tmp_path: Path) -> None:
    group = WorkerGroup(kafka_bootstrap, tmp_path, cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts))
    doomed = group.add()
    await group.wait_ready()
    survivor = group.add(start=False)
    survivor.module = "tests.support.late_fetch_worker"
    survivor.start()
    await group.settle()

    async def kill() -> None:
        assert doomed.popen is not None
        os.killpg(doomed.popen.pid, signal.SIGKILL)
        await asyncio.to_thread(doomed.popen.wait, 10)

    chaos = Chaos(THREADS * TURNS, [(0.4, "SIGKILL", kill)])
    try:
        outcome = await Conversation(THREADS, TURNS, think_s=0.4).play(group.bootstrap, group.topics,
                                                                         on_progress=chaos.on_progress)
        await chaos.finish()
    finally:
        group.stop_all()
    log = survivor.log.read_text(errors="replace")
    assert "late fetch: drained" in log, "the late fetch never drained a sought partition: the test proved nothing\n" \
        + group.logs()
    assert "No event received for active tp" not in log, group.logs()
    assert not outcome.unserved, f"never served: {outcome.unserved[:10]}\n{group.logs()}"
