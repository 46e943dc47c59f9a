"""The Cassandra content store on a real Apache Cassandra 5.0: migrations, every store operation, and the recall
tool on top of it (one keyspace for this module, ids prefixed per test)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import hypothesis
import pytest
from hypothesis import strategies as st

from om_stream.adapters.cassandra_store import CassandraContentStore, load_migrations, migrate
from om_stream.adapters.embedders import OfflineMiniLMEmbedder
from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.errors import StorageError
from om_stream.ports import ContentStore, CycleResults, RecallStore
from om_stream.runtime.recall_service import RecallService
from om_stream.settings import CassandraSettings
from tests.support.leak_property import (
    Thread,
    calls,
    check_no_leak,
    rename,
    worlds,
)
from tests.support.recall_scenarios import ALL_CHECKS, SEARCH_CHECKS, World, seed
from tests.support.retention_contract import RECALL_RETENTION_CHECKS, RETENTION_CHECKS
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
from tests.support.store_scans import cql

COUNTER = TiktokenCounter()


@pytest.fixture(scope="module")
def settings(cassandra_hosts: str) -> Iterator[CassandraSettings]:
    keyspace = f"it_store_{uuid.uuid4().hex[:8]}"
    configured = CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace, retry_deadline_s=20)
    report = migrate(configured)
    assert report.created_keyspace and report.applied == [m.version for m in load_migrations()]
    yield configured
    cql(cassandra_hosts, f"DROP KEYSPACE IF EXISTS {keyspace}")


@pytest.fixture
async def store(settings: CassandraSettings) -> AsyncIterator[CassandraContentStore]:
    s = CassandraContentStore(settings)
    await s.start()
    yield s
    await s.close()


def _prefix() -> str:
    return f"{uuid.uuid4().hex[:6]}-"


# -- migrations --------------------------------------------------------------------------------------------------


def test_migrate_again_changes_nothing(settings: CassandraSettings) -> None:
    report = migrate(settings)
    assert not report.created_keyspace and report.applied == [] and report.already == [1, 2, 3, 4, 5]
    rows = cql(settings.hosts, f"SELECT version, name, checksum FROM {settings.keyspace}.schema_migrations")[0]
    assert sorted((r.version, r.name) for r in rows) == [  # type: ignore[attr-defined]
        (1, "initial"), (2, "cycle_results"), (3, "working_memory"), (4, "erasure"), (5, "retention")]


async def test_a_missing_keyspace_is_refused_with_the_command_that_fixes_it(cassandra_hosts: str) -> None:
    store = CassandraContentStore(CassandraSettings(hosts=cassandra_hosts, keyspace="it_never_created"))
    with pytest.raises(StorageError, match=r"does not exist: run `om-stream migrate`"):
        await store.start()
    with pytest.raises(StorageError, match="does not exist"):
        await store.get_messages(["m1"])  # every operation refuses, not only connect()


async def test_an_unmigrated_keyspace_is_refused(cassandra_hosts: str) -> None:
    keyspace = f"it_bare_{uuid.uuid4().hex[:8]}"
    cql(cassandra_hosts, f"CREATE KEYSPACE {keyspace} WITH replication = "
                         "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        store = CassandraContentStore(CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace))
        with pytest.raises(StorageError, match=r"is not migrated .*run `om-stream migrate`"):
            await store.start()
        cql(cassandra_hosts, f"CREATE TABLE {keyspace}.schema_migrations (version int PRIMARY KEY, name text, "
                             "checksum text, applied_at timestamp)")
        with pytest.raises(StorageError, match=r"missing 0001_initial, 0002_cycle_results, 0003_working_memory, "
                                               r"0004_erasure, 0005_retention"):
            await CassandraContentStore(CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace)).start()
    finally:
        cql(cassandra_hosts, f"DROP KEYSPACE IF EXISTS {keyspace}")


async def test_start_refuses_a_keyspace_migrated_only_to_0001_until_migrate_runs(cassandra_hosts: str) -> None:
    keyspace = f"it_v1_{uuid.uuid4().hex[:8]}"
    configured = CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace)
    first = load_migrations()[0]
    cql(cassandra_hosts, f"CREATE KEYSPACE {keyspace} WITH replication = "
                         "{'class': 'SimpleStrategy', 'replication_factor': 1}",
        f"CREATE TABLE {keyspace}.schema_migrations (version int PRIMARY KEY, name text, checksum text, "
        "applied_at timestamp)",
        *(s.replace("CREATE TABLE IF NOT EXISTS ", f"CREATE TABLE IF NOT EXISTS {keyspace}.", 1)
          for s in first.statements),
        f"INSERT INTO {keyspace}.schema_migrations (version, name, checksum) VALUES (1, 'initial', "
        f"'{first.checksum}')")
    try:
        store = CassandraContentStore(configured)
        with pytest.raises(StorageError, match=rf"keyspace '{keyspace}' is not migrated \(missing "
                                               r"0002_cycle_results, 0003_working_memory, 0004_erasure, "
                                               r"0005_retention\): run "
                                               r"`om-stream migrate`"):
            await store.start()
        report = await asyncio.to_thread(migrate, configured)
        assert report.applied == [2, 3, 4, 5] and report.already == [1]
        await store.start()  # the same store, once migrated
        await store.start()  # idempotent
        await store.put_result("req", b"answer", record_key="rec")
        assert await store.get_result("req") == b"answer"
        await store.close()
        with pytest.raises(StorageError, match="closed"):
            await store.start()
    finally:
        cql(cassandra_hosts, f"DROP KEYSPACE IF EXISTS {keyspace}")


async def test_start_refuses_an_unreachable_contact_point_naming_it() -> None:
    store = CassandraContentStore(CassandraSettings(hosts="127.0.0.1:1", connect_timeout_s=2))
    with pytest.raises(StorageError, match=r"Cassandra at 127\.0\.0\.1:1 unreachable \(.*refused.*\): check "
                                           r"cassandra\.hosts \(OM_CASSANDRA_HOSTS\)"):
        await store.start()
    await store.close()


def test_a_migration_changed_after_it_was_applied_is_refused(cassandra_hosts: str) -> None:
    keyspace = f"it_drift_{uuid.uuid4().hex[:8]}"
    configured = CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace)
    try:
        migrate(configured)
        cql(cassandra_hosts, f"UPDATE {keyspace}.schema_migrations SET checksum = 'edited' WHERE version = 1")
        with pytest.raises(StorageError, match="was changed after it was applied"):
            migrate(configured)
    finally:
        cql(cassandra_hosts, f"DROP KEYSPACE IF EXISTS {keyspace}")


# -- the store contract ------------------------------------------------------------------------------------------


def test_it_is_a_content_store_a_recall_store_and_keeps_cycle_results(settings: CassandraSettings) -> None:
    store = CassandraContentStore(settings)
    assert isinstance(store, ContentStore) and isinstance(store, RecallStore) and isinstance(store, CycleResults)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_store_contract(store: CassandraContentStore, check) -> None:
    await check(store, _prefix())


@pytest.mark.parametrize("check", ERASURE_CHECKS, ids=lambda c: c.__name__)
async def test_erasure_contract(store: CassandraContentStore, check) -> None:
    await check(store, _prefix())


@pytest.mark.parametrize("check", RETENTION_CHECKS + RECALL_RETENTION_CHECKS, ids=lambda c: c.__name__)
async def test_retention_contract(store: CassandraContentStore, check) -> None:
    await check(store, _prefix())


async def test_an_erased_thread_reused_shows_in_listings_again(store: CassandraContentStore) -> None:
    """The thread listing's first and newest message times carry timestamps of their own: erased with exactly
    those, so a thread id used again after its erase is listed again."""
    p = _prefix()
    ana, thread = f"{p}ana", f"{p}t"
    await store.put_message(thread, message(f"{p}m0", thread, ana, T0), 0, 5)
    await store.put_message(thread, message(f"{p}m1", thread, ana, T0 + timedelta(days=1)), 1, 5)
    await store.erase_thread(ana, thread)
    await store.erase_record(thread, ana)
    assert await store.get_thread(ana, thread) is None
    fresh = CassandraContentStore(store.settings)  # another worker: none of the first one's caches
    try:
        later = T0 + timedelta(days=3)
        await fresh.put_message(thread, message(f"{p}m9", thread, ana, later), 0, 5)
        listed = await fresh.get_thread(ana, thread)
        assert listed is not None and listed.updated_at == int(later.timestamp() * 1000)
        assert [m.message.message_id for m in (await fresh.list_thread_messages(ana, thread, limit=10)).messages] \
            == [f"{p}m9"]
    finally:
        await fresh.close()


# -- model-call results and leases -------------------------------------------------------------------------------


@pytest.mark.parametrize("check", RESULT_CHECKS, ids=lambda c: c.__name__)
async def test_cycle_results_contract(store: CassandraContentStore, check) -> None:
    await check(store, _prefix())


async def test_results_expire_after_cycle_result_ttl_s(settings: CassandraSettings) -> None:
    store = CassandraContentStore(settings.model_copy(update={"cycle_result_ttl_s": SHORT_RESULT_TTL_S}))
    try:
        await check_results_expire(store, _prefix())
    finally:
        await store.close()


async def test_claims_race_safely_across_workers(settings: CassandraSettings) -> None:
    # separate stores stand for separate workers: one session each, the lightweight transaction decides
    workers = [CassandraContentStore(settings) for _ in range(3)]
    try:
        await asyncio.gather(*(w.start() for w in workers))
        await check_claims_race_across(workers, _prefix())
    finally:
        await asyncio.gather(*(w.close() for w in workers))


async def test_get_messages_can_be_limited_to_a_tenant(store: CassandraContentStore) -> None:
    p = _prefix()
    await store.put_message(f"{p}t", message(f"{p}m1", f"{p}t", f"{p}r1", T0, "mine"), 0, 1)
    await store.put_message(f"{p}u", message(f"{p}m1", f"{p}u", f"{p}r2", T0, "theirs"), 0, 1)
    cold = CassandraContentStore(store.settings)  # no cache: straight from the tables
    try:
        assert [m.text for m in await cold.get_messages([f"{p}m1"], resource_id=f"{p}r1")] == ["mine"]
        assert [m.text for m in await cold.get_messages([f"{p}m1"], resource_id=f"{p}r2")] == ["theirs"]
        assert (await cold.get_message(f"{p}r1", f"{p}m1")).message.text == "mine"  # type: ignore[union-attr]
    finally:
        await cold.close()


async def test_rows_expire_after_the_configured_ttl(settings: CassandraSettings) -> None:
    p = _prefix()
    store = CassandraContentStore(settings.model_copy(update={"ttl_seconds": 2, "message_cache_size": 0}))
    try:
        await store.put_message(f"{p}t", message(f"{p}m1", f"{p}t", f"{p}r", T0), 0, 1)
        assert len(await store.get_messages([f"{p}m1"])) == 1
        assert await store.get_thread(f"{p}r", f"{p}t") is not None
        await asyncio.sleep(3.5)
        assert await store.get_messages([f"{p}m1"]) == []
        assert await store.count_thread_messages(f"{p}r", f"{p}t") == 0
        assert await store.get_thread(f"{p}r", f"{p}t") is None
    finally:
        await store.close()


async def test_an_unreachable_consistency_level_fails_as_a_storage_error_after_retrying(
        settings: CassandraSettings) -> None:
    # one node cannot acknowledge THREE replicas: Unavailable, retried with backoff until the deadline
    store = CassandraContentStore(settings.model_copy(update={"write_consistency": "THREE", "retry_deadline_s": 1.5,
                                                              "retry_base_delay_s": 0.2}))
    p = _prefix()
    try:
        with pytest.raises(StorageError, match=r"Unavailable.*|failed after \d+ attempts"):
            await store.put_message(f"{p}t", message(f"{p}m", f"{p}t", f"{p}r", T0), 0, 1)
        assert store.retries >= 2
    finally:
        await store.close()


async def test_a_long_thread_pages_across_buckets_in_order(store: CassandraContentStore) -> None:
    p = _prefix()
    r, t = f"{p}r", f"{p}t"
    await asyncio.gather(*(store.put_message(t, message(f"{p}m{i:03d}", t, r, T0 + timedelta(days=i, seconds=i)),
                                             i, 1) for i in range(120)))
    ids: list[str] = []
    after = None
    while True:
        page = await store.list_thread_messages(r, t, limit=25, after=after)
        ids += [s.message.message_id for s in page.messages]
        if not page.has_more:
            break
        after = page.messages[-1].position
    assert ids == [f"{p}m{i:03d}" for i in range(120)]
    assert await store.count_thread_messages(r, t) == 120


async def test_messages_of_threads_written_at_once_are_stored_as_one_by_one(store: CassandraContentStore) -> None:
    """A worker writes an input batch's messages at once, and the store sends a thread's together
    (``message_batches.py``): every message is there, by thread and by id, and each thread's listing holds its
    earliest and newest message times, whatever order the messages came in."""
    p = _prefix()
    r = f"{p}r"
    offsets = [7, 3, 11, 0, 5, 9, 1, 12, 2, 8, 4, 10, 6]  # minutes, out of order
    written = [(t, i, message(f"{p}{t}-m{i:02d}", f"{p}{t}", r, T0 + timedelta(minutes=m), "x" * (40 * i)))
               for t in ("a", "b") for i, m in enumerate(offsets)]
    await asyncio.gather(*(store.put_message(m.thread_id, m, i, 3) for _, i, m in written))
    cold = CassandraContentStore(store.settings)  # no cache: straight from the tables
    try:
        for t in ("a", "b"):
            listed = await cold.get_thread(r, f"{p}{t}")
            assert listed is not None
            assert listed.created_at == int(T0.timestamp() * 1000)
            assert listed.updated_at == int((T0 + timedelta(minutes=12)).timestamp() * 1000)
            page = await cold.list_thread_messages(r, f"{p}{t}", limit=50)
            assert [s.message.message_id for s in page.messages] == [
                f"{p}{t}-m{i:02d}" for _, i in sorted((m, i) for i, m in enumerate(offsets))]
        ids = [m.message_id for _, _, m in written]
        assert [m.message_id for m in await cold.get_messages(ids, resource_id=r)] == ids
    finally:
        await cold.close()


# -- the recall tool on Cassandra --------------------------------------------------------------------------------


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda c: c.__name__)
async def test_recall(store: CassandraContentStore, check) -> None:
    index = QdrantRecallIndex(EMBEDDER.model_id, EMBEDDER.dimension) if check in SEARCH_CHECKS else None
    service = RecallService(store, COUNTER.count, index=index, embedder=EMBEDDER if index else None)
    world: World = await seed(store, _prefix(), service)
    await check(world)
    if index is not None:
        await index.close()


EMBEDDER = OfflineMiniLMEmbedder()


@hypothesis.settings(max_examples=30, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow, hypothesis.HealthCheck.data_too_large,
                                            hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(data=st.data(), world=worlds())
def test_no_recall_returns_anything_of_another_resource(settings: CassandraSettings, data: st.DataObject,
                                                        world: list[Thread]) -> None:
    prefix = f"x{uuid.uuid4().hex[:6]}"
    world = rename(world, prefix)
    queries = [data.draw(calls(world)) for _ in range(8)]

    check_no_leak(CassandraContentStore(settings), world, queries)
