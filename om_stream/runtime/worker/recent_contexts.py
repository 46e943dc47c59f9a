"""The latest contexts the worker published or rendered, by thread: what ``GET /v1/threads/{id}/context`` answers
without rendering again. At most ``CONTEXTS_KEPT`` threads, the least recently stored first out: a context holds a
thread's whole observation log and raw messages, and a worker that held every thread it ever published would grow
with its traffic. A thread left out is rendered again from its state when asked for (``web``)."""

from __future__ import annotations

from om_stream.wire.context import ContextRecord

__all__ = ["CONTEXTS_KEPT", "RecentContexts"]

CONTEXTS_KEPT = 1024


class RecentContexts(dict[str, ContextRecord]):
    """A dict of thread id -> context that forgets its oldest entries past ``limit`` as new ones are stored
    (``contexts[thread] = context``; ``get``, ``pop`` and ``del`` as any dict)."""

    def __init__(self, limit: int = CONTEXTS_KEPT) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, thread_id: str, context: ContextRecord) -> None:
        super().pop(thread_id, None)  # to the end: stored last, forgotten last
        super().__setitem__(thread_id, context)
        while len(self) > self.limit:
            del self[next(iter(self))]

    def remember(self, context: ContextRecord) -> None:
        """The context just published or read, kept as its thread's latest."""
        self[context.thread_id] = context

    def forget(self, thread_id: str) -> None:
        """The thread was erased: its latest context goes too."""
        self.pop(thread_id, None)
