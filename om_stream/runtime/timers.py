"""Timers, driven by record state: idle activation, retries, and deadlines of model calls.

A record's state is the one owner of its timers (``RecordState.timers``: name -> due time). The host gives the
wheel every state it writes; the wheel keeps a heap of what is due when and hands each due timer out once per due
time. The Kafka worker sends what is due as ``TimerFired`` inputs through its internal topic (processed in order
with the record's other inputs by the partition's owner) and rebuilds the wheel from the table after a rebalance;
the embedded runner applies them itself, on the real clock or on a manual one.

A timer moved (an idle timer reset by every message) leaves its old entry in the heap until that entry's time comes;
at a high message rate with long timers those would pile up, so the heap is rebuilt from the wanted timers whenever
it grows past twice what it held after the last rebuild.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from om_stream.core.inputs import TimerFired

__all__ = ["TimerWheel"]

_MIN_COMPACT = 1024


class TimerWheel:
    def __init__(self) -> None:
        self._heap: list[tuple[int, str, str]] = []
        self._wanted: dict[str, dict[str, int]] = {}  # record key -> timer -> due
        self._sent: set[tuple[str, str, int]] = set()
        self._compact_at = _MIN_COMPACT

    def track(self, key: str, timers: Mapping[str, int]) -> None:
        """The record's timers after a state write: remember new or moved ones, forget the others."""
        known = self._wanted.get(key, {})
        for timer, due in timers.items():
            if known.get(timer) != due:
                heapq.heappush(self._heap, (due, key, timer))
        if timers:
            self._wanted[key] = dict(timers)
        else:
            self._wanted.pop(key, None)
        if len(self._heap) > self._compact_at:
            self._compact()

    def _compact(self) -> None:
        """The heap holding only the wanted timers (moved and forgotten ones dropped)."""
        self._heap = [(due, key, timer) for key, timers in self._wanted.items() for timer, due in timers.items()]
        heapq.heapify(self._heap)
        self._compact_at = max(_MIN_COMPACT, 2 * len(self._heap))

    def rebuild(self, states: Iterable[tuple[str, Mapping[str, int]]]) -> None:
        """After a rebalance or recovery: exactly the timers of the states this worker now holds."""
        self._heap.clear()
        self._wanted.clear()
        for key, timers in states:
            self.track(key, timers)

    def due(self, now_ms: int) -> list[tuple[str, TimerFired]]:
        """(record key, firing) pairs due now, each at most once per due time; a firing names the due time it is
        for (a record takes in one firing per schedule)."""
        ready = []
        while self._heap and self._heap[0][0] <= now_ms:
            due, key, timer = heapq.heappop(self._heap)
            if self._wanted.get(key, {}).get(timer) != due or (key, timer, due) in self._sent:
                continue
            self._sent.add((key, timer, due))
            ready.append((key, TimerFired(timer, due)))
        if len(self._sent) > 100_000:
            self._sent = {e for e in self._sent if self._wanted.get(e[0], {}).get(e[1]) == e[2]}
        return ready

    def next_due(self) -> int | None:
        """When the earliest wanted timer is due (None: none is)."""
        while self._heap:
            due, key, timer = self._heap[0]
            if self._wanted.get(key, {}).get(timer) == due and (key, timer, due) not in self._sent:
                return due
            heapq.heappop(self._heap)
        return None

    @property
    def heap_size(self) -> int:
        """Entries in the heap, moved and forgotten timers not yet dropped included (for tests and reports)."""
        return len(self._heap)

    def __len__(self) -> int:
        return sum(len(timers) for timers in self._wanted.values())
