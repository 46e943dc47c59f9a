"""Retention as the recall tool reads: each thread's cutoff, and what of an indexed excerpt is left inside the window
(``core.retention`` holds the rules; ``recall_service`` applies them to every read).

A thread's window is the deployment's, or its record's shorter one, which the content store keeps
(``ExpiringStore.retention_of``): the recall tool reads only the store, never the state table, so it runs the same
in a ``recall``-role process that holds no record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from om_stream.core.retention import DAY_MS, cut_text, cutoff, segment_expired
from om_stream.ports import ExpiringStore, StoredMessage, ThreadSummary

__all__ = ["Cutoffs", "RecallRetention", "within_window"]


@dataclass(frozen=True)
class RecallRetention:
    """How recall learns the retention window of what it reads: the deployment's (``window_ms``; None: keep
    forever), narrowed by a record's own (``ExpiringStore.retention_of``); a thread's record is the thread, or its
    resource in resource scope. ``now_ms``: the clock the cutoff moves with."""

    window_ms: int | None = None
    scope: Literal["thread", "resource"] = "thread"
    now_ms: Callable[[], int] = field(default=lambda: int(time.time() * 1000))


@dataclass
class Cutoffs:
    """The cutoff of each thread one recall call reads (each record's window read once per call)."""

    store: ExpiringStore
    retention: RecallRetention | None
    resource_id: str
    known: dict[str, int | None] = field(default_factory=dict)

    async def of(self, thread_id: str) -> int | None:
        retention = self.retention
        if retention is None:
            return None
        if thread_id not in self.known:
            record = self.resource_id if retention.scope == "resource" else thread_id
            days = await self.store.retention_of(record)
            window = retention.window_ms
            if days is not None and (window is None or days * DAY_MS < window):
                window = days * DAY_MS
            self.known[thread_id] = cutoff(retention.now_ms(), window)
        return self.known[thread_id]

    async def expired(self, thread: ThreadSummary | None) -> bool:
        """A thread whose newest message passed its window: everything of it has."""
        if thread is None:
            return True
        before = await self.of(thread.thread_id)
        return before is not None and thread.updated_at < before

    async def message_expired(self, stored: StoredMessage) -> bool:
        before = await self.of(stored.message.thread_id)
        return before is not None and stored.message.created_at_ms < before


def within_window(excerpt: str, text: str, observed_at: int, before: int | None) -> str | None:
    """The lines of a group's indexed excerpt still inside the window (None: none is, or the whole group passed
    it). The index holds the excerpt as it was indexed; the group's stored text, cut at the cutoff, says which of
    its lines are left (lines are kept verbatim: an excerpt line is left when the cut text still has it)."""
    if before is None:
        return excerpt
    if segment_expired(observed_at, before):
        return None
    cut = cut_text(text, before, observed_at)
    if not cut.changed:
        return excerpt
    left = set(cut.text.split("\n"))
    kept = [line for line in excerpt.split("\n") if line in left]
    return "\n".join(kept) if any(line.strip() for line in kept) else None
