"""The SQLite content store (the embedded default): the shared store contract, plus what is SQLite's own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.errors import StorageError
from om_stream.ports import ContentStore, RecallStore
from tests.support.store_contract import CHECKS, T0, message


@pytest.fixture
async def store() -> AsyncIterator[SqliteContentStore]:
    s = SqliteContentStore(":memory:")
    yield s
    await s.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_store_contract(store: SqliteContentStore, check) -> None:
    await check(store, "p-")


def test_it_is_a_content_store_and_a_recall_store() -> None:
    s = SqliteContentStore()
    assert isinstance(s, ContentStore) and isinstance(s, RecallStore)


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
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1


async def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "future.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    store = SqliteContentStore(path)
    with pytest.raises(StorageError, match="newer than this om-stream"):
        await store.open()
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
