"""What the SQLite store wrote or read lately, kept in process so the hot reads (the Observer's messages, segment
texts, a thread's metadata) skip SQLite: bounded maps, least recently used out.

Sound because what they hold changes only through this process's store: a message's body is written by the one
owner of its thread, a segment's text once (first writer wins), and a thread's metadata by the one memory that
owns the thread. The store empties an entry when it writes it and a record's texts when it clears the record.
Holds no SQL and no OM rules.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["ReadCache"]

K = TypeVar("K")
V = TypeVar("V")


class ReadCache(Generic[K, V]):
    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)

    def discard(self, key: K) -> None:
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()
