"""The worker's recall endpoint: the deployment's retrieval options apply to calls that carry none, a store that
cannot be browsed answers ``unavailable``, and indexing retries a failing embedder, then counts the failure."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from om_stream.adapters.embedders import OfflineMiniLMEmbedder
from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.commands import IndexForRecall
from om_stream.core.config import RetrievalConfig
from om_stream.errors import ModelError, WireDecodeError
from om_stream.observability.metrics import Metrics
from om_stream.runtime.recall import RecallEndpoint, decode_recall_request
from om_stream.runtime.recall_service import RecallService
from om_stream.wire.recall import RecallRequest
from tests.support.recall_scenarios import World, seed

COUNTER = TiktokenCounter()
EMBEDDER = OfflineMiniLMEmbedder()
SEGMENT = IndexForRecall("thread:trip", "alice", ("thread:trip",), "g-trip-1")


class FlakyEmbedder:
    """The offline embedder behind a provider that fails its first ``failures`` calls."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    @property
    def model_id(self) -> str:
        return EMBEDDER.model_id

    @property
    def dimension(self) -> int:
        return EMBEDDER.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ModelError("embedding provider returned 503")
        return await EMBEDDER.embed(texts)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    store = SqliteContentStore(":memory:")
    index = QdrantRecallIndex(EMBEDDER.model_id, EMBEDDER.dimension)
    yield await seed(store, "", RecallService(store, COUNTER.count, index=index, embedder=EMBEDDER))
    await index.close()
    await store.close()


def _search(**extra: object) -> RecallRequest:
    return RecallRequest.model_validate({"correlation_id": "c1", "resource_id": "alice",
                                         "arguments": {"mode": "search", "query": "pastry"}, **extra})


async def test_the_deployments_retrieval_options_apply_unless_the_call_brings_its_own(world: World) -> None:
    metrics = Metrics.create()
    endpoint = RecallEndpoint(world.service, metrics, retrieval=RetrievalConfig(vector=True))
    answered = await endpoint.answer(_search(), "http")
    assert answered.result is not None and answered.result.count > 0
    own = await endpoint.answer(_search(retrieval={"vector": False}), "http")
    assert own.result is not None and own.result.count == 0  # the caller turned search off for itself
    assert metrics.recall_requests.labels("http", "search", "ok")._value.get() == 2


async def test_a_memory_only_deployment_answers_unavailable() -> None:
    metrics = Metrics.create()
    answered = await RecallEndpoint(None, metrics).answer(_search(), "kafka")
    assert answered.error is not None and answered.error.code == "unavailable"
    assert "OM_MEMORY_STORE" in answered.error.message
    assert metrics.recall_requests.labels("kafka", "search", "unavailable")._value.get() == 1


async def test_indexing_retries_a_failing_embedder_then_counts_what_it_gave_up(world: World) -> None:
    metrics = Metrics.create()
    flaky = FlakyEmbedder(failures=2)
    service = RecallService(world.service.store, COUNTER.count, index=world.service.index, embedder=flaky)
    endpoint = RecallEndpoint(service, metrics, index_attempts=3, index_backoff_s=0.01)
    await endpoint.index(SEGMENT)
    assert flaky.calls == 3 and metrics.recall_indexed_points._value.get() > 0
    assert metrics.recall_index_failures._value.get() == 0

    down = FlakyEmbedder(failures=100)
    service = RecallService(world.service.store, COUNTER.count, index=world.service.index, embedder=down)
    await RecallEndpoint(service, metrics, index_attempts=3, index_backoff_s=0.01).index(SEGMENT)
    assert down.calls == 3 and metrics.recall_index_failures._value.get() == 1


@pytest.mark.parametrize(("raw", "reason"), [
    (b"", "invalid_json"), (b"[1]", "invalid_json"), (b"{nope", "invalid_json"),
    (b'{"schema": "om.recall.request/v2", "correlation_id": "c", "resource_id": "r"}', "unknown_schema"),
    (b'{"correlation_id": "c"}', "invalid_fields"),
    (b'{"correlation_id": "c", "resource_id": "r", "arguments": {"mode": "all"}}', "invalid_fields"),
    (b'{"correlation_id": "c", "resource_id": "r", "extra": 1}', "invalid_fields"),
    (b'{"correlation_id": "c", "resource_id": "' + b"r" * 5000 + b'"}', "oversize"),
])
def test_an_unreadable_request_says_why(raw: bytes, reason: str) -> None:
    with pytest.raises(WireDecodeError) as caught:
        decode_recall_request(raw, max_bytes=4096)
    assert caught.value.reason == reason
