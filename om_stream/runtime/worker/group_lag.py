"""The consumer group's lag as the brokers see it: end offset minus committed offset, for every partition of the
topics the worker consumes (``om_consumer_group_lag_records{topic, partition}``).

The worker's own lag gauge (``om_consumer_lag_records``) reads its consumer, so it says nothing when that consumer is
stuck, and nothing for partitions no live worker holds. This probe asks the brokers on connections of its own: the
group coordinator for the committed offsets (an admin client) and the partition leaders for the end offsets (a
consumer outside any group, which never joins or commits). A partition the group never committed counts from its
first offset, where a new owner starts reading (``auto_offset_reset=earliest``).

Every worker may run it; all export the same numbers, so alerts take ``max()`` over workers, never ``sum()``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

__all__ = ["GroupLagProbe", "group_lag", "group_starts"]

log = logging.getLogger(__name__)
Lags = dict[tuple[str, int], int]


def group_starts(partitions: Iterable[tuple[str, int]], committed: Mapping[tuple[str, int], int],
                 beginning: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Where the group reads each partition from next: its committed offset (a negative or missing one: the
    partition's first offset)."""
    return {tp: committed[tp] if committed.get(tp, -1) >= 0 else beginning.get(tp, 0) for tp in partitions}


def group_lag(end: Mapping[tuple[str, int], int], committed: Mapping[tuple[str, int], int],
              beginning: Mapping[tuple[str, int], int]) -> Lags:
    """Records not yet committed, per ``(topic, partition)`` of ``end``, from :func:`group_starts`, never below
    zero."""
    starts = group_starts(end, committed, beginning)
    return {tp: max(0, last - starts[tp]) for tp, last in end.items()}


class GroupLagProbe:
    """Reads the lag of ``group_id`` on ``topics`` (each with ``partitions`` partitions) from the brokers."""

    def __init__(self, bootstrap: str, group_id: str, topics: Iterable[str], partitions: int, *,
                 client_options: Mapping[str, Any], timeout_s: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.partitions = [TopicPartition(topic, p) for topic in sorted(set(topics)) for p in range(partitions)]
        self.client_options = dict(client_options)
        self.timeout_s = timeout_s
        self._admin: AIOKafkaAdminClient | None = None
        self._offsets: AIOKafkaConsumer | None = None
        # the last reading, per partition: (lag, the offset the group reads from next)
        self.last: dict[tuple[str, int], tuple[int, int]] = {}

    async def measure(self) -> Lags:
        """The lag of every partition now; raises what the clients raise (``TimeoutError`` past ``timeout_s``)."""
        return await asyncio.wait_for(self._measure(), self.timeout_s)

    async def _measure(self) -> Lags:
        admin, offsets = await self._clients()
        committed = await admin.list_consumer_group_offsets(self.group_id, partitions=self.partitions)
        end = await offsets.end_offsets(self.partitions)
        missing = [tp for tp in self.partitions if committed.get(tp) is None or committed[tp].offset < 0]
        beginning = await offsets.beginning_offsets(missing) if missing else {}
        ends = {(tp.topic, tp.partition): int(o) for tp, o in end.items()}
        done = {(tp.topic, tp.partition): int(m.offset) for tp, m in committed.items()}
        first = {(tp.topic, tp.partition): int(o) for tp, o in beginning.items()}
        lags, starts = group_lag(ends, done, first), group_starts(ends, done, first)
        self.last = {tp: (lag, starts[tp]) for tp, lag in lags.items()}
        return lags

    async def _clients(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        if self._admin is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self.client_options)
            await admin.start()
            self._admin = admin
        if self._offsets is None:
            offsets = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                       **self.client_options)
            await offsets.start()
            self._offsets = offsets
        return self._admin, self._offsets

    async def close(self) -> None:
        admin, offsets, self._admin, self._offsets = self._admin, self._offsets, None, None
        if offsets is not None:
            await offsets.stop()
        if admin is not None:
            await admin.close()
