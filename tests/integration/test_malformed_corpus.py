"""The adversarial corpus against ``om-stream worker`` on real Kafka, mixed into good traffic: every malformed record
reaches the dead-letter topic with its reason and its original bytes, every good thread still gets its contexts,
and the worker is still up at the end. One record that crashes the memory agent fails all three.

Both scopes: in resource scope the ingest agent decodes and re-keys every input before the memory agent sees it."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.malformed import Malformed, edge_valid_messages, interleave, malformed_records
from tests.support.worker import Agent, WorkerProcess, agent_for, http_call, message_record, running_worker

OPTIONS: dict[str, dict[str, Any]] = {
    "thread": {"observation": {"messageTokens": 150, "bufferTokens": 0.25, "blockAfter": 1.2},
               "reflection": {"observationTokens": 250}},
    "resource": {"scope": "resource", "observation": {"messageTokens": 150}, "reflection": {"observationTokens": 250}},
}
MAX_BYTES = 65_536  # large enough for the 35 KB nested records to be refused as too deep, not as oversize
WORDS = "the deployment moved to friday because the staging cluster needs a new partition plan"
THREADS = ["corpus-good-alpha", "corpus-good-beta", "corpus-good-gamma", "corpus-good-delta"]
TURNS = 10
COPIES = 2

Position = tuple[str, int, int]  # topic, partition, offset


WIRES = {"thread": "v2", "resource": "v1"}  # each context wire once: decoding and dead-lettering come before it


@pytest.fixture(params=sorted(OPTIONS))
async def worker(request: pytest.FixtureRequest, kafka_bootstrap: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS[request.param],
                              extra={"OM_KAFKA_MAX_MESSAGE_BYTES": str(MAX_BYTES),
                                     "OM_CONTEXT_WIRE": WIRES[request.param]}) as process:
        yield process


def _good_threads() -> list[list[dict[str, Any]]]:
    """Four threads of ordinary turns; the first also carries the records at the edges of the contract."""
    threads = []
    for thread in THREADS:
        records = [message_record(thread, i, "user" if i % 2 == 0 else "assistant", f"{thread} {i}: {WORDS}")
                   for i in range(TURNS)]
        if thread == THREADS[0]:
            records += edge_valid_messages(thread, "r1", TURNS)
            records.append(message_record(thread, TURNS + 5, "user", f"{thread} after the edges: {WORDS}"))
        threads.append(records)
    return threads


async def _publish(agent: Agent, worker: WorkerProcess, corpus: list[Malformed]) -> dict[Position, Malformed]:
    """Everything, interleaved; the position each malformed record landed at."""
    sent: dict[Position, Malformed] = {}
    for item in interleave(_good_threads(), corpus, copies=COPIES):
        if isinstance(item, Malformed):
            landed = await agent.producer.send_and_wait(worker.topics[item.topic], item.value, key=item.key)
            sent[(landed.topic, landed.partition, landed.offset)] = item
        else:
            await agent.send(item, key=item["thread_id"].encode())
    return sent


async def _settle(agent: Agent, seconds: float) -> None:
    """Keep reading for a while: a dead letter for a good record would arrive around now."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await agent.pump(timeout_ms=200)


async def test_every_malformed_record_is_dead_lettered_and_good_threads_go_on(worker: WorkerProcess) -> None:
    corpus = [entry for entry in malformed_records(MAX_BYTES) if entry.topic in ("messages", "commands")]
    assert len(corpus) * COPIES >= 100
    async with agent_for(worker) as agent:
        sent = await _publish(agent, worker, corpus)
        for thread, records in zip(THREADS, _good_threads(), strict=True):
            context = await agent.context_through(thread, records[-1]["message_id"], timeout=120)
            assert context["thread_id"] == thread
        await agent.until(lambda a: len({_position(d) for d in a.dead}) >= len(sent), timeout=120)
        await _settle(agent, 3.0)

        letters: dict[Position, list[dict[str, Any]]] = {}
        for letter in agent.dead:
            letters.setdefault(_position(letter), []).append(letter)
        missing = sorted(f"{item.kind} ({item.reason}) at {position}" for position, item in sent.items()
                         if position not in letters)
        assert not missing, f"never dead-lettered: {missing}\n{worker.tail()}"
        unexpected = sorted(f"{position}: {d['reason']}: {d['detail'][:120]}" for position, group in letters.items()
                            if position not in sent for d in group)
        assert not unexpected, f"good records were dead-lettered: {unexpected}"
        wrong = sorted(f"{sent[position].kind}: {d['reason']} ({d['detail'][:120]}), not {sent[position].reason}"
                       for position, group in letters.items() for d in group if d["reason"] != sent[position].reason)
        assert not wrong, f"dead-lettered for the wrong reason: {wrong}"
        for position, group in letters.items():
            item = sent[position]
            for letter in group:  # the original bytes, untouched
                assert letter["schema"] == "om.dlq/v1" and letter["detail"]
                assert base64.b64decode(letter["value_b64"]) == (item.value or b""), item.kind
                key = base64.b64decode(letter["key_b64"]) if letter.get("key_b64") is not None else None
                assert key == item.key, item.kind

        assert set(agent.contexts) == set(THREADS), "no malformed record reached a thread's memory"
        assert worker.popen is not None and worker.popen.poll() is None, worker.tail()
        assert await http_call(worker.metrics_port, "GET", "/healthz", expect=200) == {"status": "ready", "role": "all"}


def _position(letter: dict[str, Any]) -> Position:
    return letter["source_topic"], letter["source_partition"], letter["source_offset"]
