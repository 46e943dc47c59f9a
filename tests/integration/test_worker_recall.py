"""The recall tool served by ``om-stream worker`` on real Kafka: over HTTP (``POST /v1/recall``) and over the
request/reply topics, browsing the SQLite content store and searching the Qdrant index (local mode) that the worker
fills with the offline embedder as observations land."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tests.support.worker import WorkerProcess, agent_for, http_call, message_record, running_worker

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 120, "bufferTokens": False},
                           "reflection": {"observationTokens": 4000}, "retrieval": {"vector": True}}
FACTS = ["my sister Ingrid lives in Trondheim and works as a marine biologist",
         "the quarterly budget review moved to the ninth of April",
         "our Kafka cluster runs twelve partitions per topic in production",
         "I am allergic to peanuts so the team lunch must avoid them",
         "the deployment freeze starts on the first Monday of December",
         "please write every report in British English with metric units"]


@pytest.fixture
async def worker(kafka_bootstrap: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite",
                              extra={"OM_EMBEDDING_KIND": "offline", "OM_QDRANT_PATH": ":memory:"}) as process:
        yield process


async def _conversation(worker: WorkerProcess) -> None:
    """Two threads of one user and one thread of another; enough tokens that each thread is observed."""
    async with agent_for(worker) as agent:
        for thread, resource in (("t-home", "ana"), ("t-work", "ana"), ("t-other", "bob")):
            for index, fact in enumerate(FACTS):
                text = f"{fact}." if thread != "t-other" else f"unrelated note {index} about gardening tools."
                await agent.send(message_record(thread, 2 * index, "user", text, resource=resource),
                                 key=thread.encode())
                await agent.send(message_record(thread, 2 * index + 1, "assistant", "Noted, I will remember that.",
                                                resource=resource), key=thread.encode())
            await agent.context_through(thread, f"{thread}-m{2 * len(FACTS) - 1}")
    await _until_indexed(worker)


async def _until_indexed(worker: WorkerProcess, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metrics = await http_call(worker.metrics_port, "GET", "/metrics", raw=True)
        match = re.search(r"^om_recall_indexed_points_total (\S+)$", metrics, re.M)
        if match and float(match.group(1)) > 0:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"nothing was indexed for recall:\n{worker.tail()}")


def _request(resource: str, arguments: dict[str, Any], thread: str | None = None) -> dict[str, Any]:
    return {"schema": "om.recall.request/v1", "correlation_id": uuid.uuid4().hex, "resource_id": resource,
            "thread_id": thread, "arguments": arguments}


async def test_recall_over_http_browses_searches_and_keeps_tenants_apart(worker) -> None:  # type: ignore[no-untyped-def]
    await _conversation(worker)

    # the context teaches the tool and names each group's messages: a range's first id is a working cursor
    context = await http_call(worker.port, "GET", "/v1/threads/t-home/context")
    assert "the recall tool" in context["system_blocks"][0] and 'mode "search"' in context["system_blocks"][0]
    ranges = re.findall(r"^_range: ([^:_]+):([^_]+)_$", context["observations"], re.M)
    assert ranges and context["observations"].count("## Group `") == len(ranges)
    opened = await http_call(worker.port, "POST", "/v1/recall",
                             _request("ana", {"mode": "messages", "cursor": ranges[0][0]}, "t-home"))
    assert ranges[0][0] in opened["result"]["messages"] and "Ingrid" in opened["result"]["messages"]

    page = await http_call(worker.port, "POST", "/v1/recall", _request("ana", {"mode": "messages"}, "t-home"))
    assert page["schema"] == "om.recall.response/v1" and page["result"]["mode"] == "messages"
    assert "Ingrid" in page["result"]["messages"] and page["result"]["count"] > 0

    threads = await http_call(worker.port, "POST", "/v1/recall", _request("ana", {"mode": "threads"}))
    assert "t-home" in threads["result"]["threads"] and "t-work" in threads["result"]["threads"]
    assert "t-other" not in threads["result"]["threads"], "another resource's thread"

    found = await http_call(worker.port, "POST", "/v1/recall",
                            _request("ana", {"mode": "search", "query": "which city does my sister live in?"}))
    assert found["result"]["mode"] == "search" and found["result"]["count"] > 0
    assert "Trondheim" in found["result"]["results"]

    others = await http_call(worker.port, "POST", "/v1/recall",
                             _request("bob", {"mode": "search", "query": "sister Ingrid Trondheim"}))
    assert "t-other" in others["result"]["results"], "bob finds his own thread"
    assert "t-home" not in others["result"]["results"] and "marine biologist" not in others["result"]["results"], (
        "search never crosses tenants")
    foreign = await http_call(worker.port, "POST", "/v1/recall",
                              _request("bob", {"mode": "messages", "threadId": "t-home"}), expect=400)
    assert foreign["error"]["code"] == "invalid_request" and "Ingrid" not in json.dumps(foreign)

    refused = await http_call(worker.port, "POST", "/v1/recall", {"correlation_id": "x"}, expect=400)
    assert refused["error"] == "invalid_fields"
    unknown = await http_call(worker.port, "POST", "/v1/recall",
                              {**_request("ana", {"mode": "messages"}), "schema": "om.recall.request/v7"},
                              expect=400)
    assert unknown["error"] == "unknown_schema"

    metrics = await http_call(worker.metrics_port, "GET", "/metrics", raw=True)
    assert 'om_recall_requests_total{mode="search",outcome="ok",transport="http"}' in metrics


async def test_recall_over_the_request_and_response_topics(worker) -> None:  # type: ignore[no-untyped-def]
    await _conversation(worker)
    producer = AIOKafkaProducer(bootstrap_servers=worker.bootstrap)
    consumer = AIOKafkaConsumer(worker.topics["recall_responses"], worker.topics["dlq"],
                                bootstrap_servers=worker.bootstrap, auto_offset_reset="earliest",
                                group_id=f"recall-{uuid.uuid4().hex[:8]}", metadata_max_age_ms=1000)
    await producer.start()
    await consumer.start()
    try:
        search = _request("ana", {"mode": "search", "query": "when does the deployment freeze start?"})
        browse = _request("ana", {"mode": "messages", "threadId": "current"}, "t-work")
        readable_but_wrong = {**_request("ana", {"mode": "messages"}), "arguments": {"mode": "everything"}}
        for request in (search, browse, readable_but_wrong):
            await producer.send_and_wait(worker.topics["recall_requests"], json.dumps(request).encode(),
                                         key=b"ana")
        await producer.send_and_wait(worker.topics["recall_requests"], b"{not json", key=b"ana")

        answers: dict[str, dict[str, Any]] = {}
        dead: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while (len(answers) < 3 or not dead) and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for record in records:
                    value = json.loads(record.value)
                    if record.topic == worker.topics["dlq"]:
                        dead.append(value)
                    else:
                        assert record.key == b"ana"
                        answers[value["correlation_id"]] = value
        assert len(answers) == 3 and dead, worker.tail()
        assert "December" in answers[search["correlation_id"]]["result"]["results"]
        assert "budget review" in answers[browse["correlation_id"]]["result"]["messages"]
        assert answers[readable_but_wrong["correlation_id"]]["error"]["code"] == "invalid_request"
        assert dead[0]["reason"] == "invalid_json" and dead[0]["source_topic"] == worker.topics["recall_requests"]
    finally:
        await producer.stop()
        await consumer.stop()
