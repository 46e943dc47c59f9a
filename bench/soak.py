"""``make bench-soak DURATION=...``: hours of traffic with rebalances, a provider that fails and a Cassandra restart,
and whether memory, file descriptors, tasks, maps, lag and latency stay flat.

What runs, on real Apache Kafka and production's Cassandra shape, a three-node cluster of the soak's own
(``devservices.cassandra_cluster``: replication 3, LOCAL_QUORUM; one node is restarted once), a broker of its own
too unless ``--bootstrap`` names one, with the models behind litellm at the local fake OpenAI server
(``bench/soak_judge.py``: an Observer and a Reflector that keep every user message's marker; 10 % of calls fail
with 429, 500, 503 or a reply slower than the gateway's timeout):

1. **capacity**: one worker's throughput on this workload (``--capacity-threads`` x ``--capacity-turns`` messages
   published first, then timed from the worker's first context to the context covering every thread's last
   message, by the create times the worker stamped), unless ``--rate`` is given;
2. **the soak**: three workers in one group. ``--threads`` agents (thousands) each publish a message, wait for the
   context that covers it, pause, and publish the next, at ``--rate`` messages/s in all (default: half the capacity).
   Every ``--churn-every`` seconds one worker is killed (SIGKILL) and started again, and half a period later
   another leaves gracefully (SIGTERM) and is started again (each start is a join); these two alternate between
   ``w1`` and ``w2``, while ``w0`` lives through the whole run (the sentinel: the one process whose curves span every
   rebalance). Once, at ``--cassandra-restart-at`` of the run, one Cassandra node (the second) is stopped (drained,
   SIGTERM) and started again on its data, the other two serving meanwhile. A worker that exits unasked is started
   again (counted as a crash);
3. **sampling**, every ``--sample`` seconds, per worker process: RSS, where it lives (the brk heap, anonymous and
   file-backed mappings, from ``/proc/<pid>/smaps``) and open file descriptors (``/proc``), and from
   its ``/metrics`` the asyncio tasks, the state table's records and its last recovery's seconds, the content
   cache's bytes and every in-process map's entries (``om_held_entries``); the group's lag
   (``om_consumer_group_lag_records``, input topics); the agents' publish→context p50/p99 over the window; the
   provider's answers and those paid twice. One line is printed per sample and a CSV row written;
4. **the end**: the agents stop, every thread's last message is awaited, the group is given ``--drain-timeout`` to
   read every input (lag 0), and the verdict is printed in a stable ``key: value`` form (lost, duplicated,
   version-regressed threads, unserved, the backlog still queued at the verdict, failed disturbances, model calls
   paid twice, and what the internal topics carried: model requests per cycle, the results topic's records by kind,
   ``soak_topics.py``), with the least-squares slope per hour of each sentinel curve over the run's second half,
   and a plot of the curves.

Durations read ``3600``, ``3600s``, ``60m`` or ``1h``. The samples (CSV), the verdict with the slopes and the events
(JSON) and the plot (PNG) go to ``--out`` (default ``docs/soak-<minutes>min``: ``docs/soak-60min.csv``, ``.json``,
``.png``). ``w0`` runs under tracemalloc (``bench/heap_worker.py``, ``--heap-every``): every snapshot's heap growth
by line and by file goes to ``<out>-w0-heap.txt``, to tell a leak from state that grows until it is condensed
(``--heap-every 0``: untraced). ``--sentinel-env NAME=VALUE`` gives ``w0`` alone a setting (an allocator's, or a
smaller ``OM_WORKER_CONTENT_CACHE_MB`` so that the cache is full early and what grows after is something else).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import soak_judge as judge  # noqa: E402
from soak_probe import MEMORY_PARTS, memory_split, open_fds, rss_mb, scrape  # noqa: E402
from soak_report import HELD, report, run_title, slopes, summary, write_outputs  # noqa: E402
from soak_topics import internal_traffic  # noqa: E402

from om_stream.devservices import cassandra_cluster, kafka  # noqa: E402
from om_stream.testing.fake_openai import FailurePlan, FakeOpenAI  # noqa: E402
from tests.support.cassandra_cluster import CLUSTER_ENV, cluster_keyspace  # noqa: E402
from tests.support.cluster import WorkerGroup, notable, turn_text  # noqa: E402
from tests.support.worker import WorkerProcess, message_record  # noqa: E402

OPTIONS: dict[str, Any] = {
    "observation": {"messageTokens": 400, "bufferTokens": 0.25, "bufferActivation": 0.8, "blockAfter": 1.2},
    "reflection": {"observationTokens": 600, "bufferActivation": 0.5, "blockAfter": 1.2},
}
GATEWAY_TIMEOUT_S = 5.0
RESTARTED_NODE = 1  # the cluster's second node: not the first contact point the drivers try
PER_WORKER = ("pid", "rss_mb", *MEMORY_PARTS, "fds", "tasks", "table_records", "table_mb", "cache_mb", "rebalances",
              "recovery_s", *HELD)


def seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)


def worker_env(model_url: str) -> dict[str, str]:
    return {"OM_MEMORY_MODEL": "openai/gpt-4o-mini", "OM_MEMORY_API_BASE": model_url, "OM_MEMORY_API_KEY": "soak",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OM_LOG_LEVEL": "warning",
            "OM_GATEWAY_TIMEOUT_S": str(GATEWAY_TIMEOUT_S), "OM_GATEWAY_DEADLINE_S": "60",
            "OM_GATEWAY_MAX_RETRIES": "3", "OM_GATEWAY_BACKOFF_INITIAL_S": "0.2", "OM_GATEWAY_BACKOFF_MAX_S": "2",
            "OM_GATEWAY_RETRY_AFTER_MAX_S": "1", "OM_GATEWAY_BREAKER_FAILURES": "10",
            "OM_WORKER_CYCLE_TIMEOUT_S": "90", **CLUSTER_ENV}


@dataclass
class Member:
    """A worker slot (``w0``...) of the group: its current process and what happened to it."""

    name: str
    process: WorkerProcess
    expected_down: bool = False
    crashes: int = 0

    @property
    def pid(self) -> int | None:
        popen = self.process.popen
        return popen.pid if popen is not None and popen.poll() is None else None


@dataclass
class Timeline:
    started: float = field(default_factory=time.monotonic)
    events: list[tuple[float, str]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.started

    def note(self, what: str) -> None:
        self.events.append((self.now(), what))
        print(f"[{self.now():7.0f}s] {what}", flush=True)


# -- the agents --------------------------------------------------------------------------------------------------


class Agents:
    """``threads`` agents at ``rate`` messages/s in all: publish, wait for the context, pause, publish again."""

    def __init__(self, bootstrap: str, topics: dict[str, str], threads: int, rate: float,
                 context_timeout_s: float = 180.0) -> None:
        self.bootstrap, self.topics = bootstrap, topics
        self.names = [f"t{n}" for n in range(threads)]
        self.cycle_s = threads / rate  # each thread's mean time from one message to its next
        self.context_timeout_s = context_timeout_s
        self.judge = judge.ContextJudge()
        self.sent: dict[str, int] = dict.fromkeys(self.names, 0)
        self.unserved: list[str] = []
        self.window: list[float] = []  # latencies (s) since the sampler last took them
        self.latencies: list[float] = []  # every one of the run (about 10 bytes each: 2 MB for 200,000 messages)
        self.stopping = asyncio.Event()
        self._consumer = AIOKafkaConsumer(topics["context"], bootstrap_servers=bootstrap,
                                          auto_offset_reset="earliest", metadata_max_age_ms=1000,
                                          group_id=f"soak-watch-{random.getrandbits(32):08x}",
                                          max_partition_fetch_bytes=4 * 1024 * 1024)
        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
        self._last_context = time.monotonic()

    async def start(self) -> None:
        await self._consumer.start()
        await self._producer.start()
        self._pump_task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        while True:
            batch = await self._consumer.getmany(timeout_ms=200, max_records=2000)
            for records in batch.values():
                for record in records:
                    if record.value is not None and record.key is not None:
                        self.judge.seen(record.key.decode(), record.value)
                        self._last_context = time.monotonic()

    async def run(self) -> None:
        await asyncio.gather(*(self._thread(name) for name in self.names))

    async def _thread(self, thread: str) -> None:
        rng = random.Random(thread)
        await asyncio.sleep(rng.uniform(0, self.cycle_s))
        while not self.stopping.is_set():
            index = self.sent[thread]
            role = "user" if index % 2 == 0 else "assistant"
            record = message_record(thread, index, role, turn_text(thread, index), resource=f"user-{thread}")
            published = time.monotonic()
            await self._producer.send_and_wait(self.topics["messages"], json.dumps(record).encode(),
                                               key=thread.encode())
            self.sent[thread] = index + 1
            try:
                await self.judge.wait(thread, index, self.context_timeout_s)
                latency = time.monotonic() - published
                self.window.append(latency)
                self.latencies.append(latency)
            except TimeoutError:
                self.unserved.append(record["message_id"])
            pause = self.cycle_s * rng.uniform(0.5, 1.5) - (time.monotonic() - published)
            if pause > 0:
                with_stop = asyncio.ensure_future(self.stopping.wait())
                await asyncio.wait({with_stop}, timeout=pause)
                with_stop.cancel()

    def take_window(self) -> list[float]:
        window, self.window = self.window, []
        return window

    async def settle(self, quiet_s: float = 5.0, timeout: float = 120.0) -> None:
        """Until no context arrived for ``quiet_s`` (the republications after the last rebalance are in)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() - self._last_context < quiet_s and time.monotonic() < deadline:
            await asyncio.sleep(0.5)

    async def stop(self) -> None:
        self._pump_task.cancel()
        await asyncio.gather(self._pump_task, return_exceptions=True)
        await self._producer.stop()
        await self._consumer.stop()


