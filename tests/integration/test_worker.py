"""``om-stream worker`` on real Apache Kafka: contexts and events for parallel threads, the HTTP API, bad input."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.worker import Agent, WorkerProcess, agent_for, http_call, message_record, running_worker

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 150, "bufferTokens": 0.25, "blockAfter": 1.2},
                           "reflection": {"observationTokens": 250}}
WORDS = "the deployment moved to friday because the staging cluster needs a new partition plan"


@pytest.fixture
async def worker(kafka_bootstrap: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS,
                              extra={"OM_KAFKA_MAX_MESSAGE_BYTES": "4096"}) as process:
        yield process


async def _turns(agent: Agent, threads: list[str], turns: int) -> None:
    """Each thread plays ``turns`` turns in parallel with the others, waiting for its context before each step."""

    async def play(thread: str) -> None:
        for turn in range(turns):
            for role, index in (("user", 2 * turn), ("assistant", 2 * turn + 1)):
                record = message_record(thread, index, role, f"{thread} turn {turn}: {WORDS} {turn}")
                await agent.send(record, key=thread.encode())
                if role == "user":  # the agent reads its context before calling its model
                    context = await agent.context_through(thread, record["message_id"])
                    assert record["message_id"] in [m["message_id"] for m in context["messages"]]

    await asyncio.gather(*(play(thread) for thread in threads))


async def test_parallel_threads_get_their_contexts_and_events_in_order(worker) -> None:  # type: ignore[no-untyped-def]
    threads = ["alpha", "beta", "gamma", "delta"]
    async with agent_for(worker) as agent:
        await _turns(agent, threads, turns=8)
        for thread in threads:
            final = await agent.context_through(thread, f"{thread}-m15")
            assert final["schema"] == "om.context/v1"
            assert final["thread_id"] == thread and final["resource_id"] == "r1"
            versions = [c["version"] for c in agent.contexts[thread]]
            assert versions == sorted(versions), "contexts of a thread arrive in version order"
            assert final["observations"].startswith("<observations>")  # 16 messages crossed the threshold
            assert final["observations"].rstrip().endswith("</observations>")
            assert final["system_blocks"][0].startswith("Below is your memory")
            assert final["tokens"]["messages"] <= 150 * 1.2 + 60
            assert all(f"{thread} turn" in m["parts"][0]["text"] for m in final["messages"])
        await agent.until(lambda a: sum(1 for _, e, h in a.events if h["ce_type"] == b"data-om-observation-end"
                                        or h["ce_type"] == b"data-om-activation") >= len(threads))
        ids = [h["ce_id"] for _, _, h in agent.events]
        assert len(ids) == len(set(ids)), "CloudEvents ids are unique"
        for thread, event, headers in agent.events:
            assert headers["ce_subject"].decode() == thread == event["threadId"]
            assert headers["ce_type"].decode().startswith("data-om-")
            assert headers["ce_source"] and headers["ce_time"]
        starts = {e["cycleId"] for _, e, h in agent.events if h["ce_type"].endswith(b"-start")}
        ends = {e["cycleId"] for _, e, h in agent.events if h["ce_type"].endswith((b"-end", b"-failed"))}
        assert ends <= starts


async def test_bad_input_goes_to_the_dead_letter_topic_and_the_partition_moves_on(worker) -> None:  # type: ignore[no-untyped-def]
    good = message_record("dlq-thread", 0, "user", "hello")
    cases: list[tuple[bytes | None, bytes, str]] = [
        (b"dlq-thread", b"{not json", "invalid_json"),
        (b"dlq-thread", json.dumps({**good, "schema": "om.message/v9"}).encode(), "unknown_schema"),
        (b"dlq-thread", json.dumps({k: v for k, v in good.items() if k != "role"}).encode(), "invalid_fields"),
        (b"dlq-thread", json.dumps({**good, "created_at": 12}).encode(), "invalid_fields"),
        (b"other-thread", json.dumps(good).encode(), "key_mismatch"),
        (b"dlq-thread", json.dumps({**good, "parts": [{"type": "text", "text": "x" * 5000}]}).encode(), "oversize"),
        (b"dlq-thread", b'{"schema": "om.message/v1", "text": "\xff\xfe"}', "invalid_utf8"),
        (None, json.dumps(good).encode(), "missing_key"),
        (b"dlq-thread", json.dumps({**good, "surprise": 1}).encode(), "invalid_fields"),
    ]
    async with agent_for(worker) as agent:
        for key, value, _reason in cases:
            await agent.send(value, key=key)
        await agent.send(good, key=b"dlq-thread")
        context = await agent.context_through("dlq-thread", "dlq-thread-m0")
        assert [m["message_id"] for m in context["messages"]] == ["dlq-thread-m0"]
        # the thread belongs to resource r1: another resource can neither join it nor read it
        intruder = {**message_record("dlq-thread", 1, "user", "let me in", resource="intruder")}
        cases.append((b"dlq-thread", json.dumps(intruder).encode(), "resource_mismatch"))
        await agent.send(intruder, key=b"dlq-thread")
        await agent.until(lambda a: len(a.dead) >= len(cases))
        # dead letters are keyed like their input, so partitions may interleave them: compare as sets
        assert sorted(d["reason"] for d in agent.dead) == sorted(reason for _, _, reason in cases)
        originals = {(key, value): reason for key, value, reason in cases}
        for letter in agent.dead:
            assert letter["schema"] == "om.dlq/v1"
            assert letter["source_topic"] == worker.topics["messages"]
            key = base64.b64decode(letter["key_b64"]) if letter.get("key_b64") is not None else None
            # the original key and value bytes, untouched
            assert originals[(key, base64.b64decode(letter["value_b64"]))] == letter["reason"]
            assert letter["detail"]


async def test_compressed_input_is_read_whatever_the_codec(worker) -> None:  # type: ignore[no-untyped-def]
    """Agents' producers compress as they like (franz-go and librdkafka default to snappy or lz4)."""
    from aiokafka import AIOKafkaProducer

    async with agent_for(worker) as agent:
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            producer = AIOKafkaProducer(bootstrap_servers=worker.bootstrap, compression_type=codec, linger_ms=5)
            await producer.start()
            try:
                for index in range(3):
                    record = message_record(f"zip-{codec}", index, "user", f"{codec} {WORDS} {index}")
                    await producer.send(worker.topics["messages"], json.dumps(record).encode(),
                                        key=f"zip-{codec}".encode())
                await producer.flush()
            finally:
                await producer.stop()
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            context = await agent.context_through(f"zip-{codec}", f"zip-{codec}-m2")
            assert [m["message_id"] for m in context["messages"]][-3:] == [f"zip-{codec}-m{i}" for i in range(3)]
        assert not agent.dead


