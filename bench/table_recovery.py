"""``make bench-chaos`` (second part): how long a worker takes to recover its state table after a restart.

The changelog of the state table is filled with N thread records (the layout the worker writes: raw key, home
partition, ``{"partition", "state"}`` value), then one worker is started on it and timed from launch until
``/healthz`` answers 200; the same with an empty changelog gives the fixed cost of starting, which is subtracted.
For each store:
  * memory://  — a restart reads the whole changelog again (timed on the second start);
  * rocksdb:// — the first start reads the changelog into RocksDB; the restart (same data folder) reads only what
    changed since, which is what a pod with its volume sees after ``helm upgrade``.
Medians of ``--runs`` restarts per figure.

``--versions V`` writes each thread's record V times, as a changelog holds them before the log cleaner compacts it
(the worker writes a thread's state once per input): a recovery reads every version, and keeps the last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.partitioner import murmur2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from om_stream.core.config import OMConfig  # noqa: E402
from om_stream.core.engine import decide, new_record  # noqa: E402
from om_stream.core.inputs import MessageAppended  # noqa: E402
from om_stream.core.messages import Message, TextPart  # noqa: E402
from om_stream.core.tokens import TokenAccountant  # noqa: E402
from om_stream.devservices import start_services  # noqa: E402
from om_stream.retention import changelog_config  # noqa: E402
from om_stream.runtime.worker.state_table import TABLE_NAME, encode_held  # noqa: E402
from om_stream.settings import LifecycleSettings  # noqa: E402
from tests.support.worker import WorkerProcess, http_call, worker_process  # noqa: E402

PARTITIONS = 12
TEMPLATE = "t-template-0000000"


def template_state() -> str:
    """The JSON state of a thread after a dozen turns (what a real record looks like in the table)."""
    config = OMConfig.parse({"observation": {"messageTokens": 100_000}}).resolve()
    accountant = TokenAccountant(lambda text: max(1, len(text) // 4))
    state = new_record(TEMPLATE, "thread", "user-1")
    for index in range(12):
        message = Message(message_id=f"{TEMPLATE}-m{index}", thread_id=TEMPLATE, resource_id="user-1",
                          role="user" if index % 2 == 0 else "assistant",
                          created_at=datetime(2026, 3, 1, 9, index, tzinfo=UTC),
                          parts=(TextPart(text=f"turn {index}: the budget is {1000 + index} euros"),))
        state = decide(state, MessageAppended(message), 1_772_000_000_000 + index, config, accountant).state
    return encode_held(0, state).decode()


async def fill_changelog(bootstrap: str, app_id: str, threads: int, versions: int = 1) -> None:
    topic = f"{app_id}-{TABLE_NAME}-changelog"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1,
                                            topic_configs=changelog_config(LifecycleSettings()))])
    finally:
        await admin.close()
    template = template_state()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=262_144)
    await producer.start()
    try:
        await producer.partitions_for(topic)  # the new topic's leaders are known before the first send
        for _ in range(versions):
            for n in range(threads):
                key = f"t-{n:016d}"
                partition = (murmur2(key.encode()) & 0x7FFFFFFF) % PARTITIONS
                value = template.replace(TEMPLATE, key).replace('"partition":0', f'"partition":{partition}', 1)
                await producer.send(topic, value.encode(), key=key.encode(), partition=partition)
        await producer.flush()
    finally:
        await producer.stop()


def timed_start(worker: WorkerProcess, threads: int) -> float:
    began = time.monotonic()
    worker.start()
    asyncio.run(worker.wait_ready(timeout=900))
    ready = time.monotonic() - began
    if threads:  # the records really are back: the last one written answers its status
        status = asyncio.run(http_call(worker.port, "GET", f"/v1/threads/t-{threads - 1:016d}/status"))
        assert status["windows"]["active"]["messages"]["tokens"] > 0, status
    worker.stop()
    return ready


def measure(bootstrap: str, tmp: Path, store: str, threads: int, runs: int,
            versions: int = 1) -> tuple[float, list[float]]:
    """(the first start on a new data folder, the restarts after it): seconds from launch to ready."""
    folder = tmp / f"{store.split(':', maxsplit=1)[0]}-{threads}"
    folder.mkdir(parents=True)
    worker = worker_process(bootstrap, folder, options={}, partitions=PARTITIONS,
                            extra={"OM_WORKER_TABLE_STORE": store, "OM_LOG_LEVEL": "warning"})
    if threads:
        asyncio.run(fill_changelog(bootstrap, worker.env["OM_WORKER_APP_ID"], threads, versions))
    first = timed_start(worker, threads)  # RocksDB: the changelog is read into the local database
    return first, [timed_start(worker, threads) for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--versions", type=int, default=1, help="records written per thread (an uncompacted changelog)")
    args = parser.parse_args()
    bootstrap = os.environ.get("OM_KAFKA_BOOTSTRAP")
    services = None
    if not bootstrap:
        services = start_services(("kafka",))
        if services.errors or services.kafka is None:
            raise SystemExit(f"Kafka did not start: {services.errors}")
        bootstrap = services.kafka.bootstrap
    results: dict[str, dict[int, float]] = {}
    cold: dict[str, dict[int, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for store in ("memory://", "rocksdb://"):
                baseline = statistics.median(measure(bootstrap, Path(tmp), store, 0, args.runs)[1])
                results[store], cold[store] = {0: baseline}, {}
                print(f"{store:11s} empty table: ready {baseline:.1f} s after launch", flush=True)
                for threads in args.threads:
                    first, ready = measure(bootstrap, Path(tmp), store, threads, args.runs, args.versions)
                    results[store][threads], cold[store][threads] = statistics.median(ready), first
                    print(f"{store:11s} {threads:>7,} threads: first start {first:.1f} s, restarts "
                          f"{json.dumps([round(r, 1) for r in ready])} s after launch; recovery "
                          f"{results[store][threads] - baseline:.1f} s", flush=True)
    finally:
        if services is not None:
            services.stop()
    print(f"\ntable recovery after a restart (time to ready minus an empty table's; the readiness poll is 0.3 s), "
          f"{PARTITIONS} partitions, one worker, {args.versions} record(s) per thread, medians of {args.runs}:")
    for threads in args.threads:
        memory = max(0.0, results["memory://"][threads] - results["memory://"][0])
        rocks = max(0.0, results["rocksdb://"][threads] - results["rocksdb://"][0])
        first = max(0.0, cold["rocksdb://"][threads] - results["rocksdb://"][0])
        print(f"  {threads:>7,} threads: memory:// {memory:6.1f} s   rocksdb:// {rocks:6.1f} s (its first start on a "
              f"new volume: {first:.1f} s)")


if __name__ == "__main__":
    main()
