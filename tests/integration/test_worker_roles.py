"""A split deployment on real Apache Kafka: a ``memory`` worker, a ``models`` worker and a ``recall`` worker, three
processes sharing one SQLite content store. The memory worker folds the messages and asks for observations; only
the models worker calls the (offline) model, and its results bring the observation home; the recall worker answers
from the request topic. Each reports its role on ``/healthz`` and ``/metrics``."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tests.support.worker import (
    WorkerProcess,
    agent_for,
    http_exchange,
    listener_ports,
    message_record,
    worker_process,
)

# no async buffering: each thread's observation is a synchronous cycle, ended by data-om-observation-end
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 150, "bufferTokens": False},
                           "reflection": {"observationTokens": 4000}}
WORDS = "the deployment moved to friday because the staging cluster needs a new partition plan"
THREADS = ("split-a", "split-b")


def _beside(memory: WorkerProcess, role: str, tmp: Path) -> WorkerProcess:
    """Another process of the same deployment (topics, app id, store), with its own role and listeners."""
    port, metrics_port = listener_ports()
    env = {**memory.env, "OM_WORKER_ROLE": role, "OM_WORKER_WEB_PORT": str(port),
           "OM_WORKER_METRICS_PORT": str(metrics_port)}
    return WorkerProcess(memory.bootstrap, env, tmp / f"{role}.log", memory.topics, port, metrics_port)


def _samples(text: str, name: str) -> dict[str, float]:
    """The samples of one metric in a Prometheus exposition: labels text -> value."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(rf"^{name}(\{{[^}}]*\}})? (\S+)$", text, re.M)}


async def _probe(process: WorkerProcess) -> tuple[dict[str, Any], str]:
    status, _, body = await http_exchange(process.metrics_port, "GET", "/healthz")
    assert status == 200, body
    _, _, metrics = await http_exchange(process.metrics_port, "GET", "/metrics")
    return json.loads(body), metrics.decode()


async def _recall(process: WorkerProcess, request: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
    producer = AIOKafkaProducer(bootstrap_servers=process.bootstrap)
    consumer = AIOKafkaConsumer(process.topics["recall_responses"], bootstrap_servers=process.bootstrap,
                                auto_offset_reset="earliest", group_id=f"recall-{uuid.uuid4().hex[:8]}",
                                metadata_max_age_ms=1000)
    await producer.start()
    await consumer.start()
    try:
        await producer.send_and_wait(process.topics["recall_requests"], json.dumps(request).encode(),
                                     key=request["resource_id"].encode())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    answer: dict[str, Any] = json.loads(record.value)
                    if answer["correlation_id"] == request["correlation_id"]:
                        return answer
        raise AssertionError(f"no recall answer after {timeout}s:\n{process.tail()}")
    finally:
        await producer.stop()
        await consumer.stop()


async def test_memory_models_and_recall_roles_split_the_work_between_processes(kafka_bootstrap: str,
                                                                              tmp_path: Path) -> None:
    memory = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite",
                            extra={"OM_WORKER_ROLE": "memory"})
    memory.log = tmp_path / "memory.log"
    models, recall = _beside(memory, "models", tmp_path), _beside(memory, "recall", tmp_path)
    processes = (memory, models, recall)
    try:
        for process in processes:
            process.start()
        for process in processes:
            await process.wait_ready()
        async with agent_for(memory) as agent:
            for turn in range(8):
                for thread in THREADS:
                    for role, index in (("user", 2 * turn), ("assistant", 2 * turn + 1)):
                        await agent.send(message_record(thread, index, role, f"{thread} turn {turn}: {WORDS}"),
                                         key=thread.encode())
            ended: dict[str, bytes] = {}

            def observed(a: Any) -> bool:
                ended.update({k: h["ce_id"] for k, _, h in a.events if h["ce_type"] == b"data-om-observation-end"})
                return set(ended) == set(THREADS)

            try:
                await agent.until(observed, timeout=120)
            except AssertionError as exc:
                _, _, made = await http_exchange(models.metrics_port, "GET", "/metrics")
                raise AssertionError(f"{exc}\nmodels worker:\n{models.tail()}\n{made.decode()[-3000:]}") from None
            for thread in THREADS:
                last = f"{thread}-m15"
                context = await agent.context_through(thread, last)
                deadline = time.monotonic() + 60
                while not context["observations"].startswith("<observations>") and time.monotonic() < deadline:
                    await agent.pump()
                    context = agent.contexts[thread][-1]
                assert context["observations"].startswith("<observations>"), (context, memory.tail())
                assert f"{thread} turn" in context["observations"]

        health, memory_metrics = await _probe(memory)
        models_health, models_metrics = await _probe(models)
        recall_health, recall_metrics = await _probe(recall)
        assert (health["role"], models_health["role"], recall_health["role"]) == ("memory", "models", "recall")
        for metrics, role in ((memory_metrics, "memory"), (models_metrics, "models"), (recall_metrics, "recall")):
            assert _samples(metrics, "om_worker_role") == {f'{{role="{role}"}}': 1.0}

        # the observations were made by the models worker: the memory worker called no model at all
        assert sum(_samples(memory_metrics, "om_model_calls_total").values()) == 0, memory_metrics
        made = _samples(models_metrics, "om_model_calls_total")
        assert sum(v for labels, v in made.items() if 'om_role="observer"' in labels and 'outcome="ok"' in labels) \
            >= len(THREADS), made
        assert sum(_samples(memory_metrics, "om_observations_total").values()) >= len(THREADS)
        assert sum(_samples(recall_metrics, "om_model_calls_total").values()) == 0

        answer = await _recall(recall, {"schema": "om.recall.request/v1", "correlation_id": uuid.uuid4().hex,
                                        "resource_id": "r1", "thread_id": "split-a",
                                        "arguments": {"mode": "messages"}})
        assert answer.get("error") is None, answer
        assert "split-a turn" in answer["result"]["messages"], answer
        _, recall_metrics = await _probe(recall)
        assert _samples(recall_metrics, "om_recall_requests_total") == {
            '{mode="messages",outcome="ok",transport="kafka"}': 1.0}
        _, memory_metrics = await _probe(memory)
        assert _samples(memory_metrics, "om_recall_requests_total") == {}, "the memory worker answered no recall"
    finally:
        for process in processes:
            process.stop()
