"""How the Cassandra store groups a thread's message writes made at the same moment (``message_batches.py``): what
a grouped batch writes is what the messages' own batches would have written, cells and all; a batch stays under
Cassandra's warning thresholds; a refused batch fails only the message at fault; a cancelled caller leaves nobody
waiting. The sender here records the batches it is given (no server: the store's real sends are covered on
Cassandra by ``tests/integration/test_cassandra_store.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from om_stream.adapters.cassandra_store.message_batches import (
    MAX_BODY_CHARS,
    MAX_PARTITIONS,
    MessageBatches,
    Write,
    merged,
)
from om_stream.adapters.cassandra_store.queries import CREATED_TS_BASE
from om_stream.errors import StorageError


def _message(thread: str, n: int, created: int, *, first: bool = True, newest: bool = True,
             bucket: int = 0, body: str = "hi") -> list[Write]:
    """The statements ``put_message`` makes for a message (their values in ``queries.WRITES``' order)."""
    writes: list[Write] = [
        ("put_message", ("r", thread, bucket, created, n, f"{thread}-m{n}", thread, "user", 3, body, 0)),
        ("put_message_by_id", (f"{thread}-m{n}", "r", thread, bucket, created, n, thread, "user", 3, body, 0)),
        ("put_bucket", ("r", thread, bucket, 0))]
    if newest:
        writes.append(("thread_updated", (created * 1000, 0, created, "r", thread)))
    if first:
        writes.append(("thread_created", (CREATED_TS_BASE - created * 1000, 0, created, "r", thread)))
    writes.append(("record_resource", ("r", thread)))
    return writes


def _cells(writes: Sequence[Write]) -> dict[tuple[Any, ...], Any]:
    """What Cassandra keeps of these writes: each row as written (the same values every time: idempotent), and of
    each thread-time cell the value with the highest ``USING TIMESTAMP``, in whatever order they arrive."""
    kept: dict[tuple[Any, ...], Any] = {}
    for name, params in writes:
        if name in ("thread_updated", "thread_created"):
            cell = (name, params[3], params[4])
            if cell not in kept or params[0] > kept[cell][0]:
                kept[cell] = (params[0], params[2])
        else:
            kept[(name, *params)] = True
    return kept


class Sender:
    def __init__(self, refuse: str | None = None, transient: bool = False) -> None:
        self.batches: list[list[Write]] = []
        self.refuse, self.transient = refuse, transient
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, writes: Sequence[Write]) -> None:
        await self.release.wait()
        if self.refuse is not None and any(p[5] == self.refuse for n, p in writes if n == "put_message"):
            raise StorageError("Cassandra: refused", transient=self.transient)
        self.batches.append(list(writes))


def _partitions(batch: Sequence[Write]) -> int:
    keys = {"put_message": slice(0, 3), "put_message_by_id": slice(0, 1), "put_bucket": slice(0, 2),
            "thread_updated": slice(3, 4), "thread_created": slice(3, 4), "record_resource": slice(1, 2)}
    return len({(name, *params[keys[name]]) for name, params in batch})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["t1", "t2"]), st.integers(1, 10**12), st.booleans(), st.booleans(),
                          st.integers(0, 2)), min_size=1, max_size=12))
def test_a_merged_batch_keeps_what_the_messages_own_batches_keep(
        messages: list[tuple[str, int, bool, bool, int]]) -> None:
    each = [_message(t, n, created, first=first, newest=newest, bucket=bucket)
            for n, (t, created, first, newest, bucket) in enumerate(messages)]
    together = merged(each)
    assert _cells(together) == _cells([w for writes in each for w in writes])
    assert len(together) == len({(n, *p) for n, p in together})  # no statement twice
    times = [(n, p[3], p[4]) for n, p in together if n in ("thread_updated", "thread_created")]
    assert len(times) == len(set(times))  # one write per thread-time cell


