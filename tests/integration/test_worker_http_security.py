"""The worker's HTTP exposure on real Kafka, with real worker processes: the ``/v1/*`` API behind a bearer token,
``/metrics`` and the probes on their own port without one, the start-up refusal of an unprotected API beyond
loopback, and the token in no log line, topic record or metric."""

from __future__ import annotations

import json
import secrets
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from om_stream.devservices.jvm import free_port
from om_stream.runtime.worker.main import EXIT_REFUSED
from tests.support.worker import (
    WorkerProcess,
    agent_for,
    http_call,
    http_exchange,
    message_record,
    running_worker,
    worker_process,
)

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 120, "bufferTokens": False},
                           "reflection": {"observationTokens": 4000}, "retrieval": {"vector": True}}
TOKEN = f"om-{secrets.token_urlsafe(32)}"
THREAD = "guarded"


@pytest.fixture
async def guarded(kafka_bootstrap: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite",
                              extra={"OM_WORKER_API_TOKEN": TOKEN, "OM_LOG_LEVEL": "debug",
                                     "OM_EMBEDDING_KIND": "offline", "OM_QDRANT_PATH": ":memory:"}) as process:
        yield process


def _recall() -> dict[str, Any]:
    return {"schema": "om.recall.request/v1", "correlation_id": uuid.uuid4().hex, "resource_id": "r1",
            "thread_id": THREAD, "arguments": {"mode": "messages"}}


async def _refused(worker: WorkerProcess, method: str, path: str, body: dict[str, Any] | None,
                   authorization: str | None) -> str:
    """Asserts a 401 with a Bearer challenge and a JSON error; returns the challenge."""
    headers = {"Authorization": authorization} if authorization is not None else None
    status, fields, content = await http_exchange(worker.port, method, path, body, headers=headers)
    assert status == 401, (method, path, authorization, status, content[:300])
    assert fields["www-authenticate"].startswith("Bearer ")
    assert json.loads(content)["error"] == "unauthorized"
    return fields["www-authenticate"]


async def _topic_bytes(worker: WorkerProcess, *names: str) -> list[bytes]:
    """Every record (key, value and headers) of the worker's topics ``names``, from the beginning."""
    consumer = AIOKafkaConsumer(*(worker.topics[name] for name in names), bootstrap_servers=worker.bootstrap,
                                auto_offset_reset="earliest", group_id=f"audit-{uuid.uuid4().hex[:8]}")
    await consumer.start()
    try:
        seen: list[bytes] = []
        while batch := await consumer.getmany(timeout_ms=3000):
            for records in batch.values():
                for record in records:
                    seen += [record.key or b"", record.value or b"", *(v for _, v in record.headers)]
        return seen
    finally:
        await consumer.stop()


