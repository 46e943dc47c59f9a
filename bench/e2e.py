"""``make bench-e2e``: om-stream worker throughput and publish→context latency on real Apache Kafka.

In the same run, over identical topics and ~1 KB payloads spread over many threads:
  1. a bare aiokafka consume→produce loop (the ceiling of Python on Kafka),
  2. a bare Faust agent that decodes and forwards each record (the ceiling of the framework),
  3. ``om-stream worker`` with the offline model (the content store is chosen with ``--store``).
Throughput: N messages published, timed from the pipeline's first output record until the output that covers
the last message of every thread (for om-stream: a context whose ``through_message_id`` is that message), both by
the create time the pipeline's producer stamped on them; the time a process takes to join its group is thus
excluded. ``--workers`` and ``--split`` run several memory workers in one group, and the model calls in a
``--role models`` process of their own; ``--compare DIR`` runs the same deployments from another checkout too (a
change measured against its parent in the same trials). Each trial prints what a pipeline wrote per message.
Latency (for each one-worker deployment): messages published at a steady rate (default 200/s), each timed from its
send to the first context that includes it.
``--wire v1,v2`` measures each deployment with whole contexts (``om.context/v1``) and by reference (``v2``); a v2
run's bytes count its cursors and, once the run is over, everything on the index and blocks topics. ``--traced
0.1,1`` adds one worker traced at each sampling ratio; ``--upstream 0.1`` gives every record (of every pipeline) the
``traceparent`` of an agent that sampled a tenth of its traces, as traced agents send them. The last lines,
one per deployment, are stable: ``store=... workers=... wire=... msgs_per_s=... faust_ratio=... p99_ms=...
bytes_per_msg=...`` (bytes: output value bytes per input message, median).
Every figure is the median of several trials, run round-robin. Targets (runtime issue): om-stream ≥ 0.6× the
bare Faust passthrough and ≥ 1,500 msgs/s; p99 ≤ 100 ms at 200 msgs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from om_stream.client.tail import topic_partitions  # noqa: E402
from om_stream.devservices import start_services  # noqa: E402
from om_stream.devservices.jvm import free_port  # noqa: E402
from om_stream.retention import topic_policies  # noqa: E402
from om_stream.settings import KafkaSettings, LifecycleSettings  # noqa: E402

WORDS = ("latency", "throughput", "partition", "deploy", "review", "budget", "schedule", "metrics", "error", "retry",
         "timeout", "cluster", "query", "index", "window", "customer", "report", "summary", "design", "option")


def payload(thread: str, index: int, rng: random.Random) -> dict[str, Any]:
    text = " ".join(rng.choice(WORDS) for _ in range(150))[:900]
    return {"schema": "om.message/v1", "message_id": f"{thread}-{index}", "thread_id": thread,
            "resource_id": f"user-{thread}", "role": "user" if index % 2 == 0 else "assistant",
            "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "parts": [{"type": "text", "text": text}]}


def agent_headers(chance: random.Random, upstream: float | None) -> list[tuple[str, bytes]] | None:
    """With ``upstream``, the W3C ``traceparent`` of an agent traced upstream whose own sampler kept that share of its
    traces (a traced worker's parent-based sampler then follows it); without, no headers, as an untraced agent."""
    if upstream is None:
        return None
    flags = "01" if chance.random() < upstream else "00"
    return [("traceparent", f"00-{chance.getrandbits(128):032x}-{chance.getrandbits(64):016x}-{flags}".encode())]


async def create_topics(bootstrap: str, names: list[str], partitions: int,
                        configs: dict[str, dict[str, str]] | None = None) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1,
                                            topic_configs=(configs or {}).get(n, {})) for n in names])
    finally:
        await admin.close()


def om_topic_configs(env: dict[str, str]) -> dict[str, dict[str, str]]:
    """The configuration om-stream's workers create (and check) their topics with: a worker refuses a topic that
    keeps data longer than its lifecycle settings promise."""
    kafka = KafkaSettings(**{f"topic_{n}": env[f"OM_KAFKA_TOPIC_{n.upper()}"] for n in CONTEXT_TOPICS})
    return {policy.topic: policy.config()
            for policy in topic_policies(kafka, LifecycleSettings(), resource_scope=False)}


CONTEXT_TOPICS = ("messages", "context", "context_index", "context_blocks")


