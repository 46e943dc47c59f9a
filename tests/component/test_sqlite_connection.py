"""The SQLite store's connection: operations run on the caller's thread only when they need not wait for a lock;
a write that finds another process's write lock waits on the connection's thread, without blocking the event
loop, and lands once the lock is released."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from om_stream.adapters.sqlite_store import SqliteContentStore
from tests.support.store_contract import T0, message


async def test_a_write_behind_another_writer_waits_off_the_loop_and_lands(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = SqliteContentStore(path, timeout_s=10)
    try:
        await store.start()
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        write = asyncio.create_task(store.put_message("t1", message("m1", "t1", "r1", T0, "hello"), 0, 3))
        ticks = 0
        began = time.monotonic()
        while time.monotonic() - began < 0.5:  # the loop keeps running while the write waits
            await asyncio.sleep(0.01)
            ticks += 1
        assert not write.done()
        assert ticks >= 10
        other.execute("COMMIT")
        other.close()
        await asyncio.wait_for(write, 10)
        assert [m.message_id for m in await store.get_messages(["m1"], resource_id="r1")] == ["m1"]
        # the lock is free again: the next write lands without the connection's thread
        await store.put_message("t1", message("m2", "t1", "r1", T0, "again"), 1, 3)
        assert (await store.count_thread_messages("r1", "t1")) == 2
    finally:
        await store.close()


async def test_writes_survive_reopening_after_many_commits(tmp_path: Path) -> None:
    """More commits than one checkpoint interval: every one is in the file after the store closes."""
    path = tmp_path / "memory.db"
    store = SqliteContentStore(path)
    try:
        for i in range(600):
            await store.put_message("t1", message(f"m{i}", "t1", "r1", T0, f"text {i}"), i, 3)
    finally:
        await store.close()
    reopened = SqliteContentStore(path)
    try:
        assert await reopened.count_thread_messages("r1", "t1") == 600
    finally:
        await reopened.close()
