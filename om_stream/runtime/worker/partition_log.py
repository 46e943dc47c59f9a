"""What the brokers' log of a partition holds, asked on a connection of its own: the offset of its first record at
or after a given offset. The offset ledger (offsets.py) asks it before it takes a gap in a partition's records for
a real one (offsets that hold no record: a transaction's markers, compacted records): only the brokers can tell
that from records the worker's own consumer dropped on the way.

The probe is a consumer outside any group (it never joins, never commits), assigned one partition at a time; it
reads with the worker's isolation level, so it skips exactly what the worker's consumer skips.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

__all__ = ["PartitionLog"]

log = logging.getLogger(__name__)


class PartitionLog:
    def __init__(self, bootstrap: str, *, client_options: Mapping[str, Any],
                 isolation_level: str = "read_uncommitted", timeout_s: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.client_options = dict(client_options)
        self.isolation_level = isolation_level
        self.timeout_s = timeout_s
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()  # one question at a time: each assigns and seeks the one consumer

    async def first_offset(self, tp: Any, offset: int) -> int | None:
        """The offset of the first record of ``tp`` (anything with ``topic`` and ``partition``) at or after
        ``offset``; None when the brokers did not answer within ``timeout_s`` or the client failed (the caller then
        cannot tell, and must not take the gap for a real one)."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._first_offset(TopicPartition(tp.topic, tp.partition), offset),
                                              self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - any failure means "cannot tell", which the caller handles
                log.warning("could not read %s[%d]@%d from the brokers: %r", tp.topic, tp.partition, offset, exc)
                await self.close()  # a fresh connection for the next question
                return None

    async def _first_offset(self, tp: TopicPartition, offset: int) -> int:
        consumer = await self._client()
        consumer.assign([tp])
        consumer.seek(tp, offset)
        while True:
            batch = await consumer.getmany(tp, timeout_ms=500, max_records=1)
            records = batch.get(tp)
            if records:
                return int(records[0].offset)

    async def _client(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest", isolation_level=self.isolation_level,
                                        **self.client_options)
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                await consumer.stop()
            except Exception as exc:  # noqa: BLE001 - closing a broken client must not fail the caller
                log.debug("closing the partition-log consumer: %r", exc)
