"""Exact text token counts with tiktoken (o200k_base by default), memoised per text.

Message parts repeat constantly (every threshold check, every context render), so counts are cached by the text's
content; the cache is bounded. Encodings load offline from the files litellm bundles (``adapters.offline``).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from om_stream.adapters.offline import encoding

__all__ = ["TiktokenCounter"]

_SHORT = 256  # texts up to this length are cached by value; longer ones by digest, to bound memory


class TiktokenCounter:
    def __init__(self, encoding_name: str = "o200k_base", cache_size: int = 16_384) -> None:
        self._encoding = encoding(encoding_name)
        self._name = encoding_name
        self._cache: OrderedDict[str | bytes, int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self._name

    def count(self, text: str) -> int:
        if not text:
            return 0
        key: str | bytes = text if len(text) <= _SHORT else hashlib.blake2b(text.encode(), digest_size=16).digest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return cached
        tokens = len(self._encoding.encode_ordinary(text))
        with self._lock:
            self.misses += 1
            self._cache[key] = tokens
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return tokens

    def __call__(self, text: str) -> int:
        return self.count(text)
