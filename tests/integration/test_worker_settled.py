"""Has memory caught up? ``GET /v1/threads/{id}/settled`` and ``OMClient.settled`` on a real worker process, real
Apache Kafka and real Apache Cassandra, with an Observer (a local OpenAI-compatible server reached through litellm)
that the test holds back, so that "never before the observation lands" can be seen: while the Observer is held,
neither the long-poll nor the client returns, and the context and the Cassandra log hold no observation; the moment
either returns, both do. Across a SIGKILL: a waiter gets a broken connection or a timeout, never "settled"; after
the restart both wait again and return exactly when the observation lands."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from om_stream.adapters.cassandra_store import CassandraContentStore
from om_stream.client import ClientTopics, EventStream, OMClient
from om_stream.core.events import ProgressEvent
from om_stream.settings import CassandraSettings
from om_stream.testing.fake_openai import FakeOpenAI, RecordedRequest, Reply, Response, Usage
from om_stream.wire.messages import MessageRecord
from tests.support.worker import WorkerProcess, http_call, http_exchange, message_record, worker_process

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 200, "bufferTokens": False},
                           "reflection": {"observationTokens": 200_000}}
TOKEN = "settled-test-token"
WORDS = ("we agreed to move the launch to friday because the staging cluster needs a new partition plan and the "
         "review of the budget for the north office is due on the third of april")  # ~40 tokens a message
THREAD = "settle"


class HeldObserver:
    """The model server's answers wait until the test opens the gate; each answer names its call."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.calls = 0

    def __call__(self, request: RecordedRequest) -> Response:
        self.calls += 1
        self.open.wait(timeout=600)
        return Reply(f"<observations>\nDate: Mar 1, 2026\n* 🔴 (09:00) User moved the launch to Friday "
                     f"(observation {request.index}).\n</observations>", usage=Usage(200, 40))

    def hold(self) -> None:
        self.calls = 0
        self.open.clear()