async def test_the_api_admits_only_the_token_and_the_token_leaks_nowhere(guarded: WorkerProcess) -> None:
    worker = guarded
    async with agent_for(worker) as agent:
        for index in range(4):
            await agent.send(message_record(THREAD, index, "user" if index % 2 == 0 else "assistant",
                                            f"the release train leaves on thursday, note {index}"), key=THREAD.encode())
        await agent.send(b"{not json", key=THREAD.encode())  # a dead letter, so om.dlq has a record to audit
        await agent.context_through(THREAD, f"{THREAD}-m3")
        await agent.until(lambda a: len(a.dead) >= 1)

    routes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", f"/v1/threads/{THREAD}/context", None), ("GET", f"/v1/threads/{THREAD}/status", None),
        ("POST", "/v1/recall", _recall()), ("POST", f"/v1/threads/{THREAD}/observe", {})]
    for method, path, body in routes:
        assert await _refused(worker, method, path, body, None) == 'Bearer realm="om-stream"'
        for wrong in ("wrong", TOKEN[:-1], TOKEN[:12], f"{TOKEN}x", TOKEN.swapcase()):
            challenge = await _refused(worker, method, path, body, f"Bearer {wrong}")
            assert 'error="invalid_token"' in challenge
        await _refused(worker, method, path, body, f"Basic {TOKEN}")
        await _refused(worker, method, path, body, TOKEN)

    context = await http_call(worker.port, "GET", f"/v1/threads/{THREAD}/context", token=TOKEN)
    assert context["through_message_id"] == f"{THREAD}-m3"
    status = await http_call(worker.port, "GET", f"/v1/threads/{THREAD}/status", token=TOKEN)
    assert status["threadId"] == THREAD
    recalled = await http_call(worker.port, "POST", "/v1/recall", _recall(), token=TOKEN)
    assert recalled["schema"] == "om.recall.response/v1" and recalled.get("error") is None
    accepted = await http_call(worker.port, "POST", f"/v1/threads/{THREAD}/observe", {}, token=TOKEN)
    assert accepted["accepted"] is True
    await http_call(worker.port, "GET", "/v1/threads/nobody/context", token=TOKEN, expect=404)  # past the guard

    # the API port serves /v1/* only, token or not: no probes, no metrics, none of Faust's own pages
    for path in ("/metrics", "/healthz", "/readyz", "/livez", "/", "/router/", f"/table/om_state/{THREAD}/"):
        for token in (None, TOKEN):
            status_code, _, content = await http_exchange(
                worker.port, "GET", path, headers={"Authorization": f"Bearer {token}"} if token else None)
            assert status_code == 404, (path, status_code, content[:200])
    # the metrics port serves them without a token
    metrics = await http_call(worker.metrics_port, "GET", "/metrics", raw=True)
    assert "om_contexts_published_total" in metrics
    assert await http_call(worker.metrics_port, "GET", "/healthz") == {"status": "ready", "role": "all"}
    assert (await http_call(worker.metrics_port, "GET", "/readyz"))["status"] == "ready"
    assert await http_call(worker.metrics_port, "GET", "/livez") == {"status": "live"}
    assert (await http_exchange(worker.metrics_port, "GET", "/v1/threads/guarded/context"))[0] == 404

    records = await _topic_bytes(worker, "events", "dlq", "context", "commands")
    worker.stop()  # the whole log, flushed, at debug level
    log = worker.log.read_bytes()
    assert b"request refused (wrong bearer token)" in log and b"DEBUG" in log  # the log is the one that matters
    assert records and any(b"invalid_json" in r for r in records)
    assert TOKEN.encode() not in log
    assert not [r for r in records if TOKEN.encode() in r]
    assert TOKEN not in metrics


async def test_an_unprotected_api_beyond_loopback_is_refused_before_kafka(tmp_path: Path) -> None:
    # nothing listens at this bootstrap address: a worker that tried to reach Kafka would hang there, not exit
    worker = worker_process(f"127.0.0.1:{free_port()}", tmp_path, options={},
                            extra={"OM_WORKER_WEB_HOST": "0.0.0.0", "OM_LOG_LEVEL": "debug"})
    worker.start()
    assert worker.wait_exit(60) == EXIT_REFUSED
    log = worker.tail(20_000)
    assert "refuses to start" in log and "'0.0.0.0'" in log
    assert "OM_WORKER_API_TOKEN" in log and "OM_WORKER_ALLOW_UNAUTHENTICATED=true" in log
    assert "aiokafka" not in log and "connecting to kafka" not in log.lower()  # no Kafka client was started


async def test_an_explicit_waiver_lets_the_unprotected_api_start(kafka_bootstrap: str, tmp_path: Path) -> None:
    async with running_worker(kafka_bootstrap, tmp_path, options={},
                              extra={"OM_WORKER_WEB_HOST": "0.0.0.0",
                                     "OM_WORKER_ALLOW_UNAUTHENTICATED": "true"}) as worker:
        missing = await http_call(worker.port, "GET", "/v1/threads/nobody/status", expect=404)  # no token asked
        assert missing["error"] == "not_found"
        assert "accepts requests without a token" in worker.tail(50_000)
