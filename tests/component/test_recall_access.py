"""Access control, as a property over random data and random recall calls (SQLite store, Qdrant local index):
a recall scoped to resource R never returns anything of another resource, in any mode."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.recall_service import RecallService
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from tests.support.leak_property import HashEmbedder, Thread, assert_no_leak, calls, seed_world, worlds

COUNTER = TiktokenCounter()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), world=worlds())
def test_no_recall_returns_anything_of_another_resource(data: st.DataObject, world: list[Thread]) -> None:
    queries = [data.draw(calls(world)) for _ in range(8)]

    async def run() -> None:
        store = SqliteContentStore(":memory:")
        embedder = HashEmbedder()
        index = QdrantRecallIndex(embedder.model_id, embedder.dimension)
        service = RecallService(store, COUNTER.count, index=index, embedder=embedder)
        try:
            await seed_world(store, service, world)
            for query in queries:
                await assert_no_leak(service, world, query)
        finally:
            await index.close()
            await store.close()

    asyncio.run(run())
