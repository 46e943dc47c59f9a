"""Production shapes: several ``om-stream worker`` processes in one group, and agents that talk like real ones.

``WorkerGroup`` runs any number of workers on shared topics, a shared consumer group and a shared Cassandra
keyspace, each with its own data folder and HTTP port; members join, leave (SIGTERM), die (SIGKILL) and restart.
``Conversation`` plays threads the way agents do: each thread publishes a message, waits for the context that
includes it (read-your-writes), thinks, and publishes the next; all threads at once. It records every context
seen on ``om.context``, the publish→context latency of every message, and the final context of each thread.

What a run is judged on (``Outcome``): no context takes its thread back (a version lower than one published before
is only ever the very context that version was published with, sent again after a crash), no version of a thread's
context is published with two contents, every user message appears exactly once in its thread's final context (the
newest version, the one an agent keeps: observed or still raw, and the offline Observer writes one line per user
message, so a message observed twice shows twice), every thread was served through its last message, and the final
contexts equal those of an uninterrupted single-worker run of the same conversation.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from om_stream.adapters.cassandra_store import migrate
from om_stream.core.messages import Message
from om_stream.settings import CassandraSettings
from om_stream.wire.messages import MessageRecord
from tests.support.context_topics import ContextTopics
from tests.support.store_scans import cql
from tests.support.worker import WorkerProcess, listener_ports, message_record, worker_process

# sync observation only (no buffering) and no reflection: the inputs of a thread then come in an order fixed by the
# agent waiting for each context, so any two runs of one conversation must end in the same place
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 300, "bufferTokens": False},
                           "reflection": {"observationTokens": 200_000}}
MARKER = re.compile(r"\[(t\d+)#(\d+)\]")


def new_keyspace(cassandra_hosts: str) -> str:
    keyspace = f"it_group_{uuid.uuid4().hex[:8]}"
    migrate(CassandraSettings(hosts=cassandra_hosts, keyspace=keyspace))
    return keyspace


def drop_keyspace(cassandra_hosts: str, keyspace: str) -> None:
    """Every keyspace costs the test node heap (a dozen tables each): a run drops what it created. ``cassandra_hosts``
    may name several nodes of one cluster (one port)."""
    cql(cassandra_hosts, f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)


def stalling_member(group: WorkerGroup, stall: Path) -> WorkerProcess:
    """A new member of ``group`` whose content-store writes wait while the file ``stall`` exists
    (``tests.support.stalling_worker``)."""
    member = group.add(start=False)
    member.module = "tests.support.stalling_worker"
    member.env["OM_TEST_STALL_FILE"] = str(stall)
    member.start()
    return member


class WorkerGroup:
    """Worker processes of one consumer group. ``members[i]`` keeps its data folder and port across restarts.
    The group drops its keyspace when it stops, unless ``owns_keyspace`` is false: then whoever handed it over knows
    when a drop is safe (on a cluster, not while a node that was down receives its hints: tests/cluster)."""

    def __init__(self, bootstrap: str, tmp: Path, *, cassandra_hosts: str, keyspace: str, partitions: int = 12,
                 options: dict[str, Any] | None = None, extra: dict[str, str] | None = None,
                 owns_keyspace: bool = True) -> None:
        self.tmp = tmp
        self.cassandra_hosts, self.keyspace, self.owns_keyspace = cassandra_hosts, keyspace, owns_keyspace
        self.template = worker_process(
            bootstrap, tmp, options=options or OPTIONS, store="cassandra", partitions=partitions,
            extra={"OM_CASSANDRA_HOSTS": cassandra_hosts, "OM_CASSANDRA_KEYSPACE": keyspace,
                   "OM_KAFKA_SESSION_TIMEOUT_S": "6", "OM_WORKER_CYCLE_TIMEOUT_S": "30", **(extra or {})})
        self.members: list[WorkerProcess] = []

    @property
    def topics(self) -> dict[str, str]:
        return self.template.topics

    @property
    def bootstrap(self) -> str:
        return self.template.bootstrap

    def add(self, *, start: bool = True, extra: dict[str, str] | None = None) -> WorkerProcess:
        """A new member (``extra``: variables of its own, e.g. ``OTEL_SERVICE_NAME``), started unless told not to."""
        index = len(self.members)
        folder = self.tmp / f"w{index}"
        folder.mkdir(parents=True, exist_ok=True)
        port, metrics_port = listener_ports()
        env = {**self.template.env, "OM_WORKER_DATA_DIR": str(folder), "OM_WORKER_WEB_PORT": str(port),
               "OM_WORKER_METRICS_PORT": str(metrics_port), **(extra or {})}
        member = WorkerProcess(self.bootstrap, env, folder / "worker.log", self.topics, port, metrics_port)
        self.members.append(member)
        if start:
            member.start()
        return member

    def running(self) -> list[WorkerProcess]:
        return [m for m in self.members if m.popen is not None and m.popen.poll() is None]

    async def wait_ready(self, timeout: float = 120.0) -> None:
        await asyncio.gather(*(m.wait_ready(timeout) for m in self.running()))

    async def settle(self, quiet_s: float = 5.0, timeout: float = 120.0) -> None:
        """Wait until every running member has answered ready for ``quiet_s`` in a row (members that joined one
        after the other go on rebalancing for a while after each is ready)."""
        deadline, since = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() - since < quiet_s:
            if time.monotonic() > deadline:
                raise AssertionError(f"the group did not settle in {timeout}s:\n{self.logs()}")
            try:
                await asyncio.gather(*(m.wait_ready(timeout=0.5) for m in self.running()))
            except AssertionError:
                since = time.monotonic()
            await asyncio.sleep(0.5)

    def dump_stacks(self) -> None:
        for member in self.running():
            member.dump_stacks()

    def stop_all(self) -> None:
        """Stop every member, then drop the group's keyspace if it owns it (what a test keeps is its ``Outcome``)."""
        for member in self.members:
            member.stop()
        if self.owns_keyspace:
            drop_keyspace(self.cassandra_hosts, self.keyspace)

    async def partition_report(self, message_ids: list[str]) -> str:
        """For unserved messages: their thread's partition of the messages topic, the group's committed offset
        there and the log's end (committed at the end: handled, yet never served; short of it: never handled)."""
        topic = self.topics["messages"]
        group = self.template.env["OM_WORKER_APP_ID"]
        threads = sorted({m.rsplit("-m", 1)[0] for m in message_ids})
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            partitions = list(range(int(self.template.env["OM_KAFKA_PARTITIONS"])))
            lines = []
            for thread in threads:
                tp = TopicPartition(topic, DefaultPartitioner()(thread.encode(), partitions, partitions))
                end = (await consumer.end_offsets([tp]))[tp]
                lines.append(f"{thread}: {topic}[{tp.partition}] committed {await consumer.committed(tp)}, end {end}")
            return "\n".join(lines)
        finally:
            await consumer.stop()

    def logs(self, chars: int = 3000) -> str:
        """Each member's warnings and errors over its whole run (where a lost record shows why), then its tail."""
        return "\n".join(f"--- w{i} ({m.log}) ---\n{notable(m.log)}\n... tail:\n{m.tail(chars)}"
                         for i, m in enumerate(self.members) if m.log.exists())


