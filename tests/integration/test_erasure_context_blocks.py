"""Erasure under contexts by reference (``OM_CONTEXT_WIRE=v2``) on real Kafka, when the worker no longer knows a
thread's previous index: after a restart, the first context of a thread whose list changed names a new index, and
the blocks the old index listed are no longer the worker's to know. An erase must still leave no text of the thread
on ``om.context.blocks`` (nor an index on ``om.context.index``, nor a cursor on ``om.context``), read as a consumer
of a compacted topic does: from the beginning, the last record of each key winning. A thread of another person
whose id begins with the erased thread's id and a slash (its block keys begin with ``<erased id>/``) keeps every
block of its index.

The scenario: two threads of one person and the other person's thread are observed (a forced observation: the
list gains the observation blocks), the worker restarts, the person's two threads are cleared (the first context
after the restart drops the observation blocks, which that worker never listed), then one thread is erased by
itself and the person with every thread of theirs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from om_stream.client.partitioning import partition_for
from om_stream.wire.context_v2 import split_block_key
from tests.support.store_scans import latest_per_key
from tests.support.worker import Agent, WorkerProcess, agent_for, message_record, receipt_for, started, worker_process

# no observation unless asked for: the lists change only where the scenario changes them
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 100_000, "bufferTokens": False}}
PARTITIONS = 2
ERASED = ("ctx-erase-a", "ctx-erase-b")  # the person "ana": a erased by itself, b with the person
BYSTANDER_RESOURCE = "bob"


def bystander_of(thread: str) -> str:
    """A thread id beginning with ``<thread>/`` on the same partition (its block keys share the erased one's
    prefix and its partition of om.context.blocks)."""
    n = 0
    while partition_for(f"{thread}/{n}", PARTITIONS) != partition_for(thread, PARTITIONS):
        n += 1
    return f"{thread}/{n}"


async def converse(agent: Agent, thread: str, resource: str, turns: int) -> None:
    for index in range(turns):
        role = "user" if index % 2 == 0 else "assistant"
        await agent.send(message_record(thread, index, role, f"the ferry for {thread} leaves at nine, item {index}",
                                        resource=resource), key=thread.encode())
    await agent.context_through(thread, f"{thread}-m{turns - 1}")


async def index_of(worker: WorkerProcess, thread: str) -> list[str] | None:
    """The digests of the thread's latest index (None: none, or a tombstone)."""
    latest = (await latest_per_key(worker.bootstrap, worker.topics["context_index"])).get(thread)
    return list(json.loads(latest)["blocks"]) if latest is not None else None