@dataclass
class Setup:
    worker: WorkerProcess
    model: HeldObserver
    store: CassandraContentStore
    client: OMClient
    sent: int = 0

    async def send(self) -> str:
        self.sent += 1
        role = "user" if self.sent % 2 else "assistant"
        record = MessageRecord.model_validate(message_record(THREAD, self.sent, role, f"{self.sent}: {WORDS}"))
        await self.client.publish(record)
        return record.message_id

    async def cross(self) -> str:
        """Messages one by one until the Observer is called (and held): the one that crossed the threshold. A
        message below it gets its context; past it the context waits for the observation."""
        self.model.hold()
        while True:
            sent = await self.send()
            deadline = time.monotonic() + 120
            while self.model.calls == 0:
                assert time.monotonic() < deadline, f"no context, no Observer call\n{self.worker.tail()}"
                latest = self.client.latest_context(THREAD)
                if latest is not None and self.client.includes(latest, sent):
                    break
                await asyncio.sleep(0.1)
            if self.model.calls:
                return sent

    async def context(self) -> dict[str, Any]:
        answer: dict[str, Any] = await http_call(self.worker.port, "GET", f"/v1/threads/{THREAD}/context",
                                                 token=TOKEN)
        return answer

    async def observed_in_cassandra(self, message_id: str) -> bool:
        """An active observation group in Cassandra ends its run of the thread's messages at this one."""
        groups = await self.store.list_groups(THREAD)
        return any(g.status == "active" and g.kind == "observation" and
                   any(r.last_message_id == message_id for r in g.ranges) for g in groups)

    async def settle_http(self, message_id: str, timeout_s: float) -> tuple[int, dict[str, Any]]:
        """The long-poll; ConnectionError when the connection breaks without an answer."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.worker.port)
        writer.write(f"GET /v1/threads/{THREAD}/settled?through={message_id}&timeout_s={timeout_s} HTTP/1.0\r\n"
                     f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        await writer.drain()
        try:
            response = await reader.read()
        except OSError as exc:
            raise ConnectionError(f"the connection broke: {exc!r}") from exc
        finally:
            writer.close()
        head, _, body = response.partition(b"\r\n\r\n")
        if not head:
            raise ConnectionError("the worker closed the connection without an answer")
        return int(head.split()[1]), json.loads(body)

    async def wait_called(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while self.model.calls == 0:
            assert time.monotonic() < deadline, f"the Observer was never called\n{self.worker.tail()}"
            await asyncio.sleep(0.2)


def _topics(worker: WorkerProcess) -> ClientTopics:
    t = worker.topics
    return ClientTopics(messages=t["messages"], commands=t["commands"], events=t["events"], context=t["context"],
                        recall_requests=t["recall_requests"], recall_responses=t["recall_responses"])



@asynccontextmanager
async def setup(kafka_bootstrap: str, cassandra_hosts: str, keyspace: str, tmp: Path) -> AsyncIterator[Setup]:
    model = HeldObserver()
    with FakeOpenAI(default=model) as server:
        worker = worker_process(kafka_bootstrap, tmp, options=OPTIONS, store="cassandra", partitions=2, extra={
            "OM_CASSANDRA_HOSTS": cassandra_hosts, "OM_CASSANDRA_KEYSPACE": keyspace,
            "OM_MEMORY_MODEL": "openai/gpt-4o-mini", "OM_MEMORY_API_BASE": server.base_url,
            "OM_MEMORY_API_KEY": "test", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OM_GATEWAY_TIMEOUT_S": "600",
            "OM_GATEWAY_DEADLINE_S": "900", "OM_WORKER_CYCLE_TIMEOUT_S": "900",
            "OM_WORKER_BLOCKING_TIMEOUT_S": "900", "OM_WORKER_API_TOKEN": TOKEN})
        store = CassandraContentStore(CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace))
        worker.start()
        try:
            await worker.wait_ready(timeout=240)
            await store.start()
            async with OMClient(kafka_bootstrap, topics=_topics(worker)) as client:
                yield Setup(worker, model, store, client)
        finally:
            model.open.set()  # a handler still holding a call lets go
            worker.stop()
            await store.close()


async def answered(events: EventStream, status: str, timeout: float = 60.0) -> None:
    """The worker answered a progress question (the client waiter's): the message stands at ``status``."""
    deadline = time.monotonic() + timeout
    while True:
        envelope = await events.next(timeout=max(0.1, deadline - time.monotonic()))
        data = envelope.data
        if isinstance(data, ProgressEvent) and data.request_id is not None and data.through is not None:
            assert data.through.status == status and not data.through.settled, data
            return


async def held_back(waiters: list[asyncio.Task[Any]], seconds: float = 3.0) -> None:
    """Every waiter is still waiting after ``seconds``."""
    await asyncio.sleep(seconds)
    done = [w for w in waiters if w.done()]
    assert not done, [w.result() if not w.exception() else w.exception() for w in done]


async def test_settled_returns_exactly_when_the_observation_lands_and_never_across_a_kill(
        kafka_bootstrap: str, cassandra_hosts: str, keyspace: str, tmp_path: Path) -> None:
    async with setup(kafka_bootstrap, cassandra_hosts, keyspace, tmp_path) as it:
        # the API is guarded like the rest of /v1, and answers a thread it does not hold with 404
        status, _, _ = await http_exchange(it.worker.port, "GET", f"/v1/threads/{THREAD}/settled")
        assert status == 401
        await http_call(it.worker.port, "GET", "/v1/threads/nobody/settled?timeout_s=1", token=TOKEN, expect=404)

        # under the threshold: settled at once, nothing observed
        await it.send()
        first = await it.send()
        quiet = await it.client.settled(THREAD, first, timeout=60)
        assert isinstance(quiet, ProgressEvent) and quiet.through is not None
        assert quiet.through.status == "unobserved" and quiet.through.settled
        status, body = await it.settle_http(first, 5)
        assert status == 200 and body["through"] == {"messageId": first, "seq": 2, "status": "unobserved",
                                                     "settled": True}
        await http_call(it.worker.port, "GET", f"/v1/threads/{THREAD}/settled?timeout_s=301", token=TOKEN,
                        expect=400)
        status_body = await http_call(it.worker.port, "GET", f"/v1/threads/{THREAD}/status", token=TOKEN)
        assert status_body["windows"] and status_body["progress"]["latestMessage"]["messageId"] == first

        # past the threshold: the Observer runs, held; nobody hears "settled", nothing is observed
        target = await it.cross()
        async with it.client.events(THREAD) as events:
            http_waiter = asyncio.create_task(it.settle_http(target, 120))
            client_waiter = asyncio.create_task(it.client.settled(THREAD, target, timeout=120))
            await answered(events, "observing")  # the client heard "not settled yet", and waits on
        await held_back([http_waiter, client_waiter])
        assert (await it.context())["observations"] == ""
        assert not await it.observed_in_cassandra(target)
        answer = await http_call(it.worker.port, "GET", f"/v1/threads/{THREAD}/settled?through={target}&timeout_s=1",
                                 token=TOKEN)
        assert answer["through"]["status"] == "observing" and not answer["through"]["settled"]  # timed out: 200

        it.model.open.set()
        status, landed = await asyncio.wait_for(http_waiter, 120)
        context, in_cassandra = await it.context(), await it.observed_in_cassandra(target)
        assert status == 200 and landed["through"]["status"] == "observed" and landed["through"]["settled"]
        assert "moved the launch to Friday" in context["observations"] and in_cassandra
        progress = await asyncio.wait_for(client_waiter, 120)
        # the answer to its question (when the worker came to it after the landing), or a change event whose
        # settledThrough reaches the seq the answer gave
        assert progress.settled_through is not None and progress.settled_through.seq >= landed["through"]["seq"]
        assert progress.through is None or progress.through.status == "observed"
        assert "moved the launch to Friday" in (await it.context())["observations"]

        # again past the threshold, held; the worker is killed while both wait
        target = await it.cross()
        async with it.client.events(THREAD) as events:
            http_waiter = asyncio.create_task(it.settle_http(target, 120))
            client_waiter = asyncio.create_task(it.client.settled(THREAD, target, timeout=30))
            await answered(events, "observing")
        await held_back([http_waiter, client_waiter])
        it.worker.kill()
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(http_waiter, 30)  # the connection broke: no answer, certainly not "settled"
        with pytest.raises(TimeoutError):
            await client_waiter  # a dead worker publishes nothing
        assert not await it.observed_in_cassandra(target)

        it.model.hold()
        it.worker.start()
        await it.worker.wait_ready(timeout=240)
        async with it.client.events(THREAD) as events:
            http_waiter = asyncio.create_task(it.settle_http(target, 180))
            client_waiter = asyncio.create_task(it.client.settled(THREAD, target, timeout=180))
            await answered(events, "observing")
        await it.wait_called()  # the restarted worker asks the Observer again (once the dead one's lease ends)
        await held_back([http_waiter, client_waiter])
        assert (await it.context())["observations"].count("moved the launch to Friday") == 1  # the first only
        assert not await it.observed_in_cassandra(target)

        it.model.open.set()
        status, landed = await asyncio.wait_for(http_waiter, 180)
        context, in_cassandra = await it.context(), await it.observed_in_cassandra(target)
        assert status == 200 and landed["through"]["status"] == "observed"
        assert in_cassandra and context["observations"].count("moved the launch to Friday") == 2
        progress = await asyncio.wait_for(client_waiter, 180)
        assert progress.settled_through is not None and progress.settled_through.seq >= landed["through"]["seq"]
