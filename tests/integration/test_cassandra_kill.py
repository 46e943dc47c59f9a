"""Cassandra killed with SIGKILL and restarted while the engine writes: no message and no chunk is lost.

A separate node (not the session's) is started for this test, with a durable commit log (``commitlog_sync:
group``: a write is acknowledged once it is on disk), because a single node with the periodic default acknowledges
writes it may lose on ``kill -9`` - in production, replicas cover that; here the node itself must. While the
embedded engine writes messages and observation chunks of three threads, the node is killed, restarted on the same
data directory and ports, and the store's retries carry the writes through the outage.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from om_stream.adapters.cassandra_store import CassandraContentStore, migrate
from om_stream.core.messages import Message, TextPart
from om_stream.devservices import cassandra
from om_stream.devservices.jvm import pid_alive
from om_stream.runtime.clock import ManualClock
from om_stream.runtime.embedded import Memory
from om_stream.settings import CassandraSettings

pytestmark = pytest.mark.integration

OPTIONS = {
    "observation": {"messageTokens": 400, "bufferTokens": 0.25, "bufferActivation": 0.8, "blockAfter": 1.5},
    "reflection": {"observationTokens": 600},
}
THREADS = 3
PER_THREAD = 60
KILL_AFTER = 45  # messages written before the kill


@pytest.fixture
def node(tmp_path: Path) -> Iterator[cassandra.CassandraNode]:
    started = cassandra.start(tmp_path / "cassandra", commitlog_sync="group")
    holder = [started]
    try:
        cassandra.wait_ready(started)
        yield started
    finally:
        for n in holder:
            n.process.stop(grace=10)


def _chunks(memory: Memory) -> set[str]:
    """Every observation chunk the engine holds: active log segments and buffered chunks of every thread."""
    states = [memory.state(f"kill-thread-{t}", "kill-user") for t in range(THREADS)]
    return {s.id for st in states if st for s in st.log} | {c.id for st in states if st for c in st.buffered}


def _message(thread: int, i: int) -> Message:
    words = " ".join(f"detail{thread}-{i}-{k}" for k in range(25))
    return Message(message_id=f"k{thread}-{i}", thread_id=f"kill-thread-{thread}", resource_id="kill-user",
                   role="user" if i % 2 == 0 else "assistant",
                   created_at=datetime(2026, 5, 1, tzinfo=UTC) + timedelta(minutes=i, seconds=thread),
                   parts=(TextPart(text=f"Message {i} of thread {thread}: {words}"),))


async def test_no_message_or_chunk_is_lost_when_cassandra_is_killed_and_restarted(
        node: cassandra.CassandraNode) -> None:
    settings = CassandraSettings(hosts=node.contact_point, keyspace="it_kill", retry_deadline_s=300,
                                 retry_max_delay_s=2, reconnect_max_delay_s=1, request_timeout_s=5)
    await asyncio.to_thread(migrate, settings)
    store = CassandraContentStore(settings)
    try:
        await _write_through_the_outage(node, settings, store)
    finally:
        # the embedded runner does not close a store it was given; left open, the driver keeps reconnecting to
        # the node the fixture stops, drawing jitter from the global ``random`` every second on its own threads,
        # which Hypothesis reports in whatever property test is drawing at that moment
        await store.close()


async def _write_through_the_outage(node: cassandra.CassandraNode, settings: CassandraSettings,
                                    store: CassandraContentStore) -> None:
    clock = ManualClock(int(datetime(2026, 5, 1, tzinfo=UTC).timestamp() * 1000))
    memory = Memory(OPTIONS, store=store, clock=clock)
    written: list[Message] = []
    killed = asyncio.Event()
    at_kill: dict[str, int] = {}
    chunks_at_kill: set[str] = set()

    async def feed() -> None:
        for i in range(PER_THREAD):
            for t in range(THREADS):
                msg = _message(t, i)
                clock.now = max(clock.now, msg.created_at_ms)
                await memory.add_message(msg, wait=False)
                written.append(msg)
                if len(written) == KILL_AFTER:
                    killed.set()

    async def kill_and_restart() -> cassandra.CassandraNode:
        await killed.wait()
        await memory.settle()  # let the background cycles reach the store too, then pull the plug under them
        at_kill["messages"] = len(written)
        chunks_at_kill.update(_chunks(memory))
        os.kill(node.process.pid, signal.SIGKILL)
        node.process.popen.wait(30)
        assert not pid_alive(node.process.pid)
        await asyncio.sleep(3)  # writes keep coming and keep failing meanwhile
        restarted = cassandra.restart(node)
        await asyncio.to_thread(cassandra.wait_ready, restarted)
        at_kill["restarted_after"] = len(written)
        return restarted

    async with memory:
        feeder = asyncio.create_task(feed())
        restarted = await kill_and_restart()
        try:
            await asyncio.wait_for(feeder, timeout=600)
            await memory.settle()
            await memory.observe("kill-thread-0", "kill-user", force=True)
            await memory.settle()
        finally:
            node.process = restarted.process  # the fixture stops the running JVM

        # the outage was felt (writes were retried), and the engine kept producing chunks after it
        assert store.retries > 0
        assert at_kill["restarted_after"] < THREADS * PER_THREAD
        assert len(chunks_at_kill) >= THREADS and _chunks(memory) - chunks_at_kill
        chunk_ids = chunks_at_kill | _chunks(memory)  # replaced chunks stay stored (only clear forgets them)

        cold = CassandraContentStore(settings.model_copy(update={"message_cache_size": 0}))
        try:
            stored = await cold.get_messages([m.message_id for m in written])
            assert [m.message_id for m in stored] == [m.message_id for m in written]
            assert stored == written
            for t in range(THREADS):
                assert await cold.count_thread_messages("kill-user", f"kill-thread-{t}") == PER_THREAD
            texts = await cold.get_segment_texts(sorted(chunk_ids))
            assert set(texts) == chunk_ids and all(texts.values())
            groups = [g for t in range(THREADS) for g in await cold.list_groups(f"kill-thread-{t}")]
            assert {g.group_id for g in groups} >= chunk_ids
        finally:
            await cold.close()
