"""A model request that waits in the requests topic past its cycle's deadline is paid once, on real Kafka.

When the model workers fall behind, a background cycle's request can wait in ``om.model-requests`` longer than
``worker.cycle_timeout_s``; the engine then asks again (the cycle's next attempt, the same question). Both requests
are taken in turn. The hour-long soak of 2026-12-06 paid such pairs twice (1,381 answers, mostly once its backlog
aged past the 180 s timeout); the second is now answered from the first's stored result.

Here one model slot, a 4 s cycle timeout, and a provider that holds its first answer until both cycles were asked
again: two threads' buffered observations are asked for, the second waits behind the first, and both cycles reach
their deadline before any answer. Every question must reach the provider once, and the re-asks must be answered
from the stored results.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from om_stream.core.commands import RequestObservation
from om_stream.runtime.internal_codec import decode_internal
from om_stream.testing.fake_openai import FakeOpenAI, RecordedRequest, Reply, Response, Usage
from tests.support.worker import Agent, agent_for, http_exchange, message_record, running_worker

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 4_000, "bufferTokens": 0.02, "blockAfter": 2.0},
                           "reflection": {"observationTokens": 200_000}}
CYCLE_TIMEOUT_S = 4.0
BUFFERED = b"data-om-buffering-end"
OBSERVED = "User said the ferry timetable changes next week"


def _observation(call: int) -> str:
    return f"<observations>\nDate: Mar 1, 2026\n* 🔴 (09:00) {OBSERVED} (call {call}).\n</observations>"


def _observer(request: RecordedRequest) -> Response:
    return Reply(_observation(request.index), usage=Usage(200, 40))


def _events(agent: Agent) -> set[tuple[str, bytes]]:
    """(thread, event type) of every lifecycle event read."""
    return {(key, headers.get("ce_type", b"")) for key, _, headers in agent.events}


async def _attempts(bootstrap: str, topic: str) -> list[tuple[tuple[str, ...], int]]:
    """(threads, attempt) of every Observer request the one-partition ``topic`` holds, in order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        end = (await consumer.end_offsets([partition]))[partition]
        found: list[tuple[tuple[str, ...], int]] = []
        while end and await consumer.position(partition) < end:
            for record in (await consumer.getmany(partition, timeout_ms=1000)).get(partition, []):
                request = decode_internal(record.value or b"")
                if isinstance(request, RequestObservation):
                    found.append((request.thread_ids, request.attempt))
        return found
    finally:
        await consumer.stop()


def _question(request: RecordedRequest) -> str:
    return json.dumps([request.model, request.body.get("messages")], sort_keys=True)


async def _saved_from_store(port: int) -> float:
    _, _, body = await http_exchange(port, "GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith('om_model_calls_saved_total{reason="stored"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_request_re_asked_at_its_deadline_while_it_waits_in_the_topic_is_paid_once(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    asked_again = threading.Event()

    def holding_the_first_answer(request: RecordedRequest) -> Response:
        if request.index == 0:  # in the server's thread: the first answer waits until both re-asks are queued
            asked_again.wait(120)
        return _observer(request)

    with FakeOpenAI(default=holding_the_first_answer) as model:
        extra = {"OM_MEMORY_MODEL": "openai/gpt-4o-mini", "OM_MEMORY_API_BASE": model.base_url,
                 "OM_MEMORY_API_KEY": "test", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OM_GATEWAY_TIMEOUT_S": "150",
                 "OM_GATEWAY_DEADLINE_S": "300", "OM_WORKER_MODEL_CONCURRENCY": "1",
                 "OM_WORKER_CYCLE_TIMEOUT_S": str(CYCLE_TIMEOUT_S)}
        try:
            async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=1,
                                      extra=extra) as worker, agent_for(worker) as agent:
                threads = [f"reask-{name}-{uuid.uuid4().hex[:6]}" for name in ("a", "b")]
                for thread in threads:
                    for index in range(4):
                        record = message_record(thread, index, "user" if index % 2 == 0 else "assistant",
                                                f"turn {index} of {thread}: the ferry timetable changes next week "
                                                f"for the whole island, and the lighthouse keeper moved the "
                                                f"meeting to Friday")
                        await agent.send(record, key=thread.encode())
                # both cycles are asked again at their deadline (attempt 2) while the first call is held ...
                deadline = asyncio.get_running_loop().time() + 60
                while True:
                    asked = await _attempts(kafka_bootstrap, worker.topics["model_requests"])
                    if all(((t,), 2) in asked for t in threads):
                        break
                    assert asyncio.get_running_loop().time() < deadline, \
                        f"requests {asked}: no cycle was asked again\n{worker.tail()}"
                    await asyncio.sleep(0.5)
                asked_again.set()
                # ... both buffered observations complete ...
                await agent.until(lambda a: all((t, BUFFERED) in _events(a) for t in threads), timeout=120)
                # ... and the re-asks, which waited behind their first attempts, are answered from the store
                deadline = asyncio.get_running_loop().time() + 60
                while (saved := await _saved_from_store(worker.metrics_port)) < 2:
                    assert asyncio.get_running_loop().time() < deadline, f"saved {saved}\n{worker.tail()}"
                    await asyncio.sleep(0.5)
                await asyncio.sleep(2 * CYCLE_TIMEOUT_S)  # a third attempt, if any, would have been asked by now
                questions = Counter(_question(r) for r in model.requests if r.path.endswith("/chat/completions"))
                requests = Counter(await _attempts(kafka_bootstrap, worker.topics["model_requests"]))
                log = worker.tail(20_000)
        finally:
            asked_again.set()  # the server's thread is never left waiting

    assert len(questions) == 2, f"{len(questions)} distinct questions\n{log}"
    assert all(n == 1 for n in questions.values()), f"paid twice: {sorted(questions.values())}\n{log}"
    # each attempt was asked once: the worker's take-over at start asks again only for calls it did not ask itself
    assert all(n == 1 for n in requests.values()), f"requests asked more than once: {requests}\n{log}"