async def topic_bytes(bootstrap: str, topics: list[str]) -> tuple[int, int]:
    """(records, value bytes) of everything ``topics`` hold now (read from their beginning to their end): what
    om.context/v2 writes beside its cursors (the block index and the blocks), counted once the run is over."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    records = size = 0
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in await topic_partitions(consumer, t, 30)]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        left = {tp for tp in partitions if ends[tp] > 0}
        while left:
            batch = await consumer.getmany(*left, timeout_ms=500)
            for tp, found in batch.items():
                for record in found:
                    records += 1
                    size += len(record.value or b"")
                if await consumer.position(tp) >= ends[tp]:
                    left.discard(tp)
    finally:
        await consumer.stop()
    return records, size


async def preload(bootstrap: str, topic: str, threads: int, per_thread: int,
                  upstream: float | None = None) -> dict[str, str]:
    rng, chance = random.Random(7), random.Random(11)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    last: dict[str, str] = {}
    try:
        for index in range(per_thread):
            for t in range(threads):
                thread = f"th{t}"
                record = payload(thread, index, rng)
                await producer.send(topic, json.dumps(record).encode(), key=thread.encode(),
                                    headers=agent_headers(chance, upstream))
                last[thread] = record["message_id"]
        await producer.flush()
    finally:
        await producer.stop()
    return last


@dataclass
class Outputs:
    """What a pipeline wrote to its output topic, as a reader saw it: (first output, the output that covered the last
    thread's last message) in seconds, as the producing process stamped them (the records' create time: neither when
    the reader joined nor how far behind it reads counts), and how many records and value bytes until then."""

    first: float = float("inf")
    done: float = 0.0
    records: int = 0
    value_bytes: int = 0  # every value written on the output topics (om.context/v2: with the index and the blocks)


async def wait_outputs(bootstrap: str, topic: str, last: dict[str, str], timeout: float,
                       through: bool) -> Outputs:
    """Read ``topic`` until every thread's last message is covered (``through``: a context's
    ``through_message_id``; else the record's ``message_id``)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=f"bench-read-{uuid.uuid4().hex[:6]}", metadata_max_age_ms=1000)
    await consumer.start()
    pending = dict(last)
    outputs = Outputs()
    deadline = time.monotonic() + timeout
    try:
        while pending and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            for records in batch.values():
                for record in records:
                    outputs.first = min(outputs.first, record.timestamp / 1000)
                    outputs.records += 1
                    outputs.value_bytes += len(record.value)
                    value = json.loads(record.value)
                    thread = record.key.decode()
                    seen = value.get("through_message_id") if through else value.get("message_id")
                    if pending.get(thread) == seen:
                        del pending[thread]
                        outputs.done = max(outputs.done, record.timestamp / 1000)
        if pending:
            raise RuntimeError(f"{len(pending)} threads not done before the timeout")
        return outputs
    finally:
        await consumer.stop()


