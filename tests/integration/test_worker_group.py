"""Three worker processes on 12 partitions under a sustained stream: one joins, one leaves gracefully, one is
SIGKILLed, then every worker is restarted in turn. Nothing may be lost, duplicated or reset: the final contexts
equal those of an uninterrupted single-worker run of the same conversation (Cassandra content store), with the
in-memory table store and with RocksDB (each worker keeps its own data folder across its restarts)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.support.cluster import Conversation, Outcome, WorkerGroup, new_keyspace, play_uninterrupted

THREADS, TURNS = 16, 48


@pytest.fixture(scope="module")
def reference(kafka_bootstrap: str, cassandra_hosts: str, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The conversation through one worker, uninterrupted: where every other run must end."""
    return asyncio.run(play_uninterrupted(kafka_bootstrap, cassandra_hosts, tmp_path_factory.mktemp("reference"),
                                          Conversation(THREADS, TURNS)))


class Chaos:
    """Membership changes fired when the stream reaches given fractions, one after the other, off the agents'
    path (the agents keep talking while workers come and go)."""

    def __init__(self, total: int, steps: list[tuple[float, str, Callable[[], Awaitable[None]]]]) -> None:
        self.total = total
        self.steps = steps
        self.done: list[str] = []
        self._queue: asyncio.Queue[tuple[str, Callable[[], Awaitable[None]]]] = asyncio.Queue()
        self._runner = asyncio.create_task(self._run())

    async def on_progress(self, sent: int) -> None:
        while self.steps and sent >= self.steps[0][0] * self.total:
            _, name, action = self.steps.pop(0)
            self._queue.put_nowait((name, action))

    async def _run(self) -> None:
        while True:
            name, action = await self._queue.get()
            try:
                await action()
                self.done.append(name)
            finally:
                self._queue.task_done()

    async def finish(self) -> None:
        """Wait until every step queued has completed (the conversation may end while the last one, a rolling
        restart, still waits for its last worker: it is not cut short), then stop; a step that failed raises here."""
        drained = asyncio.ensure_future(self._queue.join())
        await asyncio.wait({drained, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        drained.cancel()
        if self._runner.done():
            self._runner.result()
        self._runner.cancel()


@pytest.mark.parametrize("table_store", ["memory://", "rocksdb://"])
async def test_joins_leaves_kills_and_a_rolling_restart_lose_nothing(kafka_bootstrap: str, cassandra_hosts: str,
                                                                      tmp_path: Path, reference: Outcome,
                                                                      table_store: str) -> None:
    group = WorkerGroup(kafka_bootstrap, tmp_path / "chaos", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts), extra={"OM_WORKER_TABLE_STORE": table_store})
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
        outcome = await slow.play(group.bootstrap, group.topics, on_progress=chaos.on_progress)
        await chaos.finish()
    finally:
        group.stop_all()

    logs = group.logs()
    assert chaos.done == ["join", "leave", "come back", "SIGKILL", "revive", "rolling restart"], logs
    assert not outcome.unserved, f"never served: {outcome.unserved[:10]}\n{logs}"
    assert not outcome.version_regressions(), f"{outcome.version_regressions()}\n{logs}"
    assert outcome.lost_and_duplicated(TURNS) == (0, 0), outcome.marker_counts(TURNS)
    for thread in slow.names:
        assert outcome.final[thread] == reference.final[thread], f"{thread}\n{logs}"
