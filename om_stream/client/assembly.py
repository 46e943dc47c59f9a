"""Assembling ``om.context/v2`` contexts on the agent's side: the cursors of the context topic, the block index and
the blocks, read apart (Kafka keeps order within a topic-partition, not across topics), become the same
``ContextRecord`` an ``om.context/v1`` context is.

Per thread it holds the latest index, the blocks named by it (and any not yet tombstoned), the newest cursor not yet
assembled, and the messages it knows in position order (those of the last context it assembled, then every
cursor's ``new_messages`` since). A cursor waits until the index it names and all of its blocks are held; a newer
cursor replaces it (it covers every message the older one did). When the run of messages does not check out (a
cursor was missed: the client started late, or compaction removed one), :meth:`ContextAssembly.step` asks, once per
cursor, for the run to be fetched (``GET /v1/threads/{id}/messages``) instead of giving a wrong context. No I/O
here: the client (``client.py``) reads the topics and fetches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from om_stream.core.messages import Message
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_refs import known_messages, ready, rebuild, resolve_run
from om_stream.wire.context_v2 import ContextCursor, ContextIndex

__all__ = ["THREADS_HELD", "ContextAssembly", "RunWanted"]

THREADS_HELD = 16_384  # threads whose index and blocks are held (the ones heard from last)


@dataclass(frozen=True)
class RunWanted:
    """The cursor's raw messages are not all known: fetch the thread's messages ``first``..``through`` (and the pin,
    when set) and hand them to :meth:`ContextAssembly.with_run`."""

    cursor: ContextCursor


@dataclass
class _Thread:
    index: ContextIndex | None = None
    blocks: dict[str, str] = field(default_factory=dict)
    pending: ContextCursor | None = None
    asked: bool = False  # the pending cursor's run was asked for already (once per cursor)
    known: list[Message] = field(default_factory=list)


class ContextAssembly:
    """The v2 records of every thread read so far; each ``on_*`` method returns what became ready."""

    def __init__(self, limit: int = THREADS_HELD) -> None:
        self.limit = limit
        self._threads: dict[str, _Thread] = {}

    def _thread(self, thread_id: str) -> _Thread:
        thread = self._threads.pop(thread_id, None) or _Thread()
        self._threads[thread_id] = thread  # to the end: the threads heard from last are kept
        while len(self._threads) > self.limit:
            del self._threads[next(iter(self._threads))]
        return thread

    def on_cursor(self, cursor: ContextCursor) -> ContextRecord | RunWanted | None:
        thread = self._thread(cursor.thread_id)
        if thread.pending is not None and thread.pending.version > cursor.version:
            return None  # an older cursor read again (at-least-once): the pending one covers it
        thread.known = known_messages(thread.known, cursor)
        thread.pending, thread.asked = cursor, False
        return self.step(cursor.thread_id)

    def on_index(self, thread_id: str, index: ContextIndex | None) -> ContextRecord | RunWanted | None:
        thread = self._thread(thread_id)
        thread.index = index
        return self.step(thread_id)

    def on_block(self, thread_id: str, digest: str, text: str | None) -> ContextRecord | RunWanted | None:
        thread = self._thread(thread_id)
        if text is None:
            thread.blocks.pop(digest, None)
            return None
        thread.blocks[digest] = text
        return self.step(thread_id)

    def step(self, thread_id: str) -> ContextRecord | RunWanted | None:
        """The thread's pending cursor assembled, once the index and blocks are held (None: still waiting)."""
        thread = self._threads.get(thread_id)
        if thread is None or thread.pending is None or not ready(thread.pending, thread.index, thread.blocks):
            return None
        run = resolve_run(thread.pending, thread.known)
        if run is None:
            if thread.asked:
                return None
            thread.asked = True
            return RunWanted(thread.pending)
        return self._assembled(thread, thread.pending, run)

    def with_run(self, cursor: ContextCursor, fetched: Sequence[Message]) -> ContextRecord | None:
        """``cursor`` assembled with the messages fetched for it (pin, then the run ``first``..``through``); None
        when it is no longer the thread's pending cursor, or the fetched run does not check out either."""
        thread = self._threads.get(cursor.thread_id)
        if thread is None or thread.pending is not cursor or not ready(cursor, thread.index, thread.blocks):
            return None
        run = resolve_run(cursor, fetched)
        return self._assembled(thread, cursor, run) if run is not None else None

    def _assembled(self, thread: _Thread, cursor: ContextCursor, run: list[Message]) -> ContextRecord:
        assert thread.index is not None  # ready() held
        record = rebuild(cursor, thread.index, thread.blocks, run)
        thread.pending = None
        thread.known = list(run)
        return record

    def forget(self, thread_id: str) -> None:
        """The thread was erased (its cursor's tombstone)."""
        self._threads.pop(thread_id, None)
