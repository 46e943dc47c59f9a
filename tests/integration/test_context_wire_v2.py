"""Contexts by reference (``OM_CONTEXT_WIRE=v2``) on real Kafka: the same conversation through a v1 worker and a v2
worker gives the Python client the same contexts, version by version (observations and a reflection included), and
each v2 context equals the worker's own v1 rendering of it (``GET /v1/threads/{id}/context``). A client that
starts late fetches the run it lacks through ``GET /v1/threads/{id}/messages``. An erase tombstones the cursor, the
index and every block of the thread's index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from om_stream.client import ClientTopics, MessagesApi, OMClient
from om_stream.client.tail import topic_partitions
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_v2 import block_key
from om_stream.wire.messages import MessageRecord
from tests.support.worker import WorkerProcess, http_call, message_record, running_worker

# small thresholds, no buffering: every observation and reflection happens at a message, so both runs match
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 120, "bufferTokens": False},
                           "reflection": {"observationTokens": 90}}
WORDS = "we agreed to move the launch to friday because the staging cluster needs a new partition plan"
THREAD = "wire-v2-thread"
TURNS = 14


def _topics(worker: WorkerProcess) -> ClientTopics:
    t = worker.topics
    return ClientTopics(messages=t["messages"], commands=t["commands"], events=t["events"], context=t["context"],
                        context_index=t["context_index"], context_blocks=t["context_blocks"],
                        recall_requests=t["recall_requests"], recall_responses=t["recall_responses"])


async def _served(worker: WorkerProcess) -> ContextRecord:
    """The worker's own v1 rendering of the thread's latest context."""
    return ContextRecord.model_validate(await http_call(worker.port, "GET", f"/v1/threads/{THREAD}/context"))


async def _conversation(worker: WorkerProcess) -> list[ContextRecord]:
    """The context the client holds once memory has settled after each message, each checked against the
    worker's own rendering."""
    seen: list[ContextRecord] = []
    async with OMClient(worker.bootstrap, topics=_topics(worker)) as om:
        for index in range(TURNS):
            role = "user" if index % 2 == 0 else "assistant"
            record = MessageRecord.model_validate(message_record(THREAD, index, role, f"turn {index}: {WORDS}"))
            sent = await om.publish(record)
            await om.await_context(THREAD, sent.message_id, timeout=60)
            await om.settled(THREAD, sent.message_id, timeout=60)
            served = await _served(worker)
            context = await om.wait_context(THREAD, lambda c, v=served.version: c.version >= v, timeout=60)
            assert encode(context) == encode(served), index
            seen.append(context)
    return seen


async def test_a_v2_worker_gives_the_client_the_contexts_a_v1_worker_gives(kafka_bootstrap: str,
                                                                           tmp_path: Path) -> None:
    runs: dict[str, list[ContextRecord]] = {}
    for wire in ("v1", "v2"):
        (tmp_path / wire).mkdir()
        async with running_worker(kafka_bootstrap, tmp_path / wire, options=OPTIONS, store="sqlite",
                                  extra={"OM_CONTEXT_WIRE": wire}) as worker:
            runs[wire] = await _conversation(worker)
            if wire == "v2":
                blocks = await _records(worker, "context_blocks")
                cursors = await _records(worker, "context")
                assert all(json.loads(v)["schema"] == "om.context/v2" for _, v in cursors if v is not None)
                assert blocks, "the v2 worker published its blocks"
    assert [c.generation for c in runs["v2"]][-1] > 0, "the conversation reached a reflection"
    assert any(c.observations for c in runs["v2"])
    assert [encode(c) for c in runs["v2"]] == [encode(c) for c in runs["v1"]]


async def test_a_late_client_fetches_its_run_and_an_erase_tombstones_every_record(kafka_bootstrap: str,
                                                                                  tmp_path: Path) -> None:
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite",
                              extra={"OM_CONTEXT_WIRE": "v2"}) as worker:
        async with OMClient(worker.bootstrap, topics=_topics(worker)) as early:
            for index in range(5):
                sent = await early.publish(MessageRecord.model_validate(
                    message_record(THREAD, index, "user" if index % 2 == 0 else "assistant", f"early {index}")))
            await early.await_context(THREAD, sent.message_id, timeout=60)
        api = MessagesApi(f"http://127.0.0.1:{worker.port}")
        async with OMClient(worker.bootstrap, topics=_topics(worker), messages_api=api) as late:
            sent = await late.publish(MessageRecord.model_validate(message_record(THREAD, 5, "assistant", "late")))
            context = await late.await_context(THREAD, sent.message_id, timeout=60)
            assert len(context.messages) > 1, "the run holds messages the late client never saw"
            assert encode(context) == encode(await _served(worker))
            index_before = [v for k, v in await _records(worker, "context_index") if k == THREAD][-1]
            assert index_before is not None
            receipt = await late.erase(thread_id=THREAD, timeout=60)
            assert receipt.found and late.latest_context(THREAD) is None
        last: dict[str, bytes | None] = {}
        for topic in ("context", "context_index", "context_blocks"):
            for key, value in await _records(worker, topic):
                last[f"{topic}:{key}"] = value
        assert last[f"context:{THREAD}"] is None and last[f"context_index:{THREAD}"] is None
        for digest in json.loads(index_before)["blocks"]:
            assert last[f"context_blocks:{block_key(THREAD, digest)}"] is None, digest


async def _records(worker: WorkerProcess, topic: str) -> list[tuple[str, bytes | None]]:
    """(key, value) of everything ``topic`` holds now, each partition in order (a thread's records share one)."""
    name = worker.topics[topic]
    consumer = AIOKafkaConsumer(bootstrap_servers=worker.bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    out: list[tuple[str, bytes | None]] = []
    try:
        partitions = [TopicPartition(name, p) for p in await topic_partitions(consumer, name, 30)]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        for tp in partitions:
            while await consumer.position(tp) < ends[tp]:
                for record in (await consumer.getmany(tp, timeout_ms=1000)).get(tp, []):
                    if record.key is not None:
                        out.append((record.key.decode("utf-8", "replace"), record.value))
    finally:
        await consumer.stop()
    return out
