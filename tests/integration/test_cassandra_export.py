"""Export and import on a real Apache Cassandra: the shared checks of ``tests/support/export_contract.py`` from one
keyspace into another, and what an export of a long conversation costs in memory."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from cassandra.cluster import Cluster

from om_stream.adapters.cassandra_store import CassandraContentStore, migrate
from om_stream.adapters.cassandra_store.export import MESSAGE_PAGE
from om_stream.core.messages import Message, TextPart
from om_stream.ports import ExportSource
from om_stream.runtime.exporter import ExportSpec, HeldStates, export_lines, write_lines
from om_stream.settings import CassandraSettings
from tests.support.export_contract import EXPORT_CHECKS
from tests.support.store_contract import T0


def _drop(hosts: str, keyspace: str) -> None:
    (host, port), = CassandraSettings(hosts=hosts).contact_points()
    cluster = Cluster([host], port=port, protocol_version=5)
    try:
        cluster.connect().execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=60)
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def keyspaces(cassandra_hosts: str) -> Iterator[tuple[CassandraSettings, CassandraSettings]]:
    pair = tuple(CassandraSettings(hosts=cassandra_hosts, keyspace=f"it_export_{name}_{uuid.uuid4().hex[:8]}",
                                   retry_deadline_s=20) for name in ("a", "b"))
    for settings in pair:
        migrate(settings)
    yield pair  # type: ignore[misc]
    for settings in pair:
        _drop(cassandra_hosts, settings.keyspace)


@pytest.fixture
async def stores(keyspaces: tuple[CassandraSettings, CassandraSettings]) \
        -> AsyncIterator[tuple[CassandraContentStore, CassandraContentStore]]:
    source, target = (CassandraContentStore(settings) for settings in keyspaces)
    await source.start()
    await target.start()
    yield source, target
    await source.close()
    await target.close()


def test_the_cassandra_store_is_an_export_source(keyspaces: tuple[CassandraSettings, CassandraSettings]) -> None:
    assert isinstance(CassandraContentStore(keyspaces[0]), ExportSource)


@pytest.mark.parametrize("check", EXPORT_CHECKS, ids=lambda c: c.__name__)
async def test_cassandra_store_export_contract(stores: tuple[CassandraContentStore, CassandraContentStore],
                                               check: Any) -> None:
    await check(*stores, f"{uuid.uuid4().hex[:6]}-")


async def test_an_export_holds_a_page_of_rows_at_a_time(
        stores: tuple[CassandraContentStore, CassandraContentStore]) -> None:
    """6,000 messages of 2 KB over three threads and a year (many 10-day partitions): the export's traced memory
    (the driver's included) stays a few pages, far below the 13 MB it writes."""
    source, _ = stores
    resource = f"big-{uuid.uuid4().hex[:6]}"
    text = "y" * 2000
    count = 6000
    pending = []
    for i in range(count):
        thread = f"{resource}-t{i % 3}"
        message = Message(message_id=f"m{i}", thread_id=thread, resource_id=resource, role="user",
                          created_at=T0 + timedelta(hours=1.5 * i), parts=(TextPart(text=text),))
        pending.append(source.put_message(thread, message, i // 3, 500))
        if len(pending) == 200:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)
    written = 0

    async def sink(chunk: bytes) -> None:
        nonlocal written
        written += len(chunk)

    spec = ExportSpec(resource, source, HeldStates({}), "thread", "o200k_base")
    gc.collect()
    tracemalloc.start()
    try:
        size = await write_lines(export_lines(spec), sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size == written > count * 2000
    page = MESSAGE_PAGE * 2300
    assert peak < 4 * page < written / 2.5, (peak, page, written)
