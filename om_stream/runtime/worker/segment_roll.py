"""Rolling the active segments of the compacted topics (the context topic and the state table's changelog), so that
an erase's tombstone removes what it supersedes within a bounded time even on a partition nobody writes to.

Kafka's log cleaner never compacts a partition's active segment, and a segment rolls only when a record is appended
after ``min(segment.ms, max.compaction.lag.ms)``. A tombstone written to a partition that then stays quiet would sit
in the active segment for good, beside the erased thread's earlier records in older segments: measured on this
project's broker, the superseded records were still there after minutes, and went at the cleaner's next pass once
one more record was appended. So every ``retention.segment_roll_interval_ms`` the memory worker appends to each
partition it holds, of both topics, a tombstone of :data:`ROLL_KEY`: a key no thread or resource can have (ids are
UTF-8 text, this key is not), superseded by the next one, and a no-op for every consumer (clients skip tombstones;
the table deletes a key it never had).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

__all__ = ["ROLL_KEY", "SegmentRoll"]

log = logging.getLogger(__name__)
ROLL_KEY = b"\xffom-stream:segment-roll"


class SegmentRoll:
    """Appends a :data:`ROLL_KEY` tombstone to each of ``topics`` at each partition ``partitions()`` returns (the
    partitions this worker holds now). ``send(topic, key, partition)`` queues a tombstone."""

    def __init__(self, send: Callable[[str, bytes, int], Awaitable[object]], topics: Sequence[str],
                 partitions: Callable[[], set[int]]) -> None:
        self._send = send
        self.topics = tuple(topics)
        self._partitions = partitions

    async def roll(self) -> int:
        """One round; returns the number of tombstones queued (a lost one is made good by the next round)."""
        held = sorted(self._partitions())
        for topic in self.topics:
            for partition in held:
                await self._send(topic, ROLL_KEY, partition)
        if held:
            log.debug("segment roll tombstones queued on %s, partitions %s", self.topics, held)
        return len(held) * len(self.topics)
