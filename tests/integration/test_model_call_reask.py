"""A model request that waits in the requests topic past its cycle's deadline is paid once, on real Kafka.

When the model workers fall behind, a background cycle's request can wait in ``om.model-requests`` longer than
``worker.cycle_timeout_s``; the engine then asks again (the cycle's next attempt, the same question). Both requests
are taken in turn. The hour-long soak of 2026-12-06 paid such pairs twice (1,381 answers, mostly once its backlog
aged past the 180 s timeout); the second is now answered from the first's stored result.

Here one model slot, a 4 s cycle timeout, and a first call that takes 7 s: two threads' buffered observations are
asked for, the second waits behind the first, and both cycles reach their deadline before any answer. Every
question must reach the provider once, and the re-asks must be answered from the stored results.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from om_stream.testing.fake_openai import FakeOpenAI, RecordedRequest, Reply, Response, Usage
from tests.support.worker import Agent, agent_for, http_exchange, message_record, running_worker

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 4_000, "bufferTokens": 0.02, "blockAfter": 2.0},
                           "reflection": {"observationTokens": 200_000}}
CYCLE_TIMEOUT_S, FIRST_CALL_S = 4.0, 7.0
BUFFERED = b"data-om-buffering-end"
OBSERVED = "User said the ferry timetable changes next week"


def _observation(call: int) -> str:
    return f"<observations>\nDate: Mar 1, 2026\n* 🔴 (09:00) {OBSERVED} (call {call}).\n</observations>"


def _observer(request: RecordedRequest) -> Response:
    return Reply(_observation(request.index), usage=Usage(200, 40))


def _events(agent: Agent) -> set[tuple[str, bytes]]:
    """(thread, event type) of every lifecycle event read."""
    return {(key, headers.get("ce_type", b"")) for key, _, headers in agent.events}


async def _records(bootstrap: str, topic: str) -> int:
    """How many records the one-partition ``topic`` holds."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        return int((await consumer.end_offsets([partition]))[partition])
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
    with FakeOpenAI(default=_observer) as model:
        model.enqueue(Reply(_observation(0), usage=Usage(200, 40), delay=FIRST_CALL_S))
        extra = {"OM_MEMORY_MODEL": "openai/gpt-4o-mini", "OM_MEMORY_API_BASE": model.base_url,
                 "OM_MEMORY_API_KEY": "test", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OM_GATEWAY_TIMEOUT_S": "60",
                 "OM_GATEWAY_DEADLINE_S": "120", "OM_WORKER_MODEL_CONCURRENCY": "1",
                 "OM_WORKER_CYCLE_TIMEOUT_S": str(CYCLE_TIMEOUT_S)}
        async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=1,
                                  extra=extra) as worker, agent_for(worker) as agent:
            threads = [f"reask-{name}-{uuid.uuid4().hex[:6]}" for name in ("a", "b")]
            for thread in threads:
                for index in range(4):
                    record = message_record(thread, index, "user" if index % 2 == 0 else "assistant",
                                            f"turn {index} of {thread}: the ferry timetable changes next week "
                                            f"for the whole island, and the lighthouse keeper moved the meeting to "
                                            f"Friday")
                    await agent.send(record, key=thread.encode())
            # both buffered observations complete ...
            await agent.until(lambda a: all((t, BUFFERED) in _events(a) for t in threads), timeout=120)
            # ... each cycle was asked again at its deadline (two threads, two attempts each at least) ...
            asked = await _records(kafka_bootstrap, worker.topics["model_requests"])
            assert asked >= 4, f"{asked} model requests: no cycle was asked again\n{worker.tail()}"
            # ... and the re-asks, which waited behind their first attempts, are answered from the store
            deadline = asyncio.get_running_loop().time() + 60
            while (saved := await _saved_from_store(worker.metrics_port)) < 2:
                assert asyncio.get_running_loop().time() < deadline, f"saved {saved}\n{worker.tail()}"
                await asyncio.sleep(0.5)
            await asyncio.sleep(2 * CYCLE_TIMEOUT_S)  # a third attempt, if any, would have been asked by now
            questions = Counter(_question(r) for r in model.requests if r.path.endswith("/chat/completions"))
            log = worker.tail(20_000)

    assert len(questions) == 2, f"{len(questions)} distinct questions\n{log}"
    assert all(n == 1 for n in questions.values()), f"paid twice: {sorted(questions.values())}\n{log}"
