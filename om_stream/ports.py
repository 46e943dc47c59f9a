"""The seams between om-stream's pure core and the world: protocols only, no implementations.

Adapters implement these (``om_stream/adapters``); the runtime wires them together. Wrappers (metrics, retries,
timeouts, fallbacks) implement the same protocols around another implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "Embedder", "TextTokenCounter"]


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time in epoch milliseconds. The core never reads a clock; the runtime passes ``now`` in."""

    def now_ms(self) -> int: ...


@runtime_checkable
class TextTokenCounter(Protocol):
    """Exact token count of a text for one tokenizer. Deterministic: the same text always gives the same count."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension, for semantic recall."""

    @property
    def model_id(self) -> str:
        """Stable identifier of the embedding model; vectors of different models never share a collection."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...