async def test_http_api_reads_status_and_context_and_queues_manual_commands(worker) -> None:  # type: ignore[no-untyped-def]
    async with agent_for(worker) as agent:
        for index in range(4):
            await agent.send(message_record("api", index, "user" if index % 2 == 0 else "assistant",
                                            f"{WORDS} {index}"), key=b"api")
        await agent.context_through("api", "api-m3")
        status = await http_call(worker.port, "GET", "/v1/threads/api/status")
        assert status["windows"]["active"]["messages"]["threshold"] == 150
        assert status["threadId"] == "api"
        context = await http_call(worker.port, "GET", "/v1/threads/api/context")
        assert context["through_message_id"] == "api-m3"
        missing = await http_call(worker.port, "GET", "/v1/threads/nobody/context", expect=404)
        assert missing["error"] == "not_found"
        accepted = await http_call(worker.port, "POST", "/v1/threads/api/observe", {"force": True})
        assert accepted["accepted"] is True
        for _ in range(120):  # a forced observe() activates what is buffered and observes the rest
            after = await http_call(worker.port, "GET", "/v1/threads/api/status")
            if after["windows"]["active"]["messages"]["tokens"] == 0:
                break
            await agent.pump(250)
        assert after["windows"]["active"]["messages"]["tokens"] == 0
        assert after["windows"]["active"]["observations"]["tokens"] > 0
        bad = await http_call(worker.port, "POST", "/v1/threads/api/observe", {"guidance": "no"}, expect=400)
        assert bad["error"] == "invalid_fields"
        metrics = await http_call(worker.metrics_port, "GET", "/metrics", raw=True)
        assert "om_contexts_published_total" in metrics
        assert 'om_messages_in_total{topic="' in metrics


