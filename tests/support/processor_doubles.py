"""What the memory agent's batch driver (``MemoryProcessor``) is given in broker-less unit tests: a state table in a
dict, a producer that keeps what it is asked to send, and a word counter for tokens; and ``CommandWorker``, the
driver on the in-memory store with these, fed one record at a time (messages and ``om.commands`` records)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.config import OMConfig
from om_stream.core.state import RecordState
from om_stream.core.tokens import TokenAccountant
from om_stream.observability.metrics import Metrics
from om_stream.runtime.effects import Effects
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.kafka_records import Publication, SourceRecord
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import encode
from om_stream.wire.commands import CommandRecord
from om_stream.wire.messages import MessageRecord

__all__ = ["KAFKA", "CommandWorker", "Producer", "Table", "words"]

KAFKA = KafkaSettings()
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WORDS = "the staging cluster needs a new partition plan before the launch on friday"


def words(text: str) -> int:
    return len(text.split())


class Table:
    def __init__(self) -> None:
        self.states: dict[str, RecordState] = {}

    def get(self, arrival: Arrival[SourceRecord]) -> RecordState | None:
        return self.states.get(arrival.key)

    def set(self, arrival: Arrival[SourceRecord], state: RecordState) -> None:
        self.states[arrival.key] = state


class Producer:
    """Keeps what it is asked to send; while ``open`` is clear, a send waits (a broker that stops answering)."""

    def __init__(self) -> None:
        self.sent: list[Publication] = []
        self.open = asyncio.Event()
        self.open.set()

    async def send(self, publication: Publication) -> None:
        await self.open.wait()
        self.sent.append(publication)

    def to(self, topic: str) -> list[Publication]:
        return [p for p in self.sent if p.topic == topic]


class CommandWorker:
    def __init__(self, options: dict[str, Any]) -> None:
        self.config = OMConfig.parse(options).resolve()
        self.table, self.producer, self.offset = Table(), Producer(), 0
        self.processor = MemoryProcessor(
            kafka=KAFKA, config=self.config, accountant=TokenAccountant(words, message_overhead=1,
                                                                       conversation_overhead=0),
            effects=Effects(InMemoryContentStore(), self.config, count_text=words), publisher=self.producer,
            table=self.table, clock=self, metrics=Metrics.create(), timers=TimerWheel())

    def now_ms(self) -> int:
        return int(START.timestamp() * 1000) + self.offset * 1000

    async def send(self, topic: str, key: str, value: bytes) -> None:
        self.offset += 1
        record = SourceRecord(topic=topic, partition=0, offset=self.offset, key=key.encode(), value=value)
        assert await self.processor.process([record])

    async def say(self, thread: str, index: int, role: str = "user") -> None:
        message = MessageRecord.model_validate({
            "message_id": f"{thread}-m{index}", "thread_id": thread, "resource_id": "r1", "role": role,
            "created_at": START + timedelta(minutes=index), "parts": [{"type": "text", "text": WORDS}]})
        await self.send(KAFKA.topic_messages, thread, encode(message))

    async def command(self, thread: str, command: str, **fields: Any) -> None:
        record = CommandRecord(command_id=f"c{self.offset}", thread_id=thread, command=command, **fields)
        await self.send(KAFKA.topic_commands, thread, encode(record))
