"""The recall tool against the SQLite store and a Qdrant local-mode index: every mode and parameter."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from om_stream.adapters.embedders import OfflineMiniLMEmbedder
from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.config import RetrievalConfig
from om_stream.runtime.recall_service import RecallService
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


async def test_a_filter_that_skips_a_long_stretch_says_where_to_read_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rare author far into a long shared thread: the scan stops at its bound, and the answer says the thread goes
    on and from which cursor, instead of reading as "no messages by Ana"."""
    import re
    from datetime import UTC, datetime, timedelta

    from om_stream.core.messages import Author, Message, TextPart
    from om_stream.core.recall import MessagesResult, RecallScope
    from om_stream.runtime import recall_service

    monkeypatch.setattr(recall_service, "MAX_SCAN", 20)  # the bound, scaled down: 5,000 messages in production
    store = SqliteContentStore(":memory:")
    service = RecallService(store, COUNTER.count)
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    ana, bot = Author(id="u-ana", name="Ana", kind="human"), Author(id="bot", kind="agent")
    for i in range(60):
        author = ana if i == 45 else bot
        await store.put_message("t", Message(
            message_id=f"m-{i:02d}", thread_id="t", resource_id="acme", role="user" if i == 45 else "assistant",
            created_at=start + timedelta(minutes=i), parts=(TextPart(text=f"message {i}"),), author=author), i, 3)
    scope = RecallScope("acme", "t")
    first = await service.recall(scope, {"threadId": "current", "author": "Ana"})
    assert isinstance(first, MessagesResult) and first.count == 0 and first.has_next_page
    assert "no messages by" not in first.messages and "the thread goes on" in first.messages
    found: MessagesResult = first
    for _ in range(5):  # follow the notes, as an agent would
        if found.count:
            break
        cursor = re.search(r'cursor="([^"]+)"', found.messages)
        assert cursor is not None, found.messages
        result = await service.recall(scope, {"cursor": cursor.group(1), "author": "Ana"})
        assert isinstance(result, MessagesResult)
        found = result
    assert found.count == 1 and "m-45" in found.messages and "message 45" in found.messages
    backward = await service.recall(scope, {"threadId": "current", "author": "Ana", "anchor": "end"})
    assert isinstance(backward, MessagesResult) and backward.count == 1 and "m-45" in backward.messages
    await store.close()


async def test_the_index_filters_a_search_by_author_and_keeps_the_author_with_each_point() -> None:
    """Ana's one message among many of others: a search by author asks the index for her points only, so it is
    found however many closer points others wrote."""
    from om_stream.core.messages import Author
    from om_stream.ports import RecallPoint

    index = QdrantRecallIndex(EMBEDDER.model_id, EMBEDDER.dimension)
    ana, bot = Author(id="u-ana", name="Ana", kind="human"), Author(id="bot", kind="agent")
    texts = [f"the espresso machine refund, reply {i}" for i in range(60)] + ["my espresso machine broke"]
    vectors = await EMBEDDER.embed(texts)
    points = [RecallPoint(resource_id="acme", record_key="t", thread_id="t", kind="message", source_id=f"m-{i}",
                          chunk=0, text=text, observed_at=1_000 + i, vector=tuple(vector),
                          author_keys=(ana if i == 60 else bot).keys)
              for i, (text, vector) in enumerate(zip(texts, vectors, strict=True))]
    await index.upsert(points)
    query = (await EMBEDDER.embed(["espresso machine refund"]))[0]
    nearest = await index.query(query, resource_id="acme", limit=10)
    assert "m-60" not in {h.source_id for h in nearest}  # everyone's nearest points: Ana's is not among them
    for who in ("Ana", "ANA", "u-ana"):
        assert [h.source_id for h in await index.query(query, resource_id="acme", limit=10, author=who)] == ["m-60"]
    assert await index.query(query, resource_id="acme", limit=10, author="U-ANA") == []  # an id matches as it is
    assert await index.query(query, resource_id="other", limit=10, author="Ana") == []  # never another tenant's
    kept = {p.source_id: p.author_keys async for p in index.resource_points("acme")}
    assert kept["m-60"] == ("id:u-ana", "name:ana") and kept["m-0"] == ("id:bot", "name:bot")
    await index.close()
