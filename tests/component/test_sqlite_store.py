"""The SQLite content store (the embedded default): the shared store contract, plus what is SQLite's own."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from om_stream.adapters.sqlite_schema import MIGRATIONS
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.errors import StorageError
from om_stream.ports import ContentStore, CycleResults, RecallStore
from tests.support.retention_contract import (
    RECALL_RETENTION_CHECKS,
    RETENTION_CHECKS,
    check_a_purge_removes_what_expired_and_only_the_tenants,
)
from tests.support.store_contract import (
    CHECKS,
    ERASURE_CHECKS,
    RESULT_CHECKS,
    SHORT_RESULT_TTL_S,
    T0,
    check_claims_race_across,
    check_results_expire,
    message,
)


@pytest.fixture
async def store() -> AsyncIterator[SqliteContentStore]:
    s = SqliteContentStore(":memory:")
    yield s
    await s.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_store_contract(store: SqliteContentStore, check) -> None:
    await check(store, "p-")


@pytest.mark.parametrize("check", RESULT_CHECKS, ids=lambda c: c.__name__)
async def test_cycle_results_contract(store: SqliteContentStore, check) -> None:
    await check(store, "p-")


@pytest.mark.parametrize("check", ERASURE_CHECKS, ids=lambda c: c.__name__)
async def test_erasure_contract(store: SqliteContentStore, check) -> None:
    await check(store, "p-")


@pytest.mark.parametrize("check", ERASURE_CHECKS[:2], ids=lambda c: c.__name__)
async def test_an_erase_leaves_no_copy_in_the_files(tmp_path: Path, check) -> None:
    """The erased subjects' text is gone from the database file and its WAL, not only from what queries return:
    the other tenant's is still there."""
    path = tmp_path / "om.db"
    store = SqliteContentStore(path)
    try:
        await check(store, "p-")
        files = b"".join(f.read_bytes() for f in tmp_path.iterdir() if f.is_file())
        assert b"words of p-" in files  # the other tenant's (and the fresh) messages
        for erased in (b"words of p-t1 ", b"observed in p-t1", b"title of p-t1", b"answer about p-t1",
                       b"words of p-ana-t", b"observed in p-ana-t", b"reflected in p-ana-t", b"answer about p-ana-t"):
            assert erased not in files, erased
    finally:
        await store.close()


@pytest.mark.parametrize("check", RETENTION_CHECKS + RECALL_RETENTION_CHECKS, ids=lambda c: c.__name__)
async def test_retention_contract(store: SqliteContentStore, check) -> None:
    await check(store, "p-")


async def test_a_purge_leaves_no_copy_in_the_files(tmp_path: Path) -> None:
    """What a retention purge removed is gone from the database file and its WAL, not only from what queries
    return; what it kept is still there."""
    store = SqliteContentStore(tmp_path / "om.db")
    try:
        await check_a_purge_removes_what_expired_and_only_the_tenants(store, "p-")
        files = b"".join(f.read_bytes() for f in tmp_path.iterdir() if f.is_file())
        for removed in (b"day 0 of p-t1", b"day 13 of p-t1", b"old of p-t1", b"mid of p-t1", b"title of p-t1"):
            assert removed not in files, removed
        for kept in (b"cut of p-t1", b"reflected p-t1", b"day 0 of p-t2", b"title of p-t2"):
            assert kept in files, kept
    finally:
        await store.close()


async def test_results_expire_after_the_result_ttl() -> None:
    store = SqliteContentStore(result_ttl_s=SHORT_RESULT_TTL_S)
    try:
        await check_results_expire(store, "p-")
    finally:
        await store.close()


def test_it_is_a_content_store_a_recall_store_and_keeps_cycle_results() -> None:
    s = SqliteContentStore()
    assert isinstance(s, ContentStore) and isinstance(s, RecallStore) and isinstance(s, CycleResults)


