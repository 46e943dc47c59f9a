"""What om-stream keeps in process does not grow with its traffic: each map that messages, threads or requests
add to is bounded or pruned at the moment its entries stop being needed. Each test drives thousands of them and
checks the size, and that the behaviour the map serves is unchanged.

The Cassandra store's memos and the agent client's publish path are checked against real servers in
``tests/integration/test_bounded_maps_real.py``."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import faust
import pytest
from aiokafka import ConsumerRecord

from om_stream import Memory
from om_stream.adapters.gateway.budget import SWEEP_EVERY, TokenBudget
from om_stream.client.client import CONTEXTS_KEPT, OMClient
from om_stream.core.state import RecordState
from om_stream.errors import InputRejected
from om_stream.observability.metrics import Metrics
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import REJECTIONS_KEPT
from om_stream.runtime.record_locks import RecordLocks
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker import state_table
from om_stream.runtime.worker.inventory import Inventory
from om_stream.runtime.worker.recent_contexts import CONTEXTS_KEPT as WORKER_CONTEXTS_KEPT
from om_stream.runtime.worker.recent_contexts import RecentContexts
from om_stream.runtime.worker.state_table import RecordTable, encode_held
from om_stream.testing import FunctionModel
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from tests.support.processor_doubles import CommandWorker

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SMALL = {"observation": {"messageTokens": 400, "bufferTokens": False}, "reflection": {"observationTokens": 4000}}


def _message(thread: str, index: int, *, resource: str = "r1", text: str = "a short note") -> dict[str, Any]:
    return {"message_id": f"{thread}-m{index}", "thread_id": thread, "resource_id": resource,
            "role": "user" if index % 2 == 0 else "assistant",
            "created_at": (START + timedelta(seconds=index)).isoformat(), "parts": [{"type": "text", "text": text}]}


def _unpublished(memory: Memory) -> int:
    return sum(len(thread.unpublished) for thread in memory._threads.values())


# -- the embedded runner ---------------------------------------------------------------------------------------------

async def test_message_sequences_are_kept_only_until_a_context_includes_them() -> None:
    async with Memory(SMALL) as om:
        for index in range(3000):
            context = await om.add_message(_message(f"t{index % 5}", index // 5, text=f"note {index} on the plan"))
            assert context is not None and context.through_message_id == f"t{index % 5}-m{index // 5}"
            assert _unpublished(om) == 0  # its context is out: nothing waits for it any more
        await om.settle()
        # without waiting (a fast agent): only what arrived while an observation held the contexts back is kept
        most = 0
        for index in range(3000, 6000):
            await om.add_message(_message(f"t{index % 5}", index // 5, text=f"note {index}"), wait=False)
            most = max(most, _unpublished(om))
        assert most > 0  # contexts were held back meanwhile (the Observer's task had no turn to run)
        await om.settle()
        await asyncio.gather(*(om.add_message(_message(f"t{thread}", 10_000)) for thread in range(5)))
        assert _unpublished(om) == 0


async def test_a_caller_that_gave_up_waiting_leaves_nothing_behind() -> None:
    release = asyncio.Event()

    async def observe_when_released(request: ChatRequest) -> str:  # the context waits for this Observer call
        await release.wait()
        return "<observations>\nDate: Mar 2, 2026\n* 🔴 (09:00) User wrote many words.\n</observations>"

    options = {"observation": {"messageTokens": 30, "bufferTokens": False}, "reflection": {"observationTokens": 4000}}
    async with Memory(options, model=FunctionModel(observe_when_released)) as om:
        gave_up = 0
        for index in range(40):
            try:
                await om.add_message(_message("busy", index, text="many words " * 20), timeout=0.01)
            except TimeoutError:
                gave_up += 1
        assert gave_up > 0
        release.set()
        await om.settle()
        await om.add_message(_message("busy", 40, text="and one more"), timeout=30)
        assert all(not thread.waiters for thread in om._threads.values())
        assert _unpublished(om) == 0


async def test_record_locks_go_when_their_record_is_idle_and_never_admit_two_inputs_of_one_record() -> None:
    async with Memory(SMALL) as om:
        await asyncio.gather(*(om.add_message(_message(f"thread-{index}", 0)) for index in range(3000)))
        assert len(om._locks) == 0
        assert len(om._threads) == 3000  # the records themselves stay: they are the memory

    locks, inside, most = RecordLocks(), dict[str, int](), 0

    async def input_of(key: str) -> None:
        nonlocal most
        async with locks.hold(key):
            inside[key] = inside.get(key, 0) + 1
            most = max(most, inside[key])
            await asyncio.sleep(0)
            inside[key] -= 1

    await asyncio.gather(*(input_of(f"k{index % 50}") for index in range(5000)))
    assert most == 1 and len(locks) == 0


async def test_rejections_keep_the_latest_and_count_all_and_each_caller_gets_its_own() -> None:
    async with Memory(SMALL) as om:
        await om.add_message(_message("owned", 0, resource="r1"))

        async def refused(index: int) -> bool:
            try:
                await om.add_message(_message("owned", index + 1, resource="intruder"))
            except InputRejected:
                return True
            return False

        async def accepted(index: int) -> bool:
            await om.add_message(_message(f"other-{index}", 0, resource="r2"))
            return False

        # concurrent inputs of other records: a refusal reaches the caller whose input it refused, no other
        outcomes = await asyncio.gather(*(refused(i) if i % 2 else accepted(i) for i in range(2 * REJECTIONS_KEPT + 2)))
        assert outcomes == [bool(i % 2) for i in range(2 * REJECTIONS_KEPT + 2)]
        for index in range(2000):
            assert await refused(10_000 + index)
        assert om.rejected == REJECTIONS_KEPT + 1 + 2000
        assert len(om.rejections) == REJECTIONS_KEPT
        assert om.rejections[-1].reason == om.rejections[0].reason


# -- timers ------------------------------------------------------------------------------------------------------------

def test_a_timer_moved_by_every_message_leaves_a_bounded_heap() -> None:
    wheel = TimerWheel()
    for index in range(20_000):  # an idle timer reset by each message, due an hour after it
        wheel.track(f"t{index % 10}", {"idle": 1_000 * index + 3_600_000})
    assert wheel.heap_size <= 2 * 1024
    assert len(wheel) == 10
    last = 1_000 * 19_999 + 3_600_000
    assert wheel.due(last - 10_000) == [] or all(fired.timer == "idle" for _, fired in wheel.due(last - 10_000))
    fired = wheel.due(last)
    assert sorted((key, f.timer) for key, f in fired) == sorted((f"t{i}", "idle") for i in range(10))  # once
    assert wheel.due(last) == []


# -- the worker ----------------------------------------------------------------------------------------------------

def test_the_decoded_states_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_table, "DECODED_KEPT", 500)
    app = faust.App("om-bounded", store="memory://", datadir=str(tmp_path))
    table = RecordTable(app, partitions=2, active_partitions=lambda: {0})
    for index in range(5000):
        key = f"thread-{index}"
        table.table.data[key.encode()] = encode_held(0, RecordState(key=key, scope="thread", resource_id="r1"))
        held = table.lookup(key)
        assert held is not None and held.state.key == key
    assert table.decoded_size == 500
    assert len(table.held()) == 5000 and table.decoded_size == 500  # every record still read, from the table


async def test_the_inventory_reads_the_tables_records_and_bytes(tmp_path: Path) -> None:
    """``om_table_bytes`` is what the in-memory table holds, counted; a reader with nothing to say (None) leaves each
    gauge at its last reading."""
    app = faust.App("om-bytes", store="memory://", datadir=str(tmp_path))
    table = RecordTable(app, partitions=2, active_partitions=lambda: {0, 1})
    encoded = [encode_held(index % 2, RecordState(key=f"thread-{index}", scope="thread", resource_id="r" * index))
               for index in range(300)]
    for index, raw in enumerate(encoded):
        table.table.data[f"thread-{index}".encode()] = raw
    metrics = Metrics.create()
    inventory = Inventory(metrics)
    inventory.table(table.local_records, table.local_bytes)
    inventory.read()
    assert metrics.registry.get_sample_value("om_table_records") == 300
    assert metrics.registry.get_sample_value("om_table_bytes") == sum(map(len, encoded))
    inventory.table(lambda: None, lambda: None)
    inventory.read()
    assert metrics.registry.get_sample_value("om_table_bytes") == sum(map(len, encoded))


@pytest.fixture(scope="module")
def published() -> ContextRecord:
    """A context as the memory publishes it."""
    async def one() -> ContextRecord:
        async with Memory(SMALL) as om:
            context = await om.add_message(_message("t", 0))
            assert context is not None
            return context
    return asyncio.run(one())


def _context(published: ContextRecord, thread: str, version: int) -> ContextRecord:
    return published.model_copy(update={"thread_id": thread, "version": version})


def test_the_workers_latest_contexts_are_bounded_and_the_last_stored_are_kept(published: ContextRecord) -> None:
    contexts = RecentContexts()
    for index in range(5 * WORKER_CONTEXTS_KEPT):
        thread = f"t{index % (2 * WORKER_CONTEXTS_KEPT)}"
        contexts[thread] = _context(published, thread, index)
        assert len(contexts) <= WORKER_CONTEXTS_KEPT
    newest = 5 * WORKER_CONTEXTS_KEPT - 1
    assert contexts[f"t{newest % (2 * WORKER_CONTEXTS_KEPT)}"].version == newest
    assert contexts.pop("t-never", None) is None


async def test_a_rebalance_forgets_the_records_near_block_after_that_went_elsewhere() -> None:
    worker = CommandWorker({"observation": {"messageTokens": 100, "bufferTokens": False}})
    state = RecordState(key="k", scope="thread", resource_id="r1", unobserved_tokens=100_000)
    for index in range(3000):
        worker.processor.observe_record(f"record-{index}", state)
    assert len(worker.processor.near_limit) == 3000  # held here: they count
    worker.processor.keep_held({f"record-{index}" for index in range(10)})
    assert len(worker.processor.near_limit) == 10
    assert worker.processor.metrics.registry.get_sample_value("om_threads_near_block_after") == 10


# -- the model gateway's budget ------------------------------------------------------------------------------------

def test_token_budgets_forget_tenants_idle_for_a_window() -> None:
    budget = TokenBudget(limit=1000, window_s=60.0)
    for index in range(20_000):  # a new tenant every 10 ms, each making one call
        budget.reserve(f"tenant-{index}", 10, now=index * 0.01)
        assert budget.resources_held <= 6000 + SWEEP_EVERY
    budget.reserve("tenant-19999", 10, now=199.99)
    assert budget.used("tenant-19999", 199.99) == 20  # a tenant still in the window keeps what it spent


# -- the agent client ------------------------------------------------------------------------------------------------

async def test_the_client_keeps_the_latest_contexts_of_the_threads_heard_from_last(published: ContextRecord) -> None:
    client = OMClient("127.0.0.1:1")  # never started: contexts are handed to it as its tail would
    try:
        for index in range(3 * CONTEXTS_KEPT):
            thread = f"t{index}"
            record = ConsumerRecord(topic="om.context", partition=0, offset=index, timestamp=0, timestamp_type=0,
                                    key=thread.encode(), value=encode(_context(published, thread, 1)), checksum=None,
                                    serialized_key_size=0, serialized_value_size=0, headers=())
            await client._on_context(record)
        assert len(client._latest) == CONTEXTS_KEPT
        assert client.latest_context(f"t{3 * CONTEXTS_KEPT - 1}") is not None
        assert client.latest_context("t0") is None
    finally:
        await client.stop()
