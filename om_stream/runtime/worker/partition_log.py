"""What the brokers hold for a partition, asked on connections of the worker's own: the offset of the log's first
record at or after a given offset, and where the worker's group reads the partition from. The offset ledger
(offsets.py) asks before it takes a gap in a partition's records for a real one (offsets that hold no record: a
transaction's markers, compacted records), which only the brokers can tell from records the worker's own consumer
dropped on the way; and for the offset a partition starts at when Faust does not know it yet (its recovery resumes
the flow of records before it reads the group's committed offsets).

The log is read by a consumer outside any group (it never joins, never commits), assigned one partition at a time,
with the worker's isolation level, so it skips exactly what the worker's consumer skips; the group's committed
offsets come from its coordinator (an admin client).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

__all__ = ["PartitionLog"]

log = logging.getLogger(__name__)


class PartitionLog:
    def __init__(self, bootstrap: str, *, client_options: Mapping[str, Any], group_id: str | None = None,
                 isolation_level: str = "read_uncommitted", timeout_s: float = 5.0) -> None:
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.client_options = dict(client_options)
        self.isolation_level = isolation_level
        self.timeout_s = timeout_s
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._lock = asyncio.Lock()  # one question at a time: each assigns and seeks the one consumer

    async def first_offset(self, tp: Any, offset: int) -> int | None:
        """The offset of the first record of ``tp`` (anything with ``topic`` and ``partition``) at or after
        ``offset``; None when the brokers did not answer within ``timeout_s`` or the client failed (the caller then
        cannot tell, and must not take the gap for a real one)."""
        return await self._ask(tp, f"@{offset}", lambda part: self._first_offset(part, offset))

    async def group_start(self, tp: Any) -> int | None:
        """Where the group reads ``tp`` from next: its committed offset, or the log's first record if it never
        committed there; None when the brokers did not answer (or no group was given)."""
        if self.group_id is None:
            return None
        return await self._ask(tp, " (the group's start)", self._group_start)

    async def end_offsets(self, topic: str, partitions: list[int]) -> dict[int, int] | None:
        """The end offset (the next record's offset) of each partition of ``topic``, as the brokers say now: every
        record acknowledged before this call is below it. None when the brokers did not answer."""
        async with self._lock:
            try:
                consumer = await self._client()
                tps = [TopicPartition(topic, p) for p in partitions]
                ends = await asyncio.wait_for(consumer.end_offsets(tps), self.timeout_s)
                return {tp.partition: int(offset) for tp, offset in ends.items()}
            except Exception as exc:  # noqa: BLE001 - any failure means "cannot tell", which the caller handles
                log.warning("could not read the end offsets of %s from the brokers: %r", topic, exc)
                await self.close()
                return None

    async def _ask(self, tp: Any, what: str, question: Callable[[TopicPartition], Awaitable[int]]) -> int | None:
        async with self._lock:
            try:
                return await asyncio.wait_for(question(TopicPartition(tp.topic, tp.partition)), self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - any failure means "cannot tell", which the caller handles
                log.warning("could not read %s[%d]%s from the brokers: %r", tp.topic, tp.partition, what, exc)
                await self.close()  # fresh connections for the next question
                return None

    async def _group_start(self, tp: TopicPartition) -> int:
        if self._admin is None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, **self.client_options)
            await admin.start()
            self._admin = admin
        committed = (await self._admin.list_consumer_group_offsets(self.group_id, partitions=[tp])).get(tp)
        if committed is not None and committed.offset >= 0:
            return int(committed.offset)
        return await self._first_offset(tp, 0)

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
        consumer, admin, self._consumer, self._admin = self._consumer, self._admin, None, None
        try:
            if consumer is not None:
                await consumer.stop()
            if admin is not None:
                await admin.close()
        except Exception as exc:  # noqa: BLE001 - closing a broken client must not fail the caller
            log.debug("closing the partition-log clients: %r", exc)