def spawn(args: list[str], env: dict[str, str], log: Path, code: Path = ROOT) -> subprocess.Popen[bytes]:
    """Start ``args`` with ``code`` (a checkout of om-stream) first on the import path."""
    with log.open("ab") as out:
        return subprocess.Popen(args, env={**os.environ, **env, "PYTHONPATH": str(code)}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def worker_env(bootstrap: str, prefix: str, partitions: int, store: str, folder: Path,
               cassandra: str | None = None) -> dict[str, str]:
    """The worker's settings; with ``cassandra``, a fresh keyspace migrated for it."""
    env = _worker_env(bootstrap, prefix, partitions, store, folder)
    if cassandra:
        env.update(OM_CASSANDRA_HOSTS=cassandra, OM_CASSANDRA_KEYSPACE=f"bench_{prefix}")
        subprocess.run([sys.executable, "-m", "om_stream", "migrate"], env={**os.environ, **env,
                       "PYTHONPATH": str(ROOT)}, check=True, capture_output=True, timeout=300)
    return env


def _worker_env(bootstrap: str, prefix: str, partitions: int, store: str, folder: Path) -> dict[str, str]:
    names = ("messages", "commands", "model_requests", "model_results", "records", "events", "context",
             "context_index", "context_blocks", "dlq", "recall_requests", "recall_responses")
    return {"OM_KAFKA_BOOTSTRAP": bootstrap, "OM_KAFKA_PARTITIONS": str(partitions), "OM_KAFKA_REPLICATION": "1",
            "OM_KAFKA_SESSION_TIMEOUT_S": "6", "OM_WORKER_APP_ID": prefix, "OM_WORKER_WEB_PORT": str(free_port()),
            "OM_MEMORY_STORE": store, "OM_MEMORY_SQLITE_PATH": str(folder / f"{prefix}.db"),
            "OM_WORKER_DATA_DIR": str(folder),
            "OM_MEMORY_MODEL": "offline", "OM_LOG_LEVEL": "warning",
            **({"OM_WORKER_BATCH_WITHIN_S": os.environ["BENCH_WITHIN"]} if "BENCH_WITHIN" in os.environ else {}),
            **{f"OM_KAFKA_TOPIC_{n.upper()}": f"{prefix}.{n}" for n in names}}


@dataclass(frozen=True)
class Deployment:
    """The om-stream processes of a run: ``workers`` memory workers in one group (each with every agent, or with
    ``split``: the memory role only, beside one ``--role models`` process for the Observer and Reflector calls),
    running the om-stream of ``code`` (this checkout, or another one given with ``--compare``)."""

    workers: int = 1
    split: bool = False
    code: Path = ROOT
    wire: str = "v1"  # OM_CONTEXT_WIRE
    # traced: the share of traces sampled (OTEL_TRACES_SAMPLER_ARG), exported over OTLP to ``otlp``; None: tracing off
    traced: float | None = None
    otlp: str = ""

    @property
    def label(self) -> str:
        label = (f"{self.workers} worker{'s' if self.workers > 1 else ''}{' + models' if self.split else ''}"
                 f", {self.wire}")
        if self.traced is not None:
            label += f", traced {self.traced:.0%}"
        return label if self.code == ROOT else f"{label} [{checkout_name(self.code)}]"

    def tracing_env(self) -> dict[str, str]:
        """The standard OpenTelemetry variables of a traced deployment (none: tracing stays off)."""
        if self.traced is None:
            return {}
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.otlp, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
                "OTEL_TRACES_SAMPLER_ARG": str(self.traced), "OTEL_SERVICE_NAME": "om-stream-bench"}

    def processes(self, env: dict[str, str], folder: Path, prefix: str) -> list[tuple[str, dict[str, str]]]:
        """(name, environment) of every process to start."""
        roles = [("memory" if self.split else "all", f"w{n}") for n in range(self.workers)]
        if self.split:
            roles.append(("models", "models"))
        return [(name, {**env, **self.tracing_env(), "OM_WORKER_ROLE": role, "OM_CONTEXT_WIRE": self.wire,
                        "OM_WORKER_WEB_PORT": str(free_port()),
                        "OM_WORKER_METRICS_PORT": str(free_port()),
                        "OM_WORKER_DATA_DIR": str(folder / f"{prefix}-{name}")}) for role, name in roles]


def start_workers(deployment: Deployment, env: dict[str, str], folder: Path,
                  prefix: str) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    """Start every process of ``deployment``; returns them and their metrics ports (for ``wait_ready``)."""
    processes, ports = [], []
    for name, process_env in deployment.processes(env, folder, prefix):
        Path(process_env["OM_WORKER_DATA_DIR"]).mkdir(parents=True, exist_ok=True)
        processes.append(spawn([sys.executable, "-m", "om_stream.runtime.worker"], process_env,
                               folder / f"{prefix}-{name}.log", deployment.code))
        ports.append(int(process_env["OM_WORKER_METRICS_PORT"]))
    return processes, ports


async def wait_ready(processes: list[subprocess.Popen[bytes]], ports: list[int], timeout: float = 180.0,
                     quiet_s: float = 5.0) -> None:
    """Until every process has answered ``/healthz`` 200 for ``quiet_s`` in a row (the group has settled: a member
    that joins after another makes the group rebalance again)."""
    deadline, since = time.monotonic() + timeout, time.monotonic()
    while time.monotonic() - since < quiet_s:
        if any(process.poll() is not None for process in processes):
            raise RuntimeError(f"a worker exited before it was ready: {[process.args for process in processes]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the workers were not ready within {timeout:.0f}s")
        if not all([await _healthy(port) for port in ports]):
            since = time.monotonic()
        await asyncio.sleep(0.5)


async def _healthy(port: int) -> bool:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
        await writer.drain()
        status = await reader.read(64)
        writer.close()
        return b" 200 " in status
    except OSError:
        return False