async def test_manual_commands_follow_the_reference_through_http_and_kafka(worker) -> None:  # type: ignore[no-untyped-def]
    async with agent_for(worker) as agent:
        for index in range(3):
            await agent.send(message_record("cmd", index, "user" if index % 2 == 0 else "assistant",
                                            f"{WORDS} {index}"), key=b"cmd")
        await agent.context_through("cmd", "cmd-m2")
        # overrides merge; one for a thread without messages is refused (HTTP 404, and a dead letter on Kafka)
        await http_call(worker.port, "POST", "/v1/threads/cmd/override", {"message_tokens": 400})
        await http_call(worker.port, "POST", "/v1/threads/cmd/override", {"observation_tokens": 900})
        for _ in range(120):
            status = await http_call(worker.port, "GET", "/v1/threads/cmd/status")
            if status["windows"]["active"]["observations"]["threshold"] == 900:
                break
            await agent.pump(250)
        assert status["windows"]["active"]["messages"]["threshold"] == 400
        assert status["windows"]["active"]["observations"]["threshold"] == 900
        missing = await http_call(worker.port, "POST", "/v1/threads/nobody/override", {"message_tokens": 400},
                                  expect=404)
        assert missing["error"] == "not_found"
        command = {"schema": "om.command/v1", "command_id": "c-unknown", "thread_id": "nobody",
                   "command": "override", "message_tokens": 400}
        await agent.send(command, topic="commands", key=b"nobody")
        await agent.until(lambda a: any(d["reason"] == "unknown_thread" for d in a.dead))
        await http_call(worker.port, "GET", "/v1/threads/nobody/status", expect=404)  # and made no record
        # observe() below the threshold does nothing; forced, it observes
        await http_call(worker.port, "POST", "/v1/threads/cmd/observe", {})
        await agent.pump(2_000)
        status = await http_call(worker.port, "GET", "/v1/threads/cmd/status")
        assert status["windows"]["active"]["observations"]["tokens"] == 0
        assert not [h for _, _, h in agent.events if h["ce_type"] == b"data-om-observation-start"]
        await http_call(worker.port, "POST", "/v1/threads/cmd/observe", {"force": True})
        for _ in range(120):
            status = await http_call(worker.port, "GET", "/v1/threads/cmd/status")
            if status["windows"]["active"]["observations"]["tokens"] > 0:
                break
            await agent.pump(250)
        assert status["windows"]["active"]["observations"]["tokens"] > 0
        # clear forgets the observations, not the conversation
        await agent.send({"schema": "om.command/v1", "command_id": "c-clear", "thread_id": "cmd",
                          "command": "clear"}, topic="commands", key=b"cmd")
        await agent.until(lambda a: bool(a.contexts.get("cmd")) and a.contexts["cmd"][-1]["observations"] == ""
                          and len(a.contexts["cmd"][-1]["messages"]) == 3)


@pytest.mark.parametrize("table_store", ["memory://", "rocksdb://"])
async def test_metrics_say_what_the_worker_holds_in_process(kafka_bootstrap: str, tmp_path: Path,
                                                            table_store: str) -> None:
    """The inventory gauges (runtime/worker/inventory.py) count what this worker's traffic put in its maps; RocksDB
    estimates its records (overwritten values count until a compaction drops them) and their bytes."""
    threads = [f"held-{n}" for n in range(6)]
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, partitions=2,
                              extra={"OM_WORKER_TABLE_STORE": table_store}) as worker, agent_for(worker) as agent:
        await _turns(agent, threads, turns=2)
        await _held_in_process(worker, records=(6, 6) if table_store == "memory://" else (6, 1000))


async def _held_in_process(worker: WorkerProcess, records: tuple[int, int]) -> None:

    def read(text: str) -> dict[str, float]:
        found = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                label = sample.labels.get("map")
                found[f"{sample.name}[{label}]" if label else sample.name] = sample.value
        return found

    def holds(seen: dict[str, float]) -> bool:
        return (records[0] <= seen.get("om_table_records", -1) <= records[1] and seen.get("om_table_bytes", 0) > 0
                and seen.get("om_held_entries[recent_contexts]") == 6.0
                and seen.get("om_held_entries[decoded_states]") == 6.0)

    seen: dict[str, float] = {}
    for _ in range(60):  # read every 10 s by the worker
        seen = read(await http_call(worker.metrics_port, "GET", "/metrics", raw=True))
        if holds(seen):
            break
        await asyncio.sleep(0.5)
    assert holds(seen), {name: value for name, value in seen.items() if name.startswith(("om_table", "om_held"))}
    assert seen["om_asyncio_tasks"] > 0
    assert seen["om_content_cache_bytes"] > 0 and seen["om_held_entries[content_cache]"] > 0
    for name in ("timers", "timer_heap", "model_calls", "inflight_calls", "settled_waiters", "near_block_after"):
        assert f"om_held_entries[{name}]" in seen, sorted(seen)