# -- capacity ----------------------------------------------------------------------------------------------------


async def measure_capacity(bootstrap: str, cassandra_hosts: str, model_url: str, folder: Path, *, threads: int,
                           turns: int, partitions: int) -> float:
    """Messages/s one worker handles on this workload: the messages published first, then the worker started and
    timed by the create times of its contexts, from its first to the one covering every thread's last message."""
    group = WorkerGroup(bootstrap, folder, cassandra_hosts=cassandra_hosts, keyspace=cluster_keyspace(cassandra_hosts),
                        partitions=partitions, options=OPTIONS, extra=worker_env(model_url))
    # the worker creates the topics as its settings want them (partitions, retention), then leaves; topics a
    # producer created would have the broker's defaults, which the worker refuses to start on
    member = group.add()
    await member.wait_ready(timeout=300)
    await asyncio.to_thread(member.stop)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    await producer.start()
    try:
        for index in range(turns):
            for n in range(threads):
                thread = f"c{n}"
                record = message_record(thread, index, "user" if index % 2 == 0 else "assistant",
                                        turn_text(thread, index), resource=f"user-{thread}")
                await producer.send(group.topics["messages"], json.dumps(record).encode(), key=thread.encode())
        await producer.flush()
    finally:
        await producer.stop()
    member.start()
    consumer = AIOKafkaConsumer(group.topics["context"], bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=f"soak-capacity-{random.getrandbits(32):08x}", metadata_max_age_ms=1000)
    await consumer.start()
    pending = {f"c{n}" for n in range(threads)}
    first, last = float("inf"), 0.0
    deadline = time.monotonic() + 900
    try:
        while pending and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for record in records:
                    first = min(first, record.timestamp / 1000)
                    context = json.loads(record.value)
                    if context.get("through_message_id") == f"{record.key.decode()}-m{turns - 1}":
                        pending.discard(record.key.decode())
                        last = max(last, record.timestamp / 1000)
    finally:
        await consumer.stop()
        member.stop()
    if pending:
        raise SystemExit(f"capacity: {len(pending)} threads not done in 900 s:\n{group.logs()}")
    return threads * turns / (last - first)


