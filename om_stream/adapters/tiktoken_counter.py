"""Exact text token counts with tiktoken (o200k_base by default), memoised per text.

Message parts and observation lines repeat constantly (threshold checks, prompt budgets), so counts are cached by
the text's content; the cache is bounded. Encodings load offline from the files litellm bundles (``adapters.offline``).
"""

from __future__ import annotations

import hashlib

from om_stream.adapters.offline import encoding

__all__ = ["TiktokenCounter"]

_SHORT = 256  # texts up to this length are cached by value; longer ones by digest, to bound memory


class TiktokenCounter:
    def __init__(self, encoding_name: str = "o200k_base", cache_size: int = 65_536) -> None:
        self._encoding = encoding(encoding_name)
        self._name = encoding_name
        # a plain dict, emptied when full: a lookup must cost far less than encoding (it runs ~10^5 times a turn
        # on long logs), and a dict's get/set are atomic under the GIL, so threads may share the counter
        self._cache: dict[str | bytes, int] = {}
        self._cache_size = cache_size
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self._name

    def count(self, text: str) -> int:
        if not text:
            return 0
        key: str | bytes = text if len(text) <= _SHORT else hashlib.blake2b(text.encode(), digest_size=16).digest()
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        tokens = len(self._encoding.encode_ordinary(text))
        self.misses += 1
        if len(self._cache) >= self._cache_size:
            self._cache.clear()
        self._cache[key] = tokens
        return tokens

    def __call__(self, text: str) -> int:
        return self.count(text)