async def test_a_threads_messages_written_at_once_go_as_one_batch_and_a_lone_one_as_before() -> None:
    send = Sender()
    batches = MessageBatches(send)
    writes = [_message("t1", n, 1000 + n) for n in range(4)] + [_message("t2", 0, 5)]
    await asyncio.gather(*(batches.write(w[0][1][1], w, 2) for w in writes))
    assert len(send.batches) == 2
    by_thread = {b[0][1][1]: b for b in send.batches}
    assert by_thread["t2"] == writes[4]  # alone at its moment: its own statements, untouched
    assert _cells(by_thread["t1"]) == _cells([w for m in writes[:4] for w in m])
    assert [p[2] for n, p in by_thread["t1"] if n == "thread_updated"] == [1003]
    assert [p[2] for n, p in by_thread["t1"] if n == "thread_created"] == [1000]
    await batches.write("t1", writes[0], 2)  # later, alone again
    assert send.batches[-1] == writes[0]


async def test_a_batch_stays_under_the_size_and_partition_thresholds() -> None:
    send = Sender()
    batches = MessageBatches(send)
    body = "x" * 600
    writes = [_message("t1", n, 1000 + n, body=body) for n in range(10)]
    await asyncio.gather(*(batches.write("t1", w, len(body)) for w in writes))
    assert sum(len([n for n, _ in b if n == "put_message"]) for b in send.batches) == 10
    for batch in send.batches:
        assert sum(len(p[9]) for n, p in batch if n == "put_message") <= MAX_BODY_CHARS
    many = [_message("t2", n, 2000 + n, bucket=n) for n in range(12)]  # a bucket each: more partitions
    await asyncio.gather(*(batches.write("t2", w, 2) for w in many))
    assert all(_partitions(b) <= MAX_PARTITIONS for b in send.batches)
    assert sum(1 for b in send.batches for n, _ in b if n == "put_message") == 22


async def test_a_refused_batch_fails_only_the_message_at_fault() -> None:
    send = Sender(refuse="t1-m2")
    batches = MessageBatches(send)
    writes = [_message("t1", n, 1000 + n) for n in range(4)]
    outcomes = await asyncio.gather(*(batches.write("t1", w, 2) for w in writes), return_exceptions=True)
    assert [isinstance(o, StorageError) for o in outcomes] == [False, False, True, False]
    written = {p[5] for b in send.batches for n, p in b if n == "put_message"}
    assert written == {"t1-m0", "t1-m1", "t1-m3"}


async def test_an_outage_fails_every_message_of_the_batch_without_trying_each() -> None:
    send = Sender(refuse="t1-m2", transient=True)
    batches = MessageBatches(send)
    writes = [_message("t1", n, 1000 + n) for n in range(3)]
    outcomes = await asyncio.gather(*(batches.write("t1", w, 2) for w in writes), return_exceptions=True)
    assert all(isinstance(o, StorageError) and o.transient for o in outcomes)
    assert send.batches == []


@pytest.mark.parametrize("cancelled", [0, 1])
async def test_a_caller_cancelled_while_its_batch_is_sent_leaves_nobody_waiting(cancelled: int) -> None:
    send = Sender()
    send.release.clear()
    batches = MessageBatches(send)
    writes = [_message("t1", n, 1000 + n) for n in range(3)]
    tasks = [asyncio.create_task(batches.write("t1", w, 2)) for w in writes]
    for _ in range(3):
        await asyncio.sleep(0)  # gathered, dealt, the sender waiting for the node
    tasks[cancelled].cancel()
    send.release.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    await batches.drain()
    assert isinstance(outcomes[cancelled], asyncio.CancelledError)
    assert all(o is None for i, o in enumerate(outcomes) if i != cancelled)
    written = {p[5] for b in send.batches for n, p in b if n == "put_message"}
    assert {f"t1-m{i}" for i in range(3) if i != cancelled} <= written


async def test_a_gatherer_cancelled_before_it_deals_still_has_the_others_written() -> None:
    send = Sender()
    batches = MessageBatches(send)
    writes = [_message("t1", n, 1000 + n) for n in range(3)]
    tasks = [asyncio.create_task(batches.write("t1", w, 2)) for w in writes]
    await asyncio.sleep(0)  # the first is gathering, the others joined
    tasks[0].cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(outcomes[0], asyncio.CancelledError) and outcomes[1:] == [None, None]
    assert {p[5] for b in send.batches for n, p in b if n == "put_message"} == {"t1-m1", "t1-m2"}