# -- the soak ----------------------------------------------------------------------------------------------------


class Soak:
    def __init__(self, args: argparse.Namespace, bootstrap: str, cluster: cassandra_cluster.CassandraCluster,
                 kafka_node: kafka.KafkaNode | None, server: FakeOpenAI, ledger: judge.ProviderLedger,
                 folder: Path, rate: float) -> None:
        self.args, self.bootstrap, self.cluster, self.kafka_node = args, bootstrap, cluster, kafka_node
        self.server, self.ledger, self.folder, self.rate = server, ledger, folder, rate
        self.timeline = Timeline()
        self.group = WorkerGroup(bootstrap, folder / "group", cassandra_hosts=cluster.hosts,
                                 keyspace=cluster_keyspace(cluster.hosts), partitions=args.partitions,
                                 options=OPTIONS, extra=worker_env(server.base_url))
        self.members = [Member(f"w{n}", self.group.add(start=False)) for n in range(3)]
        if args.heap_every:
            # the sentinel under tracemalloc: where its heap grows (``bench/heap_worker.py``)
            sentinel = self.members[0].process
            sentinel.module = "bench.heap_worker"
            sentinel.env.update(OM_SOAK_HEAP_OUT=str(folder / "w0-heap.txt"),
                                OM_SOAK_HEAP_EVERY_S=str(args.heap_every))
        self.members[0].process.env.update(args.sentinel_env)
        self.rows: list[dict[str, Any]] = []
        self.counts = {"kills": 0, "leaves": 0, "joins": 0, "crashes": 0, "cassandra_restarts": 0,
                       "disturbances_failed": 0}
        self.backlog: dict[str, Any] = {"backlog_at_verdict": None, "drain_s": None}
        self.cassandra_down_s = 0.0
        self.restart_began: float | None = None
        self.latencies: list[float] = []
        self.internal: dict[str, Any] = {}  # what the internal topics carried (``soak_topics``), read at the end

    async def run(self) -> dict[str, Any]:
        for member in self.members:
            member.process.start()
        await self.group.settle(timeout=300)
        self.timeline = Timeline()
        self.timeline.note(f"3 workers ready; {self.args.threads} agents at {self.rate:.1f} msgs/s")
        agents = Agents(self.bootstrap, self.group.topics, self.args.threads, self.rate)
        self.latencies = agents.latencies
        await agents.start()
        talking = asyncio.create_task(agents.run())
        background = [asyncio.create_task(self._churn()), asyncio.create_task(self._supervise()),
                      asyncio.create_task(self._restart_cassandra())]
        sampling = asyncio.create_task(self._sample_every(agents))
        try:
            await asyncio.sleep(self.args.duration)
            self.timeline.note("traffic stops; waiting for every thread's last context")
            churn, restart = background[0], background[2]
            churn.cancel()
            if self.restart_began is None:
                restart.cancel()  # a node stopped and not yet back is brought back: the run ends on three
            await asyncio.gather(churn, restart, return_exceptions=True)
            agents.stopping.set()
            await talking
            await self._drain_backlog()
            await agents.settle()
            await self._sample(agents)
            self.internal = await internal_traffic(self.bootstrap, self.group.topics, self.args.partitions)
        finally:
            sampling.cancel()
            background[1].cancel()
            await asyncio.gather(sampling, background[1], return_exceptions=True)
            await agents.stop()
            for member in self.members:
                member.expected_down = True
                await asyncio.to_thread(member.process.stop)
        verdict = agents.judge.verdict(agents.sent)
        return {**verdict, "unserved": len(agents.unserved), "messages": sum(agents.sent.values()),
                "contexts": agents.judge.contexts, **self.ledger.summary(), **self.counts, **self.backlog,
                "cassandra_down_s": round(self.cassandra_down_s, 1), "internal_topics": self.internal}

    # churn ------------------------------------------------------------------------------------------------------

    async def _churn(self) -> None:
        period = self.args.churn_every
        number = 0
        while True:
            await asyncio.sleep(period / 2)
            victim, leaver = self.members[1 + number % 2], self.members[2 - number % 2]
            await self._disturb(self._restart(victim, kill=True), f"SIGKILL and restart of {victim.name}")
            await asyncio.sleep(period / 2)
            await self._disturb(self._restart(leaver, kill=False), f"leave and restart of {leaver.name}")
            number += 1

    async def _drain_backlog(self) -> None:
        """Before the verdict, until the group has read every input (its lag is 0 on two readings in a row), for at
        most ``--drain-timeout`` seconds: a message still queued when the verdict is taken is late, not lost, and the
        verdict says how many records were still queued (``backlog_at_verdict``) rather than count them as lost."""
        began = time.monotonic()
        zero_readings, lag = 0, None
        while time.monotonic() - began < self.args.drain_timeout and zero_readings < 2:
            await asyncio.sleep(5.0)
            lags = [(await self._read_member(member)).get(f"{member.name}_lag") for member in self.members]
            known = [value for value in lags if value is not None]
            lag = max(known) if known else None
            zero_readings = zero_readings + 1 if lag == 0 else 0
        self.backlog = {"backlog_at_verdict": lag, "drain_s": round(time.monotonic() - began, 1)}
        self.timeline.note(f"backlog drained to {lag} records in {self.backlog['drain_s']:.0f} s")

    async def _disturb(self, disturbance: Any, what: str) -> None:
        """One disturbance; its failure (a restarted worker that crashed before it was ready, a node that did not
        come back in time) is said on the timeline and counted, and the churn goes on: in the first hour-long run
        a worker crashing while it joined ended the churn task silently half-way."""
        try:
            await disturbance
        except Exception as exc:  # noqa: BLE001 - any failure of the harness's own step is reported, not fatal
            self.counts["disturbances_failed"] += 1
            self.timeline.note(f"{what} failed: {type(exc).__name__}: {exc}")

    async def _restart(self, member: Member, *, kill: bool) -> None:
        member.expected_down = True
        try:
            if kill:
                member.process.kill()
                self.counts["kills"] += 1
                self.timeline.note(f"SIGKILL {member.name}")
            else:
                await asyncio.to_thread(member.process.stop)
                self.counts["leaves"] += 1
                self.timeline.note(f"graceful leave {member.name}")
            member.process.start()
            self.counts["joins"] += 1
            await member.process.wait_ready(timeout=300)
            self.timeline.note(f"{member.name} joined (pid {member.pid})")
        finally:
            member.expected_down = False

    async def _supervise(self) -> None:
        """An orchestrator's part: a worker that exited unasked is started again."""
        while True:
            await asyncio.sleep(1.0)
            for member in self.members:
                popen = member.process.popen
                if member.expected_down or popen is None or popen.poll() is None:
                    continue
                member.crashes += 1
                self.counts["crashes"] += 1
                self.timeline.note(f"{member.name} exited rc={popen.returncode}; started again\n"
                                   f"{notable(member.process.log, limit=20)}")
                member.process.start()

    async def _restart_cassandra(self) -> None:
        await asyncio.sleep(self.args.duration * self.args.cassandra_restart_at)
        await self._disturb(self._restart_node(RESTARTED_NODE), f"restart of Cassandra node {RESTARTED_NODE + 1}")

    async def _restart_node(self, index: int) -> None:
        began = self.restart_began = time.monotonic()
        self.timeline.note(f"Cassandra stops: node {index + 1} of 3 drained and stopped")
        await asyncio.to_thread(self.cluster.stop_node, index, 60)
        # launched from the loop's thread, the main one: an attached JVM dies with the thread that started it
        self.cluster.restart(index)
        await asyncio.to_thread(cassandra_cluster.wait_ready, self.cluster, 300)
        self.cassandra_down_s = time.monotonic() - began
        self.counts["cassandra_restarts"] += 1
        self.timeline.note(f"Cassandra node {index + 1} back (all three up) after {self.cassandra_down_s:.0f} s")

    def cassandra_rss_mb(self) -> float:
        """The running nodes' RSS together."""
        total = 0.0
        for index in self.cluster.running():
            with contextlib.suppress(OSError):
                total += rss_mb(self.cluster.nodes[index].process.pid)
        return round(total, 1)

    # sampling ---------------------------------------------------------------------------------------------------

    async def _sample_every(self, agents: Agents) -> None:
        while True:
            await asyncio.sleep(self.args.sample)
            await self._sample(agents)

    async def _sample(self, agents: Agents) -> None:
        now = self.timeline.now()
        window = agents.take_window()
        previous = self.rows[-1] if self.rows else {"t_s": 0.0, "sent": 0}
        sent = sum(agents.sent.values())
        row: dict[str, Any] = {"t_s": round(now, 1), "sent": sent,
                               "rate": round((sent - previous["sent"]) / max(1e-9, now - previous["t_s"]), 1),
                               # None for a window without a context awaited (after the traffic stopped)
                               "p50_ms": round(judge.percentile(window, 0.5) * 1000, 1) if window else None,
                               "p99_ms": round(judge.percentile(window, 0.99) * 1000, 1) if window else None,
                               "unserved": len(agents.unserved), "lag": None, **self.ledger.summary(),
                               "cassandra_rss_mb": self.cassandra_rss_mb(),
                               "kafka_rss_mb": round(rss_mb(self.kafka_node.process.pid), 1)
                               if self.kafka_node is not None else None,
                               "soak_rss_mb": round(rss_mb(os.getpid()), 1)}
        for member in self.members:
            row.update(await self._read_member(member))
            if row["lag"] is None and row.get(f"{member.name}_lag") is not None:
                row["lag"] = row[f"{member.name}_lag"]
        self.rows.append(row)
        workers = " | ".join(
            f"{m.name} " + ("down" if row[f"{m.name}_pid"] is None else
                            f"rss {row[f'{m.name}_rss_mb']:.0f} MB fds {row[f'{m.name}_fds']} "
                            f"tasks {row[f'{m.name}_tasks']} table {row[f'{m.name}_table_records']} "
                            f"{row[f'{m.name}_table_mb']} MB cache {row[f'{m.name}_cache_mb']} MB "
                            f"rec {row[f'{m.name}_recovery_s']} s")
            for m in self.members)
        print(f"[{now:7.0f}s] sent {sent} ({row['rate']:.1f}/s) p50 {row['p50_ms']} ms p99 {row['p99_ms']} ms"
              f" lag {row['lag']} | {workers} | answers {row['model_answers']} paid twice {row['paid_twice']}",
              flush=True)

    async def _read_member(self, member: Member) -> dict[str, Any]:
        prefix = member.name
        values: dict[str, Any] = {f"{prefix}_{key}": None for key in (*PER_WORKER, "lag")}
        pid = member.pid
        if pid is None:
            return values
        try:
            values[f"{prefix}_pid"] = pid
            values[f"{prefix}_rss_mb"] = round(rss_mb(pid), 1)
            values.update({f"{prefix}_{part}": mb for part, mb in memory_split(pid).items()})
            values[f"{prefix}_fds"] = open_fds(pid)
        except OSError:  # it exited meanwhile
            return values
        try:
            metrics = await scrape(member.process.metrics_port)
        except (OSError, TimeoutError):
            return values
        values[f"{prefix}_tasks"] = metrics.get("om_asyncio_tasks")
        values[f"{prefix}_table_records"] = metrics.get("om_table_records")
        for key, name in (("table_mb", "om_table_bytes"), ("cache_mb", "om_content_cache_bytes")):
            size = metrics.get(name)
            values[f"{prefix}_{key}"] = round(size / 2**20, 2) if size is not None else None
        values[f"{prefix}_rebalances"] = metrics.get("om_rebalances_total")
        values[f"{prefix}_recovery_s"] = metrics.get("om_table_recovery_seconds")  # the last one, after a rebalance
        values[f"{prefix}_lag"] = metrics.get("om_consumer_group_lag_records")
        for name in HELD:
            values[f"{prefix}_{name}"] = metrics.get(f"held:{name}")
        return values