async def throughput(kind: str, bootstrap: str, folder: Path, *, threads: int, per_thread: int, partitions: int,
                     store: str, cassandra: str | None, deployment: Deployment = Deployment(),
                     upstream: float | None = None) -> tuple[float, Outputs]:
    """Messages per second from the first output to the last thread's last one, and what was written meanwhile.
    om-stream's processes are started and settled first, then the messages are published (with several workers a
    late join would rebalance the group mid-run); a baseline starts on the preloaded topic."""
    prefix = f"b{uuid.uuid4().hex[:8]}"
    total = threads * per_thread
    processes: list[subprocess.Popen[bytes]] = []
    try:
        if kind == "om-stream":
            env = worker_env(bootstrap, prefix, partitions, store, folder, cassandra)
            source, sink, through = env["OM_KAFKA_TOPIC_MESSAGES"], env["OM_KAFKA_TOPIC_CONTEXT"], True
            await create_topics(bootstrap, [env[f"OM_KAFKA_TOPIC_{n.upper()}"] for n in CONTEXT_TOPICS], partitions,
                                om_topic_configs(env))
            processes, ports = start_workers(deployment, env, folder, prefix)
            await wait_ready(processes, ports)
            last = await preload(bootstrap, source, threads, per_thread, upstream)
        else:
            source, sink, through = f"{prefix}.in", f"{prefix}.out", False
            await create_topics(bootstrap, [source, sink], partitions)
            env = {"BENCH_BOOTSTRAP": bootstrap, "BENCH_IN": source, "BENCH_OUT": sink, "BENCH_GROUP": prefix,
                   "BENCH_PARTITIONS": str(partitions), "BENCH_WEB_PORT": str(free_port()),
                   "BENCH_DATA_DIR": str(folder / f"{prefix}-data")}
            last = await preload(bootstrap, source, threads, per_thread, upstream)
            processes.append(spawn([sys.executable, str(ROOT / "bench" / "pipelines.py"), kind], env,
                                   folder / f"{prefix}-{kind}.log"))
        outputs = await wait_outputs(bootstrap, sink, last, timeout=600, through=through)
        if kind == "om-stream" and deployment.wire == "v2":
            records, size = await topic_bytes(bootstrap, [env["OM_KAFKA_TOPIC_CONTEXT_INDEX"],
                                                          env["OM_KAFKA_TOPIC_CONTEXT_BLOCKS"]])
            outputs.records += records
            outputs.value_bytes += size
    finally:
        for process in processes:
            stop(process)
    return total / max(1e-6, outputs.done - outputs.first), outputs


