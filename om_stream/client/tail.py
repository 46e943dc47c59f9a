"""Following a topic from "now": a consumer without a group, assigned partitions, positioned before ``start`` returns.

Read-your-writes and request/reply both need the same guarantee: whatever the worker publishes after the agent's
own record is seen. So a tail resolves its positions (the current end of each partition, or the beginning) before
the agent publishes anything, and then hands every record to ``on_record`` in partition order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from om_stream.client.security import start_checked

__all__ = ["TopicTail", "topic_partitions"]

log = logging.getLogger(__name__)


async def topic_partitions(consumer: AIOKafkaConsumer, topic: str, timeout: float) -> list[int]:
    """The partition ids of ``topic``, waiting (up to ``timeout`` seconds) for the worker to create it.

    The consumer learns a topic's partitions from its own metadata, which it refreshes every
    ``metadata_max_age_ms`` (``topics()`` reads the brokers' metadata without updating it): measured, a tail took
    5.2 s to start. Assigning partition 0, which every topic has, makes the consumer ask for the topic's metadata
    at once (about 20 ms); the caller then assigns the partitions it wants."""
    deadline = time.monotonic() + timeout
    consumer.assign([TopicPartition(topic, 0)])
    while True:
        partitions = consumer.partitions_for_topic(topic)
        if partitions:
            return sorted(partitions)
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic!r} does not exist (is the om-stream worker running?)")
        await asyncio.sleep(0.05)


class TopicTail:
    """Reads ``topic`` from its end (or its beginning) on every partition, or only on ``partitions``."""

    def __init__(self, bootstrap: str, topic: str, on_record: Callable[[ConsumerRecord[bytes, bytes]], Awaitable[None]],
                 *, from_beginning: bool = False, partitions: Callable[[int], list[int]] | None = None,
                 kafka_options: Mapping[str, Any] | None = None, topic_timeout: float = 30.0) -> None:
        self.topic = topic
        self._bootstrap = bootstrap
        self._options = dict(kafka_options or {})
        self._on_record = on_record
        self._from_beginning = from_beginning
        self._select = partitions
        self._topic_timeout = topic_timeout
        self._consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                          auto_offset_reset="earliest" if from_beginning else "latest",
                                          metadata_max_age_ms=5000, **self._options)
        self._task: asyncio.Task[None] | None = None
        self.partition_count = 0

    async def start(self) -> None:
        await start_checked(self._consumer, self._bootstrap, self._options, close=self._consumer.stop)
        try:
            ids = await topic_partitions(self._consumer, self.topic, self._topic_timeout)
            self.partition_count = len(ids)
            chosen = self._select(len(ids)) if self._select else ids
            assigned = [TopicPartition(self.topic, p) for p in chosen]
            self._consumer.assign(assigned)
            if self._from_beginning:
                await self._consumer.seek_to_beginning(*assigned)
            else:
                await self._consumer.seek_to_end(*assigned)
            for tp in assigned:  # resolve now: records published from here on are read
                await self._consumer.position(tp)
        except BaseException:
            await self._consumer.stop()
            raise
        self._task = asyncio.create_task(self._run(), name=f"om-stream tail {self.topic}")

    async def _run(self) -> None:
        while True:
            batch = await self._consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    try:
                        await self._on_record(record)
                    except Exception:  # one unreadable record must not stop the tail
                        log.exception("record %s[%d]@%d could not be handled", record.topic, record.partition,
                                      record.offset)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._consumer.stop()