async def soak(args: argparse.Namespace) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="om-soak-"))
    kafka_node = None
    # launched from the loop's thread, the main one, as the restart is: an attached JVM dies with its launcher
    cluster = cassandra_cluster.start(run_dir / "cassandra")
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            kafka_node = kafka.start(run_dir / "kafka")
            bootstrap = kafka_node.bootstrap
        waits = [asyncio.to_thread(cassandra_cluster.wait_ready, cluster)]
        if kafka_node is not None:
            waits.append(asyncio.to_thread(kafka.wait_ready, kafka_node))
        await asyncio.gather(*waits)
        print(f"cassandra cluster of 3 at {cluster.hosts}; kafka at {bootstrap}", flush=True)
        ledger = judge.ProviderLedger()
        plan = FailurePlan(rate=args.failure_rate, seed=args.seed, kinds=("429", "500", "503", "timeout"),
                           timeout_delay=GATEWAY_TIMEOUT_S * 3, retry_after=0.5)
        with FakeOpenAI(default=judge.answer, failures=plan, keep_requests=64, on_answer=ledger.heard) as server:
            capacity = None
            if args.rate is None:
                capacity = await measure_capacity(bootstrap, cluster.hosts, server.base_url,
                                                  run_dir / "capacity", threads=args.capacity_threads,
                                                  turns=args.capacity_turns, partitions=args.partitions)
                print(f"capacity of one worker: {capacity:.1f} msgs/s ({args.capacity_threads} threads x "
                      f"{args.capacity_turns} messages)", flush=True)
                ledger.reset()
            rate = args.rate if args.rate is not None else capacity * args.load  # type: ignore[operator]
            run = Soak(args, bootstrap, cluster, kafka_node, server, ledger, run_dir, rate)
            title = run_title(args, rate)
            figures: dict[str, Any] | None = None
            found: dict[str, float] = {}
            out = Path(args.out or ROOT / "docs" / f"soak-{args.duration / 60:.0f}min")
            try:
                result = await run.run()
                found = slopes(run.rows, args.duration)
                figures = summary(result, run.rows, args, capacity, rate, run.latencies)
            finally:
                write_outputs(out, run.rows, run.timeline.events, figures, found, title)
                heap = run_dir / "w0-heap.txt"
                if heap.exists():
                    shutil.copy(heap, f"{out}-w0-heap.txt")
            assert figures is not None  # the run returned
            report(figures, found, run.timeline.events)
            print(f"samples, figures and plot: {out}.csv, .json, .png")
            if result["paid_twice_other"]:
                for duplicate in ledger.duplicates:
                    if not duplicate.after_timeout:
                        print(f"  paid twice: {duplicate.thread} answered at {duplicate.first_at:.0f} and "
                              f"{duplicate.again_at:.0f} (epoch s)")
    finally:
        cluster.stop(grace=30)
        if kafka_node is not None:
            kafka_node.process.stop()
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            print(f"run folder kept: {run_dir}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=seconds, default=300.0, help="length of the soak (3600, 60m, 1h)")
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=None, help="messages/s in all (default: --load x capacity)")
    parser.add_argument("--load", type=float, default=0.5, help="share of one worker's measured capacity")
    parser.add_argument("--capacity-threads", type=int, default=200)
    parser.add_argument("--capacity-turns", type=int, default=20)
    parser.add_argument("--sample", type=seconds, default=30.0, help="seconds between two samples")
    parser.add_argument("--churn-every", type=seconds, default=180.0,
                        help="seconds between two kills (a graceful leave half-way between)")
    parser.add_argument("--cassandra-restart-at", type=float, default=0.5, help="share of the run")
    parser.add_argument("--failure-rate", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--bootstrap", default=None, help="a Kafka to use (default: a broker of the soak's own)")
    parser.add_argument("--out", default=None,
                        help="CSV, JSON and plot path without suffix (default: docs/soak-<minutes>min)")
    parser.add_argument("--drain-timeout", type=seconds, default=900.0,
                        help="after the traffic: how long to wait for the group to read every input before judging")
    parser.add_argument("--keep", action="store_true", help="keep the run folder (logs, data)")
    parser.add_argument("--heap-every", type=seconds, default=600.0,
                        help="w0 under tracemalloc: seconds between heap snapshots, written to <out>-w0-heap.txt "
                             "(0: no tracing)")
    parser.add_argument("--sentinel-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for w0 alone, e.g. MALLOC_ARENA_MAX=2 (repeatable): an "
                             "allocator or runtime setting set against the workers that run without it")
    args = parser.parse_args()
    args.sentinel_env = dict(_setting(text) for text in args.sentinel_env)
    for sig in (signal.SIGTERM, signal.SIGHUP):  # the finally blocks stop the JVMs and the workers
        signal.signal(sig, _interrupted)
    asyncio.run(soak(args))


def _setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise SystemExit(f"--sentinel-env {text!r}: expected NAME=VALUE")
    return name, value


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    main()
