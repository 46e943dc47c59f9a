"""What the ``om.context/v2`` publication path remembers between publications, so that one costs what changed
rather than the size of the context: per thread its last system blocks with their digests and what they were made
of, block digests by text, and per thread the creation time of each raw message it has read.

All of them are caches of facts, never of what readers hold (``runtime.worker.context_wire`` keeps that):
forgetting them costs time, never a wrong record. ``BlockDigests`` is exact by construction (the digest of a
text). ``RenderedThreads`` is as exact as its key: the caller names everything the blocks are made of.
``MessageDates`` says which of a thread's message ids the content store holds and when each was created; a message
leaves the store only in a purge or an erase, and both evict it from the content cache (``ContentCache.evict``),
so the dates are dropped whenever the cache has evicted anything since they were read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from om_stream.core.context import RenderedBlocks
from om_stream.wire.context_v2 import block_digest

__all__ = ["BlockDigests", "MessageDates", "RenderedThreads", "ThreadBlocks"]

DIGESTS_BYTES = 32 * 1024 * 1024  # the texts are mostly the same objects the renderer's caches hold
THREADS_DATED = 2_048  # a thread left out is read from the content cache again
RENDERED_BYTES = 64 * 1024 * 1024  # the blocks are mostly the same objects the renderer's caches hold


@dataclass(frozen=True)
class ThreadBlocks:
    """A thread's system blocks as last rendered, with their digests, and the retention cutoff and the log's tokens
    as shown (a log over its bound is condensed: then no cutoff, since a condensed log shows every raw message, and
    the condensed log's tokens)."""

    expire_before: int | None
    observation_tokens: int
    rendered: RenderedBlocks
    digests: list[str]


class RenderedThreads:
    """thread id -> (what its blocks were made of, the blocks), least recently used out past ``max_bytes`` of
    block text."""

    def __init__(self, max_bytes: int = RENDERED_BYTES) -> None:
        self.max_bytes = max_bytes
        self._threads: OrderedDict[str, tuple[tuple[Any, ...], ThreadBlocks, int]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._threads)

    def get(self, thread_id: str, made_of: tuple[Any, ...]) -> ThreadBlocks | None:
        found = self._threads.get(thread_id)
        if found is None or found[0] != made_of:
            return None
        self._threads.move_to_end(thread_id)
        return found[1]

    def put(self, thread_id: str, made_of: tuple[Any, ...], blocks: ThreadBlocks) -> None:
        size = sum(map(len, blocks.rendered.system_blocks)) + 200
        old = self._threads.pop(thread_id, None)
        if old is not None:
            self._bytes -= old[2]
        self._threads[thread_id] = (made_of, blocks, size)
        self._bytes += size
        while self._bytes > self.max_bytes and self._threads:
            _, (_, _, dropped) = self._threads.popitem(last=False)
            self._bytes -= dropped


class BlockDigests:
    """block text -> its digest (``wire.context_v2.block_digest``), least recently used out past ``max_bytes``
    of text. An unchanged block is the same string object again (the renderer memoises segment blocks) or an
    equal one, so its digest costs a dict lookup instead of SHA-256 over the text."""

    def __init__(self, max_bytes: int = DIGESTS_BYTES) -> None:
        self.max_bytes = max_bytes
        self._digests: OrderedDict[str, str] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._digests)

    def of(self, texts: tuple[str, ...]) -> list[str]:
        digests = self._digests
        out: list[str] = []
        for text in texts:
            digest = digests.get(text)
            if digest is None:
                digest = digests[text] = block_digest(text)
                self._bytes += len(text) + 100
            else:
                digests.move_to_end(text)
            out.append(digest)
        while self._bytes > self.max_bytes and digests:
            dropped, _ = digests.popitem(last=False)
            self._bytes -= len(dropped) + 100
        return out


class MessageDates:
    """thread id -> (its resource, the content cache's eviction count when read, message id -> created_at in
    epoch ms) for the messages of the thread's contexts that the store holds; ``limit`` threads, the least recently
    published first out."""

    def __init__(self, limit: int = THREADS_DATED) -> None:
        self.limit = limit
        self._threads: OrderedDict[str, tuple[str, int, dict[str, int]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._threads)

    def of(self, thread_id: str, resource_id: str, evictions: int) -> dict[str, int]:
        """The thread's known dates, to read and add to; empty when the cache evicted anything since they were
        read (a message may have left the store)."""
        found = self._threads.pop(thread_id, None)
        dates = found[2] if found is not None and found[0] == resource_id and found[1] == evictions else {}
        self._threads[thread_id] = (resource_id, evictions, dates)
        while len(self._threads) > self.limit:
            self._threads.popitem(last=False)
        return dates

    def keep_only(self, thread_id: str, ids: tuple[str, ...]) -> None:
        """Forget the dates of messages that left the thread's context (observed, expired): they are not read
        again, short of a clear, which reads them anew."""
        found = self._threads.get(thread_id)
        if found is not None and len(found[2]) > 2 * len(ids) + 16:
            dates = found[2]
            self._threads[thread_id] = (found[0], found[1], {i: dates[i] for i in ids if i in dates})
