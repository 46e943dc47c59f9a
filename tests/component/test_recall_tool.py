"""The recall tool against the SQLite store and a Qdrant local-mode index: every mode and parameter."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from om_stream.adapters.embedders import OfflineMiniLMEmbedder
from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.recall_service import RecallService
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.config import RetrievalConfig
from tests.support.recall_scenarios import MESSAGE_CHECKS, SEARCH_CHECKS, World, seed

COUNTER = TiktokenCounter()
EMBEDDER = OfflineMiniLMEmbedder()


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = SqliteContentStore(":memory:")
    yield await seed(store, "", RecallService(store, COUNTER.count))
    await store.close()


@pytest.fixture
async def search_world() -> AsyncIterator[World]:
    store = SqliteContentStore(":memory:")
    index = QdrantRecallIndex(EMBEDDER.model_id, EMBEDDER.dimension)
    yield await seed(store, "", RecallService(store, COUNTER.count, index=index, embedder=EMBEDDER))
    await index.close()
    await store.close()


@pytest.mark.parametrize("check", MESSAGE_CHECKS, ids=lambda c: c.__name__)
async def test_recall(world: World, check) -> None:
    await check(world)


@pytest.mark.parametrize("check", SEARCH_CHECKS, ids=lambda c: c.__name__)
async def test_recall_search(search_world: World, check) -> None:
    await check(search_world)


async def test_instructions_offer_search_only_when_it_works(world: World) -> None:
    without = world.service.instructions(RetrievalConfig(vector=True))
    assert 'mode "search"' not in without  # no index: never point the agent at a mode it cannot use
    index = QdrantRecallIndex(EMBEDDER.model_id, EMBEDDER.dimension)
    service = RecallService(world.service.store, COUNTER.count, index=index, embedder=EMBEDDER)
    assert 'mode "search"' in service.instructions(RetrievalConfig(vector=True))
    assert service.instructions(None) == ""
    await index.close()


async def test_indexing_is_idempotent_and_a_forgotten_record_leaves_the_index(search_world: World) -> None:
    from om_stream.core.commands import IndexForRecall

    service = search_world.service
    index = service.index
    assert isinstance(index, QdrantRecallIndex)
    before = await index.count("alice")
    again = await service.index_segment(IndexForRecall("thread:trip", "alice", ("thread:trip",), "g-trip-1"))
    assert again > 0 and await index.count("alice") == before
    assert await service.index_segment(IndexForRecall("thread:trip", "bob", ("thread:trip",), "g-trip-1")) == 0
    await service.forget("alice", "thread:trip")
    assert 0 < await index.count("alice") < before  # only the work thread's points remain
    assert await index.count("bob") > 0
