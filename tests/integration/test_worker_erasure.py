"""Erasure in ``om-stream worker`` on real Kafka: a thread and a resource erased over HTTP and over the commands
topic reach every store (the SQLite file's bytes, the Qdrant index's local file, the context topic's and the state
table changelog's latest record per key, the API), the other subjects keep everything, and nothing comes back:
not messages published before the erase that arrive after it, not a model answer for the erased thread that comes
after it, not a restart of the worker.

Every message carries a marker (``MK<thread>Z<n>``); the scans look for the markers in the raw bytes."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

from om_stream.testing.fake_openai import FakeOpenAI, RecordedRequest, Reply, Response, Usage
from tests.support.store_scans import files_bytes, latest_per_key
from tests.support.worker import (
    Agent,
    agent_for,
    http_call,
    message_record,
    receipt_for,
    started,
    worker_process,
)

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 150, "bufferTokens": False},
                           "reflection": {"observationTokens": 4000}, "retrieval": {"vector": True}}


def marker(thread: str, index: int) -> str:
    return f"MK{thread.replace('-', '')}Z{index}Q"


def text(thread: str, index: int) -> str:
    return (f"note {marker(thread, index)}: the ferry to the island leaves at nine and the lighthouse keeper "
            f"wants the report on the tide tables by Friday, item {index}")


async def converse(agent: Agent, thread: str, resource: str, turns: int, *, first: int = 0) -> None:
    for index in range(first, first + turns):
        role = "user" if index % 2 == 0 else "assistant"
        await agent.send(message_record(thread, index, role, text(thread, index), resource=resource),
                         key=thread.encode())
    await agent.context_through(thread, f"{thread}-m{first + turns - 1}")


async def until_in(folder: Path, markers: list[str], timeout: float = 120.0) -> None:
    """Until every marker is in the folder's files (the recall index is filled beside the memory agent)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not all(m.encode() in files_bytes(folder) for m in markers):
        assert asyncio.get_running_loop().time() < deadline, f"{markers} never reached {folder}"
        await asyncio.sleep(0.5)


async def test_an_erase_reaches_every_store_and_spares_the_others(kafka_bootstrap: str, tmp_path: Path) -> None:
    qdrant = tmp_path / "qdrant"
    process = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=3, extra={
        "OM_EMBEDDING_KIND": "offline", "OM_QDRANT_PATH": str(qdrant)})
    async with started(process) as worker, agent_for(worker) as agent:
        for thread, resource in (("t-home", "ana"), ("t-work", "ana"), ("t-other", "bob")):
            await converse(agent, thread, resource, 12)
        await until_in(qdrant, [marker(t, 0) for t in ("t-home", "t-work", "t-other")])  # indexed beside the agent
        everything = files_bytes(tmp_path)
        assert marker("t-home", 0).encode() in everything and marker("t-other", 0).encode() in everything

        # a thread, over HTTP, waiting for it to finish
        done = await http_call(worker.port, "DELETE", "/v1/threads/t-home?wait_s=60")
        assert done["state"] == "done" and done["found"] is True, done
        assert done["removed"]["messages"] == 12 and done["removed"]["state_records"] == 1, done
        again = await http_call(worker.port, "GET", f"/v1/erasures/{done['erase_id']}")
        assert again == done
        receipt = await receipt_for(agent, done["erase_id"])
        assert receipt["scope"] == "thread" and receipt["threadId"] == "t-home" and receipt["verified"] is True
        assert receipt["removed"]["recallPoints"] > 0 and receipt["removed"]["contexts"] == 1, receipt
        await http_call(worker.port, "GET", "/v1/threads/t-home/context", expect=404)

        # a resource, over the commands topic (as an agent in any language does), and an unknown one
        for erase_id, resource in (("erase-ana", "ana"), ("erase-nobody", "nobody")):
            await agent.send({"schema": "om.command/v1", "command_id": erase_id, "command": "erase",
                              "scope": "resource", "resource_id": resource}, key=resource.encode(),
                             topic="commands")
        ana = await receipt_for(agent, "erase-ana")
        nobody = await receipt_for(agent, "erase-nobody")
        assert ana["found"] is True and ana["parts"] == 3 and ana["removed"]["messages"] == 12, ana
        assert nobody["found"] is False and sum(nobody["removed"].values()) == 0, nobody
        await asyncio.sleep(1)

        everything = files_bytes(tmp_path)
        for thread in ("t-home", "t-work"):
            assert not any(marker(thread, i).encode() in everything for i in range(12)), f"{thread} in the files"
        assert all(marker("t-other", i).encode() in everything for i in range(12)), "bob lost a message"
        contexts = await latest_per_key(kafka_bootstrap, worker.topics["context"])
        assert contexts["t-home"] is None and contexts["t-work"] is None, "no tombstone on the context topic"
        assert contexts["t-other"] is not None and marker("t-other", 11).encode() in contexts["t-other"]
        changelog = await latest_per_key(kafka_bootstrap, f"{worker.env['OM_WORKER_APP_ID']}-om_records-changelog")
        assert changelog.get("t-home", None) is None and changelog.get("t-work", None) is None
        assert changelog["t-other"] is not None
        search = await http_call(worker.port, "POST", "/v1/recall", {
            "schema": "om.recall.request/v1", "correlation_id": uuid.uuid4().hex, "resource_id": "ana",
            "arguments": {"mode": "search", "query": "ferry lighthouse tide tables"}})
        assert "MK" not in json.dumps(search), search
        other = await http_call(worker.port, "POST", "/v1/recall", {
            "schema": "om.recall.request/v1", "correlation_id": uuid.uuid4().hex, "resource_id": "bob",
            "arguments": {"mode": "search", "query": "ferry lighthouse tide tables"}})
        assert "MKtother" in json.dumps(other), other

        # a message published after the receipt starts a fresh memory of the thread
        await converse(agent, "t-home", "ana", 2, first=100)
        fresh = await http_call(worker.port, "GET", "/v1/threads/t-home/context")
        assert [m["message_id"] for m in fresh["messages"]] == ["t-home-m100", "t-home-m101"]
        assert "MKthomeZ0" not in json.dumps(fresh)


