"""The memory agent's handling of ``om.commands`` records, without a broker: the worker's batch driver
(``MemoryProcessor``) on the in-memory store, a dict as its state table and a list as its producer.

What it checks is the worker's side of the manual commands: an override for a thread no message reached goes to the
dead-letter topic with its own reason and makes no record; ``force`` and ``replace`` reach the engine; a clear
gives the thread's stored conversation back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import RequestObservation
from om_stream.core.config import OMConfig
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.tokens import TokenAccountant
from om_stream.observability.metrics import Metrics
from om_stream.runtime.effects import Effects
from om_stream.runtime.internal_codec import decode_internal, encode_internal
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import encode
from om_stream.wire.commands import CommandRecord
from om_stream.wire.messages import MessageRecord
from tests.support.processor_doubles import Producer, Table, words

KAFKA = KafkaSettings()
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WORDS = "the staging cluster needs a new partition plan before the launch on friday"


class Worker:
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


async def test_an_override_for_a_thread_no_message_reached_is_dead_lettered_as_unknown_thread() -> None:
    worker = Worker({"observation": {"messageTokens": 1_000}})
    await worker.command("nobody", "override", message_tokens=2_000)
    (letter,) = worker.producer.to(KAFKA.topic_dlq)
    assert dict(letter.headers)["om_dlq_reason"] == b"unknown_thread"
    body = json.loads(letter.value)
    assert body["reason"] == "unknown_thread" and body["source_topic"] == KAFKA.topic_commands
    assert "'nobody'" in body["detail"]
    assert worker.table.states == {}  # the refused command made no record
    assert worker.producer.to(KAFKA.topic_context) == []


async def test_overrides_merge_and_replace_reaches_the_engine() -> None:
    worker = Worker({"observation": {"messageTokens": 1_000}})
    await worker.say("t1", 0)
    await worker.command("t1", "override", message_tokens=2_000)
    await worker.command("t1", "override", observation_tokens=3_000)
    state = worker.table.states["t1"]
    assert (state.override_message_tokens, state.override_observation_tokens) == (2_000, 3_000)
    await worker.command("t1", "override", observation_tokens=4_000, replace=True)
    state = worker.table.states["t1"]
    assert (state.override_message_tokens, state.override_observation_tokens) == (None, 4_000)
    assert worker.producer.to(KAFKA.topic_dlq) == []


async def test_observe_waits_for_the_threshold_unless_forced() -> None:
    worker = Worker({"observation": {"messageTokens": 1_000, "bufferTokens": False}})
    for index in range(3):
        await worker.say("t1", index, "user" if index % 2 == 0 else "assistant")
    await worker.command("t1", "observe")
    assert worker.producer.to(KAFKA.topic_model_requests) == []
    await worker.command("t1", "observe", force=True)
    (request,) = worker.producer.to(KAFKA.topic_model_requests)
    assert b"t1-m0" in request.value


async def test_clear_gives_the_stored_conversation_back_to_the_context() -> None:
    worker = Worker({"observation": {"messageTokens": 1_000, "bufferTokens": False}})
    for index in range(3):
        await worker.say("t1", index, "user" if index % 2 == 0 else "assistant")
    await worker.command("t1", "observe", force=True)
    request = decode_internal(worker.producer.to(KAFKA.topic_model_requests)[-1].value)
    assert isinstance(request, RequestObservation)
    await worker.send(KAFKA.topic_model_results, "t1", encode_internal(ModelResultArrived(
        cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
        observations="* 🔴 (09:00) User needs a partition plan before Friday.")))
    observed = json.loads(worker.producer.to(KAFKA.topic_context)[-1].value)
    assert "partition plan before Friday" in observed["observations"]
    assert [m["message_id"] for m in observed["messages"]] == ["t1-m2"]  # the current turn's message stays

    await worker.command("t1", "clear")
    cleared = json.loads(worker.producer.to(KAFKA.topic_context)[-1].value)
    assert cleared["observations"] == ""
    assert [m["message_id"] for m in cleared["messages"]] == ["t1-m0", "t1-m1", "t1-m2"]
    assert worker.table.states["t1"].epoch == 1