async def test_a_file_database_survives_reopening_and_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "om.db"
    first = SqliteContentStore(path)
    await first.put_message("t", message("m1", "t", "r", T0, "kept"), 0, 1)
    await first.close()
    second = SqliteContentStore(path)
    assert [m.text for m in await second.get_messages(["m1"])] == ["kept"]
    await second.close()
    import sqlite3

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


async def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "future.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    store = SqliteContentStore(path)
    with pytest.raises(StorageError, match="newer than this om-stream"):
        await store.start()
    await store.close()


async def test_start_creates_the_schema_once(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    store = SqliteContentStore(path)
    await store.start()
    await store.start()  # idempotent
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"messages", "segments", "generations", "cycle_results"} <= tables
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    await store.close()


async def test_start_refuses_a_path_it_cannot_open_with_a_storage_error(tmp_path: Path) -> None:
    store = SqliteContentStore(tmp_path)  # a directory, not a database file
    with pytest.raises(StorageError, match=r"SQLite database .* cannot be opened .*check that the path names a file"):
        await store.start()
    await store.close()
    (tmp_path / "taken").write_text("a file where a folder should be")
    store = SqliteContentStore(tmp_path / "taken" / "om.db")
    with pytest.raises(StorageError, match="cannot be opened"):
        await store.start()
    await store.close()


async def test_a_database_of_schema_version_1_is_upgraded_on_start(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(MIGRATIONS[0])
        conn.execute("PRAGMA user_version = 1")
    old = SqliteContentStore(path)
    await old.start()
    await old.put_message("t", message("m1", "t", "r", T0, "from before"), 0, 1)
    await old.put_result("req", b"answer", record_key="rec")
    await old.close()
    again = SqliteContentStore(path)
    assert [m.text for m in await again.get_messages(["m1"])] == ["from before"]
    assert await again.get_result("req") == b"answer"
    await again.close()


async def test_claims_race_safely_across_stores_on_one_file(tmp_path: Path) -> None:
    # two stores on one file stand for two processes: each has its own connection and thread
    stores = [SqliteContentStore(tmp_path / "shared.db") for _ in range(2)]
    try:
        await asyncio.gather(*(s.start() for s in stores))
        await check_claims_race_across(stores, "p-", rounds=5)
    finally:
        for s in stores:
            await s.close()


async def test_rows_holding_nothing_live_are_deleted_by_later_writes(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    store = SqliteContentStore(path, result_ttl_s=0.2)
    await store.put_result("old-result", b"x", record_key="rec")
    await store.claim("old-lease", "worker-a", 0.2)
    await store.put_result("kept", b"y", record_key="rec")
    await store.claim("kept", "worker-a", 60)  # a live lease keeps the row after its result expired
    time.sleep(0.4)
    await store.put_result("new", b"z", record_key="rec")
    with sqlite3.connect(path) as conn:
        keys = {r[0] for r in conn.execute("SELECT request_key FROM cycle_results")}
    assert keys == {"kept", "new"}
    assert await store.get_result("kept") is None and await store.claim("kept", "worker-b", 60) == "worker-a"
    await store.close()


async def test_a_closed_store_refuses_work_with_a_storage_error() -> None:
    store = SqliteContentStore()
    await store.close()
    with pytest.raises(StorageError, match="closed"):
        await store.get_messages(["m1"])


async def test_get_messages_can_be_limited_to_a_tenant(store: SqliteContentStore) -> None:
    await store.put_message("t", message("m1", "t", "r1", T0, "mine"), 0, 1)
    await store.put_message("u", message("m1", "u", "r2", T0, "theirs"), 0, 1)  # a colliding id, other tenant
    assert [m.text for m in await store.get_messages(["m1"], resource_id="r1")] == ["mine"]
    assert [m.text for m in await store.get_messages(["m1"], resource_id="r2")] == ["theirs"]
    assert (await store.get_message("r1", "m1")).message.text == "mine"  # type: ignore[union-attr]