def _observer(request: RecordedRequest) -> Response:
    return Reply("<observations>\nDate: Mar 1, 2026\n* 🔴 (09:00) The user keeps notes about the ferry: "
                 + " ".join(sorted({w for w in request.prompt_text.split() if w.startswith("MK")}))
                 + "\n</observations>", usage=Usage(200, 40))


async def test_nothing_comes_back_from_a_late_model_answer_lagging_messages_or_a_restart(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    with FakeOpenAI(default=_observer) as model:
        model.enqueue(Reply("<observations>\n* 🔴 (09:00) slow call\n</observations>", delay=8.0))
        process = worker_process(kafka_bootstrap, tmp_path, options={"observation": {"messageTokens": 150,
                                                                                     "bufferTokens": False}},
                                 store="sqlite", partitions=2, extra={
            "OM_MEMORY_MODEL": "openai/gpt-4o-mini", "OM_MEMORY_API_BASE": model.base_url,
            "OM_MEMORY_API_KEY": "test", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        async with started(process) as worker, agent_for(worker) as agent:
            # an Observer call for the thread is in flight (8 s) when the erase is handled; it answers afterwards
            for index in range(6):
                await agent.send(message_record("t-slow", index, "user" if index % 2 == 0 else "assistant",
                                                text("t-slow", index), resource="cy"), key=b"t-slow")
            await agent.until(lambda _: len(model.requests) >= 1, timeout=60)
            done = await http_call(worker.port, "DELETE", "/v1/threads/t-slow?wait_s=60")
            assert done["state"] == "done" and done["removed"]["messages"] == 6, done
            await asyncio.sleep(10)  # the slow answer comes back now
            assert not any(marker("t-slow", i).encode() in files_bytes(tmp_path) for i in range(6))
            await http_call(worker.port, "GET", "/v1/threads/t-slow/context", expect=404)
            assert b"slow call" not in files_bytes(tmp_path), "the late answer was stored"

        # lagging: published before the erase, read after it (the worker is down meanwhile)
        agent_producer_worker = process
        async with agent_for(agent_producer_worker) as offline_agent:
            for index in range(4):
                await offline_agent.send(message_record("t-lag", index, "user" if index % 2 == 0 else "assistant",
                                                        text("t-lag", index), resource="cy"), key=b"t-lag")
            await offline_agent.send({"schema": "om.command/v1", "command_id": "erase-lag", "command": "erase",
                                      "scope": "thread", "thread_id": "t-lag", "resource_id": "cy"},
                                     key=b"t-lag", topic="commands")
        async with started(process) as worker, agent_for(worker) as agent:
            lag = await receipt_for(agent, "erase-lag")
            # the worker read the commands and the messages in some order: the messages it handled before the erase
            # are swept (found), those after it are dropped by the fence; either way none is kept
            assert lag["found"] is (lag["removed"]["messages"] > 0), lag
            await converse(agent, "t-lag", "cy", 2, first=50)
            fresh = await http_call(worker.port, "GET", "/v1/threads/t-lag/context")
            assert [m["message_id"] for m in fresh["messages"]] == ["t-lag-m50", "t-lag-m51"]
            # a SIGKILL and a restart: the erased thread stays erased, the fresh one stays
            process.kill()
        async with started(process) as worker:
            await http_call(worker.port, "GET", "/v1/threads/t-slow/context", expect=404)
            after = await http_call(worker.port, "GET", "/v1/threads/t-lag/context")
            assert [m["message_id"] for m in after["messages"]] == ["t-lag-m50", "t-lag-m51"]
            bytes_now = files_bytes(tmp_path)
            assert not any(marker(t, i).encode() in bytes_now for t in ("t-slow", "t-lag") for i in range(6))
