"""``om_stream.client`` against real Apache Kafka and a running ``om-stream worker`` (offline model, SQLite store).

Recall goes over the request/reply topic pair, answered by the worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from om_stream.client import ClientTopics, EventEnvelope, OMClient, partition_for
from om_stream.core.events import EVENT_TYPES
from om_stream.wire.context import ContextRecord
from om_stream.wire.messages import MessageRecord
from tests.support.worker import WorkerProcess, message_record, running_worker

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 150, "bufferTokens": 0.25, "blockAfter": 1.2},
                           "reflection": {"observationTokens": 250}}
WORDS = "we agreed to move the launch to friday because the staging cluster needs a new partition plan"
PARTITIONS = 3


@pytest.fixture
async def worker(kafka_bootstrap: str, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite",
                              partitions=PARTITIONS) as process:
        yield process


def _topics(worker: WorkerProcess) -> ClientTopics:
    t = worker.topics
    return ClientTopics(messages=t["messages"], events=t["events"], context=t["context"],
                        recall_requests=t["recall_requests"], recall_responses=t["recall_responses"])


def _message(thread: str, index: int, role: str, text: str) -> MessageRecord:
    return MessageRecord.model_validate(message_record(thread, index, role, text))


async def test_a_conversation_reads_its_own_writes_follows_events_and_recalls(worker: WorkerProcess) -> None:
    thread = "py-client-thread-ü😀"
    async with OMClient(worker.bootstrap, topics=_topics(worker)) as om, om.events(thread) as events:
        # turn by turn: each user message is in the next context the agent reads
        for index in range(6):
            role = "user" if index % 2 == 0 else "assistant"
            sent = await om.publish(_message(thread, index, role, f"turn {index}: {WORDS}"))
            assert sent.partition == partition_for(thread, PARTITIONS)
            if role == "user":
                context = await om.await_context(thread, sent.message_id, timeout=60)
                assert isinstance(context, ContextRecord)
                assert context.through_message_id == sent.message_id
        # a burst: the worker may fold it into one context, which still includes the first message of the burst
        burst = [_message(thread, index, "user", f"burst {index}: {WORDS}") for index in range(6, 9)]
        for message in burst:
            await om.publish(message)
        first = await om.await_context(thread, burst[0].message_id, timeout=60)
        assert om.includes(first, burst[0].message_id)
        last = await om.await_context(thread, burst[-1].message_id, timeout=60)
        assert last.through_message_id == burst[-1].message_id
        assert last.version >= first.version
        assert last.observations.startswith("<observations>"), "nine long messages crossed the 150-token threshold"

        # the thread's events, typed, with their CloudEvents attributes
        seen: list[EventEnvelope] = []
        while not any(e.type in ("data-om-observation-end", "data-om-activation") for e in seen):
            seen.append(await events.next(timeout=60))
        for event in seen:
            assert event.subject == thread and event.data.thread_id == thread
            assert isinstance(event.data, EVENT_TYPES[event.type])
            assert event.specversion == "1.0" and event.id and event.source.startswith("om-stream/")
            assert datetime.fromisoformat(event.time.replace("Z", "+00:00")).tzinfo == UTC
            assert event.headers["content-type"] == b"application/json"
            assert event.partition == partition_for(thread, PARTITIONS)
        assert len({e.id for e in seen}) == len(seen)

        # read-your-writes has a deadline
        with pytest.raises(TimeoutError, match="never-sent"):
            await om.await_context(thread, "never-sent", timeout=0.5)

        # recall over the request/reply topic pair, answered by the worker
        threads = await om.recall("r1", {"mode": "threads"}, thread_id=thread, timeout=30)
        assert threads.ok and threads.result is not None and threads.result.mode == "threads"
        assert thread in threads.result.threads
        page = await om.recall("r1", {"threadId": "current", "limit": 3}, thread_id=thread, timeout=30)
        assert page.result is not None and page.result.mode == "messages"
        assert "turn 0" in page.result.messages and page.result.count == 3
        other_tenant = await om.recall("someone-else", {"mode": "threads"}, timeout=30)
        assert other_tenant.result is not None and thread not in json.dumps(other_tenant.result.model_dump())
        refused = await om.recall("r1", {"partIndex": 1}, thread_id=thread, timeout=30)
        assert refused.result is None and refused.error is not None
        assert refused.error.code == "invalid_request" and "cursor" in refused.error.message
        concurrent = await asyncio.gather(*(om.recall("r1", {"mode": "threads"}, timeout=30) for _ in range(5)))
        assert all(r.ok for r in concurrent)


async def test_contexts_of_other_threads_and_older_versions_do_not_satisfy_a_wait(worker: WorkerProcess) -> None:
    async with OMClient(worker.bootstrap, topics=_topics(worker)) as om:
        a = await om.publish(_message("py-a", 0, "user", "hello from a"))
        b = await om.publish(_message("py-b", 0, "user", "hello from b"))
        context_b = await om.await_context("py-b", b.message_id, timeout=60)
        context_a = await om.await_context("py-a", a.message_id, timeout=60)
        assert (context_a.thread_id, context_b.thread_id) == ("py-a", "py-b")
        assert not om.includes(context_b, a.message_id)
        second = await om.publish(_message("py-a", 1, "user", "again from a"))
        newer = await om.await_context("py-a", second.message_id, timeout=60)
        assert newer.version > context_a.version
        assert om.includes(newer, a.message_id)  # published before the context's last message
        assert om.latest_context("py-a") == newer


async def test_a_recall_nobody_answers_times_out(worker: WorkerProcess) -> None:
    topics = dataclasses.replace(_topics(worker), recall_requests=f"{worker.topics['recall_requests']}.unserved")
    async with OMClient(worker.bootstrap, topics=topics) as om:
        with pytest.raises(TimeoutError, match="recall"):
            await om.recall("r1", {"mode": "threads"}, timeout=1.0)


def test_the_python_partitioner_matches_the_shared_vectors() -> None:
    cases = json.loads((Path(__file__).resolve().parents[2] / "schemas/vectors/partitions.json").read_text())["cases"]
    assert [partition_for(c["key"], c["partitions"]) for c in cases] == [c["partition"] for c in cases]
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for("k", 0)


async def test_erase_gets_its_receipt_forgets_the_context_and_a_fresh_conversation_starts(
        worker: WorkerProcess) -> None:
    topics = dataclasses.replace(_topics(worker), commands=worker.topics["commands"])
    thread, other = "py-erase-ana", "py-erase-bob"
    async with OMClient(worker.bootstrap, topics=topics) as om:
        for name in (thread, other):
            record = message_record(name, 0, "user", f"MKpyerase {WORDS}", resource="ana")
            sent = await om.publish(MessageRecord.model_validate(record))
            await om.await_context(name, sent.message_id, timeout=60)
        started = asyncio.get_running_loop().time()
        receipt = await om.erase(thread_id=thread, timeout=60)
        took = asyncio.get_running_loop().time() - started
        assert receipt.found and receipt.removed.messages == 1 and receipt.removed.contexts == 1, receipt
        assert receipt.verified and receipt.thread_id == thread and receipt.resource_id == "ana"
        assert took < 5.0, f"an erase of one thread took {took:.1f}s through the client"
        assert om.latest_context(thread) is None and om.latest_context(other) is not None
        with pytest.raises(TimeoutError):
            await om.await_context(thread, f"{thread}-m0", timeout=3)  # the erased conversation stays gone
        fresh = await om.publish(MessageRecord.model_validate(
            message_record(thread, 7, "user", "a fresh start", resource="ana")))
        context = await om.await_context(thread, fresh.message_id, timeout=60)
        assert [m.message_id for m in context.messages] == [fresh.message_id]
        unknown = await om.erase(resource_id="nobody-here", timeout=60)
        assert not unknown.found and unknown.parts == PARTITIONS
