"""``make bench-e2e``: om-stream worker throughput and publish→context latency on real Apache Kafka.

In the same run, over identical topics and ~1 KB payloads spread over many threads:
  1. a bare aiokafka consume→produce loop (the ceiling of Python on Kafka),
  2. a bare Faust agent that decodes and forwards each record (the ceiling of the framework),
  3. ``om-stream worker`` with the offline model (the content store is chosen with ``--store``).
Throughput: N messages preloaded, then timed from the pipeline's start until the output for the last message
of every thread is seen (for om-stream: a context whose ``through_message_id`` is that message); the time the
process takes to join its group is excluded by timing from the first output record. Latency: messages published
at a steady rate (default 200/s), each timed from its send to the first context that includes it.
Every figure is the median of several trials, run round-robin. Targets (runtime issue): om-stream ≥ 0.6× the
bare Faust passthrough and ≥ 1,500 msgs/s; p99 ≤ 100 ms at 200 msgs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from om_stream.devservices import start_services  # noqa: E402
from om_stream.devservices.jvm import free_port  # noqa: E402

WORDS = ("latency", "throughput", "partition", "deploy", "review", "budget", "schedule", "metrics", "error", "retry",
         "timeout", "cluster", "query", "index", "window", "customer", "report", "summary", "design", "option")


def payload(thread: str, index: int, rng: random.Random) -> dict[str, Any]:
    text = " ".join(rng.choice(WORDS) for _ in range(150))[:900]
    return {"schema": "om.message/v1", "message_id": f"{thread}-{index}", "thread_id": thread,
            "resource_id": f"user-{thread}", "role": "user" if index % 2 == 0 else "assistant",
            "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "parts": [{"type": "text", "text": text}]}


async def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names])
    finally:
        await admin.close()


async def preload(bootstrap: str, topic: str, threads: int, per_thread: int) -> dict[str, str]:
    rng = random.Random(7)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    last: dict[str, str] = {}
    try:
        for index in range(per_thread):
            for t in range(threads):
                thread = f"th{t}"
                record = payload(thread, index, rng)
                await producer.send(topic, json.dumps(record).encode(), key=thread.encode())
                last[thread] = record["message_id"]
        await producer.flush()
    finally:
        await producer.stop()
    return last


async def wait_outputs(bootstrap: str, topic: str, last: dict[str, str], timeout: float,
                       through: bool) -> tuple[float, float]:
    """(first output time, time when every thread's last message is covered) in monotonic seconds."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=f"bench-read-{uuid.uuid4().hex[:6]}", metadata_max_age_ms=1000)
    await consumer.start()
    pending = dict(last)
    first = 0.0
    deadline = time.monotonic() + timeout
    try:
        while pending and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            now = time.monotonic()
            for records in batch.values():
                if records and not first:
                    first = now
                for record in records:
                    value = json.loads(record.value)
                    thread = record.key.decode()
                    seen = value.get("through_message_id") if through else value.get("message_id")
                    if pending.get(thread) == seen:
                        del pending[thread]
        if pending:
            raise RuntimeError(f"{len(pending)} threads not done before the timeout")
        return first, time.monotonic()
    finally:
        await consumer.stop()


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(args, env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, stdout=out,
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
    names = ("messages", "commands", "model_requests", "model_results", "records", "events", "context", "dlq",
             "recall_requests", "recall_responses")
    return {"OM_KAFKA_BOOTSTRAP": bootstrap, "OM_KAFKA_PARTITIONS": str(partitions), "OM_KAFKA_REPLICATION": "1",
            "OM_KAFKA_SESSION_TIMEOUT_S": "6", "OM_WORKER_APP_ID": prefix, "OM_WORKER_WEB_PORT": str(free_port()),
            "OM_MEMORY_STORE": store, "OM_MEMORY_SQLITE_PATH": str(folder / f"{prefix}.db"),
            "OM_WORKER_DATA_DIR": str(folder),
            "OM_MEMORY_MODEL": "offline", "OM_LOG_LEVEL": "warning",
            "OM_WORKER_BATCH_WITHIN_S": os.environ.get("BENCH_WITHIN", "0.005"),
            **{f"OM_KAFKA_TOPIC_{n.upper()}": f"{prefix}.{n}" for n in names}}


async def throughput(kind: str, bootstrap: str, folder: Path, *, threads: int, per_thread: int, partitions: int,
                     store: str, cassandra: str | None) -> float:
    prefix = f"b{uuid.uuid4().hex[:8]}"
    total = threads * per_thread
    log = folder / f"{prefix}-{kind}.log"
    if kind == "om-stream":
        env = worker_env(bootstrap, prefix, partitions, store, folder, cassandra)
        source, sink, through = env["OM_KAFKA_TOPIC_MESSAGES"], env["OM_KAFKA_TOPIC_CONTEXT"], True
        await create_topics(bootstrap, [source, sink], partitions)
        args = [sys.executable, "-m", "om_stream.runtime.worker"]
    else:
        source, sink, through = f"{prefix}.in", f"{prefix}.out", False
        await create_topics(bootstrap, [source, sink], partitions)
        env = {"BENCH_BOOTSTRAP": bootstrap, "BENCH_IN": source, "BENCH_OUT": sink, "BENCH_GROUP": prefix,
               "BENCH_PARTITIONS": str(partitions), "BENCH_WEB_PORT": str(free_port()),
               "BENCH_DATA_DIR": str(folder / f"{prefix}-data")}
        args = [sys.executable, str(ROOT / "bench" / "pipelines.py"), kind]
    last = await preload(bootstrap, source, threads, per_thread)
    process = spawn(args, env, log)
    try:
        first, done = await wait_outputs(bootstrap, sink, last, timeout=600, through=through)
    finally:
        stop(process)
    return total / max(1e-6, done - first)


async def latency(bootstrap: str, folder: Path, *, rate: int, seconds: int, threads: int, partitions: int,
                  store: str, cassandra: str | None) -> tuple[float, float]:
    prefix = f"l{uuid.uuid4().hex[:8]}"
    env = worker_env(bootstrap, prefix, partitions, store, folder, cassandra)
    source, sink = env["OM_KAFKA_TOPIC_MESSAGES"], env["OM_KAFKA_TOPIC_CONTEXT"]
    await create_topics(bootstrap, [source, sink], partitions)
    process = spawn([sys.executable, "-m", "om_stream.runtime.worker"], env, folder / f"{prefix}.log")
    consumer = AIOKafkaConsumer(sink, bootstrap_servers=bootstrap, auto_offset_reset="latest",
                                group_id=f"lat-{prefix}", metadata_max_age_ms=1000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await consumer.start()
    await producer.start()
    sent: dict[str, float] = {}
    order: dict[str, list[str]] = {}
    latencies: list[float] = []
    rng = random.Random(3)

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
            await producer.send(source, json.dumps(record).encode(), key=thread.encode())
        await asyncio.sleep(5)
        reader.cancel()
    finally:
        await producer.stop()
        await consumer.stop()
        stop(process)
    latencies.sort()
    if len(latencies) < rate * seconds * 0.95:
        raise RuntimeError(f"only {len(latencies)} of {rate * seconds} messages got their context")
    return latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--per-thread", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--store", default="memory", choices=["memory", "sqlite", "cassandra"])
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=30)
    args = parser.parse_args()
    services = None
    bootstrap = os.environ.get("OM_KAFKA_BOOTSTRAP")
    cassandra = os.environ.get("OM_CASSANDRA_HOSTS")
    wanted: tuple[str, ...] = () if bootstrap else ("kafka",)
    if args.store == "cassandra" and not cassandra:
        wanted = (*wanted, "cassandra")
    if not bootstrap or (args.store == "cassandra" and not cassandra):
        services = start_services(wanted)
        if services.errors:
            raise SystemExit(f"services did not start: {services.errors}")
        bootstrap = bootstrap or (services.kafka.bootstrap if services.kafka else None)
        cassandra = cassandra or (services.cassandra.contact_point if services.cassandra else None)
    assert bootstrap is not None
    results: dict[str, list[float]] = {"aiokafka": [], "faust": [], "om-stream": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for trial in range(args.trials):
                for kind, rates in results.items():
                    rate = asyncio.run(throughput(kind, bootstrap, folder, threads=args.threads,
                                                  per_thread=args.per_thread, partitions=args.partitions,
                                                  store=args.store,
                                                  cassandra=cassandra if args.store == "cassandra" else None))
                    rates.append(rate)
                    print(f"trial {trial + 1}: {kind:9s} {rate:8.0f} msgs/s", flush=True)
            p50s, p99s = [], []
            for trial in range(args.trials):
                p50, p99 = asyncio.run(latency(bootstrap, folder, rate=args.rate, seconds=args.seconds,
                                               threads=args.threads, partitions=args.partitions, store=args.store,
                                               cassandra=cassandra if args.store == "cassandra" else None))
                p50s.append(p50)
                p99s.append(p99)
                print(f"trial {trial + 1}: publish->context at {args.rate} msgs/s p50 {p50:.1f} ms p99 {p99:.1f} ms",
                      flush=True)
    finally:
        if services is not None:
            services.stop()
    median = {kind: statistics.median(values) for kind, values in results.items()}
    total = args.threads * args.per_thread
    print(f"\n{total} messages of ~1 KB over {args.threads} threads, {args.partitions} partitions, store "
          f"{args.store}, offline model; medians of {args.trials} trials")
    print(f"  bare aiokafka loop      {median['aiokafka']:8.0f} msgs/s")
    print(f"  bare Faust passthrough  {median['faust']:8.0f} msgs/s")
    ours = median["om-stream"]
    print(f"  om-stream worker        {ours:8.0f} msgs/s  = {ours / median['faust']:.2f}x Faust passthrough, "
          f"{ours / median['aiokafka']:.2f}x aiokafka (targets: >= 0.6x, >= 1500 msgs/s)")
    print(f"  publish->context at {args.rate} msgs/s: p50 {statistics.median(p50s):.1f} ms, "
          f"p99 {statistics.median(p99s):.1f} ms (target p99 <= 100 ms)")


if __name__ == "__main__":
    main()
