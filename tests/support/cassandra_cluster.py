"""Production's Cassandra shape in tests: workers on a three-node cluster (replication 3, LOCAL_QUORUM reads and
writes, the driver told its data center), a conversation played a range of turns at a time so that nodes die and
return between and during the ranges, and what a worker says meanwhile (``/livez``, ``/metrics``, its log).

``PhasedConversation`` plays the turns of a :class:`~tests.support.cluster.Conversation` the way agents do (each
thread publishes a message and waits for the context that includes it), ``turns`` at a time, and judges the whole
run with the same :class:`~tests.support.cluster.Outcome` as an uninterrupted run. ``ProbeMonitor`` samples a
worker's ``/livez`` and its store metrics twice a second while a test disturbs the cluster.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from om_stream.adapters.cassandra_store import migrate
from om_stream.devservices.cassandra_cluster import DATACENTER
from om_stream.settings import CassandraSettings
from tests.support.cluster import ContextWatcher, Conversation, Outcome
from tests.support.context_topics import ContextTopics
from tests.support.worker import WorkerProcess, http_exchange

# what a worker on the cluster runs with, besides the hosts and keyspace: production's settings (LOCAL_QUORUM reads
# and writes are the defaults), the data center named so that the driver's load balancing need not guess it
CLUSTER_ENV = {"OM_CASSANDRA_LOCAL_DATACENTER": DATACENTER, "OM_CASSANDRA_REPLICATION_FACTOR": "3"}


def cluster_keyspace(hosts: str) -> str:
    """A new keyspace with replication 3, migrated (what ``om-stream migrate`` does in production)."""
    keyspace = f"it_cluster_{uuid.uuid4().hex[:8]}"
    migrate(CassandraSettings(hosts=hosts, keyspace=keyspace, replication_factor=3, local_datacenter=DATACENTER))
    return keyspace


def present_on_node(host: str, port: int, keyspace: str, message_ids: Iterable[str]) -> set[str]:
    """The message ids node ``host`` alone holds, asked at consistency ONE with every other node down (so its own
    replica is the only one that can answer)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]), request_timeout=20)
    driver = Cluster([host], port=port, protocol_version=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        session = driver.connect(keyspace)
        query = SimpleStatement("SELECT message_id FROM messages_by_id WHERE message_id = %s",
                                consistency_level=ConsistencyLevel.ONE)
        return {m for m in message_ids if session.execute(query, (m,)).one() is not None}
    finally:
        driver.shutdown()


class PhasedConversation:
    """``conversation`` played ``turns`` at a time (every thread in lockstep, read-your-writes); use as ``async
    with``. Every message published is remembered with its phase's name."""

    def __init__(self, conversation: Conversation, bootstrap: str, topics: dict[str, str]) -> None:
        self.conversation = conversation
        self.topics = topics
        self.watcher = ContextWatcher(bootstrap, ContextTopics(topics))
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, acks="all")
        self.latencies: list[tuple[str, float, float]] = []
        self.unserved: list[str] = []
        self.sent: dict[str, list[str]] = {}  # phase -> message ids

    async def __aenter__(self) -> PhasedConversation:
        await self.watcher.start()
        await self.producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.producer.stop()
        await self.watcher.stop()

    async def play(self, phase: str, turns: range) -> None:
        """Turns ``turns`` of every thread; a message whose context does not come within the conversation's
        ``context_timeout_s`` is unserved and ends its thread."""
        sent = self.sent.setdefault(phase, [])

        async def thread_loop(thread: str) -> None:
            for index in turns:
                record = self.conversation.record(thread, index)
                published = time.monotonic()
                await self.producer.send_and_wait(self.topics["messages"], json.dumps(record).encode(),
                                                  key=thread.encode())
                sent.append(record["message_id"])
                try:
                    await self.watcher.through(thread, index, self.conversation.context_timeout_s)
                except TimeoutError:
                    self.unserved.append(record["message_id"])
                    return
                self.latencies.append((thread, published, time.monotonic() - published))
                if self.conversation.think_s:
                    await asyncio.sleep(self.conversation.think_s)

        await asyncio.gather(*(thread_loop(t) for t in self.conversation.names))

    async def outcome(self) -> Outcome:
        await self.watcher.settle()
        final = {t: self.watcher.final(t) for t in self.conversation.names if self.watcher.seen.get(t)}
        return Outcome(contexts=self.watcher.seen, latencies=self.latencies, final=final, unserved=self.unserved)

    def slowest(self, since: float, until: float = float("inf")) -> float:
        """The longest publish-to-context wait of the messages published in [since, until)."""
        return max((d for _, at, d in self.latencies if since <= at < until), default=0.0)


@dataclass(frozen=True)
class ProbeSample:
    at: float  # time.monotonic()
    live: int  # /livez status
    body: dict[str, Any]
    unavailable: float  # om_store_unavailable{store="cassandra"} (0 when absent)
    store_errors: float  # sum of om_store_errors_total


def _sample(text: str, name: str, labels: str = "") -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(f"{name}{{{labels}") or (not labels and line.startswith(f"{name} ")):
            total += float(line.rsplit(" ", 1)[1])
    return total


@dataclass
class ProbeMonitor:
    """Samples a worker's ``/livez`` and store metrics every ``interval_s`` until stopped (``async with``)."""

    worker: WorkerProcess
    interval_s: float = 0.5
    samples: list[ProbeSample] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ProbeMonitor:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def sample(self) -> ProbeSample:
        status, _, body = await http_exchange(self.worker.metrics_port, "GET", "/livez")
        _, _, metrics = await http_exchange(self.worker.metrics_port, "GET", "/metrics")
        text = metrics.decode()
        return ProbeSample(time.monotonic(), status, json.loads(body), _sample(text, "om_store_unavailable",
                                                                               'store="cassandra"'),
                           _sample(text, "om_store_errors_total"))

    async def _run(self) -> None:
        while True:
            with suppress(OSError):  # the worker restarting: no sample
                self.samples.append(await self.sample())
            await asyncio.sleep(self.interval_s)

    def between(self, since: float, until: float = float("inf")) -> list[ProbeSample]:
        return [s for s in self.samples if since <= s.at < until]

    async def until(self, predicate: Any, timeout: float, what: str) -> ProbeSample:
        """The first sample from now on that satisfies ``predicate``; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        seen = len(self.samples)
        while time.monotonic() < deadline:
            for sample in self.samples[seen:]:
                if predicate(sample):
                    return sample
            seen = len(self.samples)
            await asyncio.sleep(self.interval_s / 2)
        last = self.samples[-1] if self.samples else None
        await asyncio.to_thread(self.worker.dump_stacks)  # where the worker is, in its log
        raise AssertionError(f"{what}: not seen in {timeout:.0f}s (last sample: {last}; the worker's threads and "
                             f"tasks dumped to {self.worker.log})\n{self.worker.tail()}")


async def dead_letters(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of the dead-letter topic, from its start."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=f"dlq-{uuid.uuid4().hex[:8]}", enable_auto_commit=False)
    await consumer.start()
    try:
        found: list[bytes] = []
        while batch := await consumer.getmany(timeout_ms=2000):
            found += [record.value for records in batch.values() for record in records if record.value]
        return found
    finally:
        await consumer.stop()


def error_lines(worker: WorkerProcess) -> list[str]:
    """The worker log's ERROR and CRITICAL lines (one line each)."""
    return [line[:300] for line in worker.log.read_text(errors="replace").splitlines()
            if "[ERROR]" in line or "[CRITICAL]" in line]