def notable(log: Path, limit: int = 60) -> str:
    """The warning and error lines of a worker's log (the newest ``limit``), cut to one line each."""
    lines = [line[:240] for line in log.read_text(errors="replace").splitlines()
             if "[WARNING]" in line or "[ERROR]" in line or "[CRITICAL]" in line]
    return "\n".join(lines[-limit:])


class Chaos:
    """Membership changes fired when the stream reaches given fractions, one after the other, off the agents'
    path (the agents keep talking while workers come and go)."""

    def __init__(self, total: int, steps: list[tuple[float, str, Callable[[], Awaitable[None]]]]) -> None:
        self.total = total
        self.steps = steps
        self.done: list[str] = []
        self._queue: asyncio.Queue[tuple[str, Callable[[], Awaitable[None]]]] = asyncio.Queue()
        self._runner = asyncio.create_task(self._run())

    async def on_progress(self, sent: int) -> None:
        while self.steps and sent >= self.steps[0][0] * self.total:
            _, name, action = self.steps.pop(0)
            self._queue.put_nowait((name, action))

    async def _run(self) -> None:
        while True:
            name, action = await self._queue.get()
            try:
                await action()
                self.done.append(name)
            finally:
                self._queue.task_done()

    async def finish(self) -> None:
        """Wait until every step queued has completed (the conversation may end while the last one, a rolling
        restart, still waits for its last worker: it is not cut short), then stop; a step that failed raises here."""
        drained = asyncio.ensure_future(self._queue.join())
        await asyncio.wait({drained, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        drained.cancel()
        if self._runner.done():
            self._runner.result()
        self._runner.cancel()


async def play_uninterrupted(bootstrap: str, cassandra_hosts: str, tmp: Path,
                             conversation: Conversation, wire: str = "v1") -> Outcome:
    """The conversation through one worker that nothing disturbs: where every production-shape run must end."""
    group = WorkerGroup(bootstrap, tmp, cassandra_hosts=cassandra_hosts, keyspace=new_keyspace(cassandra_hosts),
                        extra={"OM_CONTEXT_WIRE": wire})
    group.add()
    try:
        await group.wait_ready()
        outcome = await conversation.play(group.bootstrap, group.topics, wire=wire)
        if outcome.unserved:
            group.dump_stacks()  # where the worker waits, in its log, before it stops
    finally:
        group.stop_all()
    assert not outcome.unserved and not outcome.version_regressions(), group.logs()
    assert not outcome.versions_with_two_contents(), group.logs()
    assert outcome.lost_and_duplicated(conversation.turns) == (0, 0), outcome.miscounted(conversation.turns)
    return outcome


def turn_text(thread: str, index: int) -> str:
    """A user message names itself with a marker the offline Observer copies into its observation line."""
    if index % 2 == 0:
        return (f"[{thread}#{index}] my budget for the {thread} project is {1000 + index} euros and the review is "
                f"due on 2026-04-{1 + index % 28:02d}")
    return f"{thread} {index}: noted, I will keep track of the {thread} budget and the review date"


@dataclass
class Outcome:
    contexts: dict[str, list[dict[str, Any]]]
    latencies: list[tuple[str, float, float]]  # (thread, published at, seconds until its context) per message
    final: dict[str, dict[str, Any]]
    unserved: list[str]
    runs_from_published: int = 0  # v2 contexts whose run came from the published messages, not the cursors

    def version_regressions(self) -> dict[str, list[tuple[int, int]]]:
        """Per thread, (newest version before, version) of each context published under a lower version than one
        before it, unless it is the very context that version was published with (an input read again after a
        crash sends its context again as it was; an agent keeps the newest version, so it changes nothing)."""
        found = {}
        for thread, seen in self.contexts.items():
            first: dict[int, dict[str, Any]] = {}
            newest = -1
            drops = []
            for context in seen:
                version = context["version"]
                if version < newest and first.get(version) != context:
                    drops.append((newest, version))
                first.setdefault(version, context)
                newest = max(newest, version)
            if drops:
                found[thread] = drops
        return found

    def versions_with_two_contents(self) -> dict[str, list[int]]:
        """Per thread, the versions its context was published under with different contents."""
        found = {}
        for thread, seen in self.contexts.items():
            first: dict[int, dict[str, Any]] = {}
            twice = sorted({c["version"] for c in seen if first.setdefault(c["version"], c) != c})
            if twice:
                found[thread] = twice
        return found

    def marker_counts(self, turns: int) -> dict[str, dict[int, int]]:
        """Per thread: how many times each user message appears in its final context (observations + raw)."""
        counts: dict[str, dict[int, int]] = {}
        for thread, context in self.final.items():
            text = context["observations"] + "\n" + "\n".join(context["message_texts"])
            seen = dict.fromkeys(range(0, turns, 2), 0)
            for owner, index in MARKER.findall(text):
                if owner == thread:
                    seen[int(index)] = seen.get(int(index), 0) + 1
            counts[thread] = seen
        return counts

    def miscounted(self, turns: int) -> str:
        """The user messages not seen exactly once, and each affected thread's history of contexts (version,
        generation, the message it was through, the markers it held): what a failure report needs."""
        lines = []
        for thread, seen in self.marker_counts(turns).items():
            wrong = {index: n for index, n in seen.items() if n != 1}
            if not wrong:
                continue
            lines.append(f"{thread}: {wrong}")
            for context in self.contexts.get(thread, []):
                markers = [int(i) for owner, i in MARKER.findall(
                    context["observations"] + "\n" + json.dumps(context["messages"])) if owner == thread]
                lines.append(f"  v{context['version']} gen {context['generation']} through "
                             f"{context.get('through_message_id')}: {sorted(markers)}")
        return "\n".join(lines)

    def lost_and_duplicated(self, turns: int) -> tuple[int, int]:
        counts = self.marker_counts(turns)
        lost = sum(1 for seen in counts.values() for n in seen.values() if n == 0)
        duplicated = sum(n - 1 for seen in counts.values() for n in seen.values() if n > 1)
        return lost, duplicated

    def latency_p99(self, between: tuple[float, float] | None = None) -> float:
        values = sorted(d for _, at, d in self.latencies if between is None or between[0] <= at <= between[1])
        if not values:
            return 0.0
        return values[min(len(values) - 1, int(len(values) * 0.99))]

    def latency_median(self) -> float:
        return statistics.median(d for _, _, d in self.latencies) if self.latencies else 0.0

    def served_again_after(self, moment: float) -> float:
        """Seconds from ``moment`` until every thread that published after it got its first context since (an
        agent publishes its next message as soon as it has read its context, after ``think_s``)."""
        first: dict[str, float] = {}
        for thread, published, seconds in self.latencies:
            if published >= moment:
                first[thread] = min(first.get(thread, float("inf")), published + seconds)
        return max(first.values(), default=moment) - moment


@dataclass
class Conversation:
    """``threads`` threads of ``turns`` messages (user and assistant alternating), played at once."""

    threads: int
    turns: int
    think_s: float = 0.0
    context_timeout_s: float = 180.0
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.names = [f"t{n}" for n in range(self.threads)]

    def record(self, thread: str, index: int) -> dict[str, Any]:
        role = "user" if index % 2 == 0 else "assistant"
        return message_record(thread, index, role, turn_text(thread, index), resource=f"user-{thread}")

    def published(self, thread: str) -> list[Message]:
        """Every message of ``thread``, as its agent keeps them (what a v2 context's run is made of)."""
        return [MessageRecord.model_validate(self.record(thread, index)).to_message() for index in range(self.turns)]

    async def play(self, bootstrap: str, topics: dict[str, str], *, wire: str = "v1",
                   on_progress: Callable[[int], Awaitable[None]] | None = None) -> Outcome:
        """Play every thread to its end, reading the contexts as ``wire`` carries them; ``on_progress(sent)`` is
        awaited after each publish (chaos hooks)."""
        watcher = ContextWatcher(bootstrap, ContextTopics(topics, wire, self.published))
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, acks="all")
        await watcher.start()
        await producer.start()
        latencies: list[tuple[str, float, float]] = []
        unserved: list[str] = []
        sent = 0
        progress_lock = asyncio.Lock()

        async def thread_loop(thread: str) -> None:
            nonlocal sent
            for index in range(self.turns):
                record = self.record(thread, index)
                published = time.monotonic()
                await producer.send_and_wait(topics["messages"], json.dumps(record).encode(), key=thread.encode())
                async with progress_lock:
                    sent += 1
                    if on_progress is not None:
                        await on_progress(sent)
                try:
                    await watcher.through(thread, index, self.context_timeout_s)
                except TimeoutError:
                    unserved.append(record["message_id"])
                    return
                latencies.append((thread, published, time.monotonic() - published))
                if self.think_s:
                    await asyncio.sleep(self.think_s)

        try:
            await asyncio.gather(*(thread_loop(t) for t in self.names))
            await watcher.settle()
        finally:
            await producer.stop()
            await watcher.stop()
        final = {t: watcher.final(t) for t in self.names if watcher.seen.get(t)}
        return Outcome(contexts=watcher.seen, latencies=latencies, final=final, unserved=unserved,
                       runs_from_published=watcher.topics.runs_from_published)


class ContextWatcher:
    """Reads the contexts from the start and wakes whoever waits for a thread's context through a message."""

    def __init__(self, bootstrap: str, topics: ContextTopics) -> None:
        self.topics = topics  # the context topic, and on v2 the index and blocks topics, read as an agent would
        self.consumer = topics.consumer(bootstrap, f"watch-{uuid.uuid4().hex[:8]}")
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self._through: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self._task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=200)
            if not batch:
                continue
            for records in batch.values():
                for record in records:
                    read = self.topics.read(record)
                    if read is None:
                        continue
                    thread, context = read
                    self.seen.setdefault(thread, []).append(context)
                    through = context.get("through_message_id") or ""
                    index = int(through.rsplit("-m", 1)[1]) if "-m" in through else -1
                    self._through[thread] = max(self._through.get(thread, -1), index)
            async with self._changed:
                self._changed.notify_all()

    async def through(self, thread: str, index: int, timeout: float) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self._through.get(thread, -1) >= index), timeout)

    async def settle(self, quiet_s: float = 2.0) -> None:
        """Wait until no context has arrived for ``quiet_s`` (republications after the last rebalance)."""
        count = -1
        while count != sum(len(v) for v in self.seen.values()):
            count = sum(len(v) for v in self.seen.values())
            await asyncio.sleep(quiet_s)

    def final(self, thread: str) -> dict[str, Any]:
        """The thread's newest context: the one its agent keeps (the last of the newest version)."""
        newest = max(c["version"] for c in self.seen[thread])
        context = [c for c in self.seen[thread] if c["version"] == newest][-1]
        return {"observations": context["observations"], "generation": context["generation"],
                "messages": [m["message_id"] for m in context["messages"]],
                "message_texts": [p.get("text", "") for m in context["messages"] for p in m.get("parts", [])],
                "tokens": context["tokens"], "hints": context["hints"]}

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()