async def until_index(worker: WorkerProcess, thread: str, accept: Any, timeout: float = 90.0) -> list[str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await index_of(worker, thread)
        if found is not None and accept(found):
            return found
        assert asyncio.get_running_loop().time() < deadline, f"{thread}: no such index, last {found}\n{worker.tail()}"
        await asyncio.sleep(0.5)


async def observed(worker: WorkerProcess, agent: Agent, thread: str, resource: str) -> list[str]:
    """A forced observation of the thread, and its index once it lists the observation blocks."""
    before = await index_of(worker, thread) or []
    await agent.send({"schema": "om.command/v1", "command_id": f"observe-{thread}", "thread_id": thread,
                      "resource_id": resource, "command": "observe", "force": True}, key=thread.encode(),
                     topic="commands")
    return await until_index(worker, thread, lambda blocks: len(blocks) > len(before) + 2)


async def test_an_erase_tombstones_the_blocks_an_index_forgotten_by_a_restart_dropped(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    bystander = bystander_of(ERASED[0])
    process = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=PARTITIONS,
                             extra={"OM_CONTEXT_WIRE": "v2"})
    before: dict[str, list[str]] = {}
    async with started(process) as worker, agent_for(worker) as agent:
        for thread, resource in ((ERASED[0], "ana"), (ERASED[1], "ana"), (bystander, BYSTANDER_RESOURCE)):
            await converse(agent, thread, resource, 6)
            before[thread] = await observed(worker, agent, thread, resource)

    # the restarted worker knows no thread's index: the clear's context drops the observation blocks unknowingly
    async with started(process) as worker, agent_for(worker) as agent:
        for thread in ERASED:
            await agent.send({"schema": "om.command/v1", "command_id": f"clear-{thread}", "thread_id": thread,
                              "command": "clear"}, key=thread.encode(), topic="commands")
            after = await until_index(worker, thread, lambda blocks, t=thread: blocks != before[t])
            assert set(before[thread]) - set(after), "the clear dropped no block: the scenario did not happen"

        await agent.send({"schema": "om.command/v1", "command_id": "erase-thread-a", "command": "erase",
                          "scope": "thread", "thread_id": ERASED[0], "resource_id": "ana"},
                         key=ERASED[0].encode(), topic="commands")
        one = await receipt_for(agent, "erase-thread-a")
        await agent.send({"schema": "om.command/v1", "command_id": "erase-ana", "command": "erase",
                          "scope": "resource", "resource_id": "ana"}, key=b"ana", topic="commands")
        person = await receipt_for(agent, "erase-ana")
        assert one["found"] is True and person["found"] is True, (one, person)

        # read after the receipts, as a consumer of the compacted topics that starts now would
        blocks = await latest_per_key(kafka_bootstrap, worker.topics["context_blocks"])
        indexes = await latest_per_key(kafka_bootstrap, worker.topics["context_index"])
        cursors = await latest_per_key(kafka_bootstrap, worker.topics["context"])
        for thread in ERASED:
            keys = [key for key in blocks if len(key) > 23 and split_block_key(key)[0] == thread]
            assert set(before[thread]) <= {split_block_key(key)[1] for key in keys}
            holding = [key for key in keys if blocks[key] is not None]
            assert not holding, f"{thread}: blocks still hold text after the erase: {holding}"
            assert indexes[thread] is None and cursors[thread] is None, thread
        kept = await index_of(worker, bystander)
        assert kept == before[bystander], "the bystander's index changed"
        for digest in kept:
            assert blocks[f"{bystander}/{digest}"] is not None, "the bystander lost a block"
        assert cursors[bystander] is not None


async def test_blocks_a_forgotten_index_dropped_are_tombstoned_without_an_erase(kafka_bootstrap: str,
                                                                                tmp_path: Path) -> None:
    """Without an erase, the blocks the first list after a restart dropped unknowingly (the observation blocks a
    clear removed) do not stay on the compacted topic: they are tombstoned within a round of the worker's sweep
    (one second here: the roll interval of a 4 s segment), while every block the thread's index lists stays."""
    thread = "ctx-dropped"
    process = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=PARTITIONS,
                             extra={"OM_CONTEXT_WIRE": "v2", "OM_LIFECYCLE_SEGMENT_S": "4"})
    async with started(process) as worker, agent_for(worker) as agent:
        await converse(agent, thread, "ana", 6)
        before = await observed(worker, agent, thread, "ana")
    async with started(process) as worker, agent_for(worker) as agent:
        await agent.send({"schema": "om.command/v1", "command_id": "clear", "thread_id": thread, "command": "clear"},
                         key=thread.encode(), topic="commands")
        after = await until_index(worker, thread, lambda blocks: blocks != before)
        dropped = set(before) - set(after)
        assert dropped, "the clear dropped no block: the scenario did not happen"
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            blocks = await latest_per_key(kafka_bootstrap, worker.topics["context_blocks"])
            holding = {split_block_key(key)[1] for key, value in blocks.items()
                       if value is not None and block_thread_of(key) == thread}
            if not holding & dropped:
                break
            assert asyncio.get_running_loop().time() < deadline, f"dropped blocks still hold text\n{worker.tail()}"
            await asyncio.sleep(1)
        assert set(after) <= holding, "a block the index lists was tombstoned"
        assert await index_of(worker, thread) == after


def block_thread_of(key: str) -> str | None:
    return split_block_key(key)[0] if len(key) > 23 else None
