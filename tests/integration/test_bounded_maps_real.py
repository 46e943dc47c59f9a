"""What the Cassandra store remembers of its own writes, and what the agent client remembers of its publications,
stays bounded on real servers, and forgetting changes nothing a reader sees (the companion of
``tests/component/test_bounded_maps.py``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import pytest

from om_stream.adapters.cassandra_store import CassandraContentStore, migrate
from om_stream.adapters.cassandra_store import store as cassandra_store
from om_stream.adapters.cassandra_store.queries import BUCKET_MS
from om_stream.client import client as agent_client
from om_stream.client.client import ClientTopics, OMClient
from om_stream.core.messages import Message
from om_stream.runtime.worker.topics import ensure_topics
from om_stream.settings import CassandraSettings, KafkaSettings, LifecycleSettings
from tests.support.store_scans import cql

START_MS = int(datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp() * 1000)
KEPT = 64


@pytest.fixture(scope="module")
def settings(cassandra_hosts: str) -> Iterator[CassandraSettings]:
    keyspace = f"it_bounded_{uuid.uuid4().hex[:8]}"
    configured = CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace, retry_deadline_s=20)
    migrate(configured)
    yield configured
    cql(cassandra_hosts, f"DROP KEYSPACE IF EXISTS {keyspace}")


@pytest.fixture
async def store(settings: CassandraSettings, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[CassandraContentStore]:
    monkeypatch.setattr(cassandra_store, "REMEMBERED", KEPT)
    s = CassandraContentStore(settings)
    await s.start()
    yield s
    await s.close()


def _message(thread: int, index: int) -> Message:
    # half a bucket apart: each thread's five messages span three buckets
    created = datetime.fromtimestamp((START_MS + index * BUCKET_MS // 2) / 1000, tz=UTC)
    return Message.model_validate({"message_id": f"th{thread}-m{index}", "thread_id": f"th{thread}",
                                   "resource_id": "tenant", "role": "user", "created_at": created.isoformat(),
                                   "parts": [{"type": "text", "text": f"note {index} of thread {thread}"}]})


async def test_the_cassandra_stores_memos_are_bounded_and_forgetting_them_loses_nothing(
        store: CassandraContentStore) -> None:
    threads = 400
    # each thread's messages out of time order, and every thread forgotten between two of its messages
    for index in (2, 0, 4, 1, 3):
        for first in range(0, threads, 50):
            await asyncio.gather(*(store.put_message(f"th{t}", _message(t, index), index, 5)
                                   for t in range(first, first + 50)))
            assert len(store._spans) <= KEPT and len(store._record_resources) <= KEPT
            assert len(store._buckets) <= KEPT
    for thread in (0, 137, threads - 1):
        summary = await store.get_thread("tenant", f"th{thread}")
        assert summary is not None
        assert (summary.created_at, summary.updated_at) == (START_MS, START_MS + 4 * BUCKET_MS // 2)
        page = await store.list_thread_messages("tenant", f"th{thread}", limit=10)
        assert [m.message.message_id for m in page.messages] == [f"th{thread}-m{i}" for i in range(5)]


async def test_the_client_remembers_the_message_ids_of_the_threads_it_published_to_last(
        kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_client, "THREADS_KEPT", 100)
    prefix = f"t{uuid.uuid4().hex[:8]}"
    # every topic named for this test: ensure_topics checks each one, and the shared broker may hold om.* topics
    # made by another run with other settings
    names = {field: f"{prefix}.{field.removeprefix('topic_')}" for field in KafkaSettings.model_fields
             if field.startswith("topic_")}
    kafka = KafkaSettings(bootstrap=kafka_bootstrap, partitions=1, replication=1, **names)
    await ensure_topics(kafka, LifecycleSettings(), {}, resource_scope=False)
    topics = ClientTopics(messages=kafka.topic_messages, context=kafka.topic_context)
    async with OMClient(kafka_bootstrap, topics=topics) as om:
        for thread in range(400):
            for index in range(3):
                message = _message(thread, index)
                await om.publish(message)
            assert len(om._sent) <= 100
        assert list(om._sent["th399"]) == ["th399-m0", "th399-m1", "th399-m2"]
        assert "th0" not in om._sent
