"""A memory agent whose batches a generation fences (``OffsetLedger``), for the unit tests of fencing and of
dead letters: ``FencedWorker`` drives the real ``MemoryProcessor`` one record per batch on a store that can stall
(``StallingStore``), a producer that can hold its sends, and a committer that keeps what it was asked to commit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.config import OMConfig
from om_stream.core.messages import Message
from om_stream.core.tokens import TokenAccountant
from om_stream.observability.metrics import Metrics
from om_stream.runtime.effects import Effects
from om_stream.runtime.erasure import Sweeper
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.erasure import WorkerErasures
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.runtime.worker.processor import MemoryProcessor
from tests.support.processor_doubles import KAFKA, Producer, Table

__all__ = ["Committer", "FencedWorker", "StallingStore"]


class StallingStore(InMemoryContentStore):
    """Message writes wait while ``flowing`` is clear (a store that stops answering, then comes back)."""

    def __init__(self) -> None:
        super().__init__()
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.waiting = asyncio.Event()

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None:
        if not self.flowing.is_set():
            self.waiting.set()
            await self.flowing.wait()
        await super().put_message(record_key, message, seq, tokens)


class Committer:
    def __init__(self) -> None:
        self.commits: list[dict[Any, int]] = []

    async def __call__(self, offsets: Mapping[Any, int]) -> bool:
        self.commits.append(dict(offsets))
        return True


class NoFences:
    """The erasure table's reads, with no fence written (the erase in these tests is handled by another member)."""

    def get(self, arrival: Any, key: str) -> None:
        return None


class FencedWorker:
    """The worker's memory agent around a processor: a generation the ledger fences."""

    def __init__(self, *, erasing: bool = False) -> None:
        config = OMConfig.parse({"observation": {"messageTokens": 10_000}}).resolve()
        self.store, self.table, self.producer, self.committer = StallingStore(), Table(), Producer(), Committer()
        self.ledger = OffsetLedger(self.committer, lambda topic, partition: (topic, partition))
        self.generation = 1
        self.processor = MemoryProcessor(
            kafka=KAFKA, config=config, accountant=TokenAccountant(lambda t: len(t.split()), message_overhead=1,
                                                                  conversation_overhead=0),
            effects=Effects(self.store, config, count_text=lambda t: len(t.split())), publisher=self.producer,
            table=self.table, clock=self, metrics=Metrics.create(), timers=TimerWheel(),
            generation=lambda: self.generation if self.ledger.accepting else -1,
            erasures=self._erasures if erasing else None)

    def _erasures(self, processor: MemoryProcessor) -> WorkerErasures:
        store_retry = processor.store_retry
        return WorkerErasures(
            kafka=KAFKA, scope="thread", records=self.table, table=NoFences(),  # type: ignore[arg-type]
            store=self.store, sweeper=Sweeper(self.store, processor.outlet_parts.effects, store_retry, 3600),
            end_offsets=_no_offsets, clock=self, metrics=processor.metrics,
            store_retry=store_retry, fence_ttl_s=3600, indexing=False, decide_clear=processor.clear_now)

    def now_ms(self) -> int:
        return 1_772_442_000_000

    async def handle(self, offset: int, thread: str = "t1") -> bool:
        value = json.dumps({"schema": "om.message/v1", "message_id": f"{thread}-m{offset}", "thread_id": thread,
                            "resource_id": "r1", "role": "user", "created_at": "2026-03-02T09:00:00Z",
                            "parts": [{"type": "text", "text": f"message {offset} of {thread}"}]}).encode()
        record = SourceRecord(topic=KAFKA.topic_messages, partition=0, offset=offset, key=thread.encode(),
                              value=value, generation=self.generation)
        async with self.ledger.batch():  # as the worker's memory agent: the ledger's lock for the whole batch
            if not await self.processor.process([record]):
                return False
            self.ledger.handled([(record.topic, 0, offset)])
            return True


async def _no_offsets(topic: str, partitions: list[int]) -> None:
    raise AssertionError("no erase is handled by this member")