async def latency(bootstrap: str, folder: Path, *, rate: int, seconds: int, threads: int, partitions: int,
                  store: str, cassandra: str | None, deployment: Deployment = Deployment(),
                  upstream: float | None = None) -> tuple[float, float]:
    prefix = f"l{uuid.uuid4().hex[:8]}"
    env = worker_env(bootstrap, prefix, partitions, store, folder, cassandra)
    source, sink = env["OM_KAFKA_TOPIC_MESSAGES"], env["OM_KAFKA_TOPIC_CONTEXT"]
    await create_topics(bootstrap, [env[f"OM_KAFKA_TOPIC_{n.upper()}"] for n in CONTEXT_TOPICS], partitions,
                        om_topic_configs(env))
    processes, ports = start_workers(deployment, env, folder, prefix)
    consumer = AIOKafkaConsumer(sink, bootstrap_servers=bootstrap, auto_offset_reset="latest",
                                group_id=f"lat-{prefix}", metadata_max_age_ms=1000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await consumer.start()
    await producer.start()
    sent: dict[str, float] = {}
    order: dict[str, list[str]] = {}
    latencies: list[float] = []
    rng, chance = random.Random(3), random.Random(13)

    async def read() -> None:
        covered: dict[str, int] = {}
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            now = time.monotonic()
            for records in batch.values():
                for record in records:
                    value = json.loads(record.value)
                    thread = record.key.decode()
                    ids = order.get(thread, [])
                    through = value.get("through_message_id")
                    if through in ids:
                        position = ids.index(through)
                        for message_id in ids[covered.get(thread, 0):position + 1]:
                            latencies.append(now - sent[message_id])
                        covered[thread] = max(covered.get(thread, 0), position + 1)

    try:
        # settled first: a process that joins late would rebalance the group during the measurement
        await wait_ready(processes, ports)
        # warm-up: let the worker join its group and create its internal topics
        warm = payload("warmup", 0, rng)
        await producer.send_and_wait(source, json.dumps(warm).encode(), key=b"warmup")
        await asyncio.sleep(15)
        reader = asyncio.create_task(read())
        interval = 1.0 / rate
        next_at = time.monotonic()
        for index in range(rate * seconds):
            thread = f"th{index % threads}"
            record = payload(thread, index // threads, rng)
            order.setdefault(thread, []).append(record["message_id"])
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            sent[record["message_id"]] = time.monotonic()
            await producer.send(source, json.dumps(record).encode(), key=thread.encode(),
                                headers=agent_headers(chance, upstream))
        await asyncio.sleep(5)
        reader.cancel()
    finally:
        await producer.stop()
        await consumer.stop()
        for process in processes:
            stop(process)
    latencies.sort()
    if len(latencies) < rate * seconds * 0.95:
        raise RuntimeError(f"only {len(latencies)} of {rate * seconds} messages got their context")
    return latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


def deployments(workers: str, split: bool, compare: Path | None, wires: str = "v1", traced: str = "",
                otlp: str = "") -> list[Deployment]:
    counts = [int(n) for n in workers.split(",") if n.strip()]
    ours = [Deployment(n) for n in counts] + ([Deployment(n, split=True) for n in counts] if split else [])
    ours = [replace(d, wire=wire.strip()) for wire in wires.split(",") if wire.strip() for d in ours]
    ours += [Deployment(1, traced=float(ratio), otlp=otlp) for ratio in traced.split(",") if ratio.strip()]
    return ours + ([replace(d, code=compare) for d in ours] if compare else [])


def rotated(items: list[Any], turn: int) -> list[Any]:
    """``items`` starting ``turn`` places later, wrapping around."""
    shift = turn % len(items) if items else 0
    return items[shift:] + items[:shift]


@functools.cache
def checkout_name(code: Path) -> str:
    """A checkout's short commit (its folder's name if it is not a git checkout)."""
    found = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], check=False,
                           capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else code.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--per-thread", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--store", default="memory", choices=["memory", "sqlite", "cassandra"])
    parser.add_argument("--workers", default="1", help="memory-worker counts to measure, e.g. 1,2")
    parser.add_argument("--split", action="store_true", help="also with the model calls in a --role models process")
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--no-latency", action="store_true", help="throughput only")
    parser.add_argument("--wire", default="v1,v2", help="OM_CONTEXT_WIRE values to measure, e.g. v1,v2")
    parser.add_argument("--compare", type=Path, help="another checkout of om-stream (e.g. a worktree of the parent "
                                                     "commit): its workers are measured too, in the same trials")
    parser.add_argument("--traced", default="", help="also one worker with tracing on at these sampling ratios, "
                                                     "e.g. 0.1,1 (spans exported over OTLP to --otlp)")
    parser.add_argument("--upstream", type=float, default=None,
                        help="every record carries the traceparent of an agent traced upstream that sampled this "
                             "share of its traces, e.g. 0.1 (as agents in production send; default: no headers)")
    parser.add_argument("--otlp", default=os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
                        help="the OTLP/HTTP endpoint of the traced deployments (a Jaeger of devservices' is "
                             "started when none is given)")
    args = parser.parse_args()
    services = None
    bootstrap = os.environ.get("OM_KAFKA_BOOTSTRAP")
    cassandra = os.environ.get("OM_CASSANDRA_HOSTS")
    wanted: tuple[str, ...] = () if bootstrap else ("kafka",)
    if args.traced and not args.otlp:
        wanted = (*wanted, "jaeger")
    if args.store == "cassandra" and not cassandra:
        wanted = (*wanted, "cassandra")
    if wanted:
        services = start_services(wanted)
        if services.errors:
            raise SystemExit(f"services did not start: {services.errors}")
        bootstrap = bootstrap or (services.kafka.bootstrap if services.kafka else None)
        cassandra = cassandra or (services.cassandra.contact_point if services.cassandra else None)
        args.otlp = args.otlp or (services.jaeger.otlp_endpoint if services.jaeger else "")
    assert bootstrap is not None
    ours = deployments(args.workers, args.split, args.compare, args.wire, args.traced, args.otlp)
    pipelines: list[tuple[str, str, Deployment]] = [("aiokafka", "aiokafka", Deployment()),
                                                    ("faust", "faust", Deployment())]
    pipelines += [("om-stream", f"om-stream, {d.label}", d) for d in ours]
    results: dict[str, list[float]] = {name: [] for _, name, _ in pipelines}
    written: dict[str, list[float]] = {name: [] for _, name, _ in pipelines}  # value bytes per input message
    total = args.threads * args.per_thread
    timed = [d for d in ours if d.workers == 1]
    p50s: dict[str, list[float]] = {d.label: [] for d in timed}
    p99s: dict[str, list[float]] = {d.label: [] for d in timed}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for trial in range(args.trials):
                # each trial starts one pipeline later: a place in the order (a broker holding more topics late in
                # a trial, a warmer machine early) is then no pipeline's alone
                for kind, name, deployment in rotated(pipelines, trial):
                    rate, outputs = asyncio.run(throughput(
                        kind, bootstrap, folder, threads=args.threads, per_thread=args.per_thread,
                        partitions=args.partitions, store=args.store, deployment=deployment,
                        cassandra=cassandra if args.store == "cassandra" else None, upstream=args.upstream))
                    results[name].append(rate)
                    written[name].append(outputs.value_bytes / total)
                    print(f"trial {trial + 1}: {name:28s} {rate:8.0f} msgs/s  ({outputs.records / total:.2f} "
                          f"outputs per message, {outputs.value_bytes / max(1, outputs.records) / 1000:.1f} KB "
                          f"each, {outputs.value_bytes / total / 1000:.1f} KB written per message)", flush=True)
            for trial in range(0 if args.no_latency else args.trials):
                for deployment in rotated(timed, trial):
                    p50, p99 = asyncio.run(latency(bootstrap, folder, rate=args.rate, seconds=args.seconds,
                                                   threads=args.threads, partitions=args.partitions,
                                                   store=args.store, deployment=deployment,
                                                   cassandra=cassandra if args.store == "cassandra" else None,
                                                   upstream=args.upstream))
                    p50s[deployment.label].append(p50)
                    p99s[deployment.label].append(p99)
                    print(f"trial {trial + 1}: publish->context at {args.rate} msgs/s, {deployment.label}: "
                          f"p50 {p50:.1f} ms p99 {p99:.1f} ms", flush=True)
    finally:
        if services is not None:
            services.stop()
    median = {name: statistics.median(values) for name, values in results.items()}
    print(f"\n{total} messages of ~1 KB over {args.threads} threads, {args.partitions} partitions, store "
          f"{args.store}, offline model; medians of {args.trials} trials"
          + ("" if args.upstream is None else f"; agents traced upstream at {args.upstream:.0%}"))
    print(f"  bare aiokafka loop            {median['aiokafka']:8.0f} msgs/s")
    print(f"  bare Faust passthrough        {median['faust']:8.0f} msgs/s")
    for _, name, _ in pipelines[2:]:
        rate = median[name]
        print(f"  {name:28s}  {rate:8.0f} msgs/s  = {rate / median['faust']:.2f}x Faust passthrough, "
              f"{rate / median['aiokafka']:.2f}x aiokafka (targets: >= 0.6x, >= 1500 msgs/s)")
    for label, values in p50s.items():
        if values:
            print(f"  publish->context at {args.rate} msgs/s ({label}): p50 {statistics.median(values):.1f} ms, "
                  f"p99 {statistics.median(p99s[label]):.1f} ms (target p99 <= 100 ms)")
    # one stable line per deployment (docs/benchmarks.md reads them): p99_ms is "-" without a latency run
    for _, name, deployment in pipelines[2:]:
        p99_runs = p99s.get(deployment.label) or []
        print(f"store={args.store} workers={deployment.workers}{'+models' if deployment.split else ''} "
              f"wire={deployment.wire} traced={'-' if deployment.traced is None else deployment.traced} "
              f"msgs_per_s={median[name]:.0f} faust_ratio={median[name] / median['faust']:.2f} "
              f"p99_ms={f'{statistics.median(p99_runs):.1f}' if p99_runs else '-'} "
              f"bytes_per_msg={statistics.median(written[name]):.0f}")


if __name__ == "__main__":
    main()
