"""``make bench-lifecycle``: what erasure and export cost, on real Kafka and Cassandra with the offline model.

1. **Erase latency**, command to receipt (``erase`` on ``om.commands`` → ``data-om-erased`` on ``om.events``), with
   three workers sharing the partitions: ``--thread-erases`` threads erased one after the other, and
   ``--resource-erases`` resources of ``--threads-per-resource`` threads each (a resource erase runs on every
   partition, and the recall index is swept too: retrieval search is on).
2. **The rest of the stream during erasures**: the same stream of messages (many threads, each agent waiting for
   the context of its message before the next) played twice in one run, once alone and once while thread and
   resource erases go on beside it; messages per second of each, and their ratio.
3. **Export**: one resource of ``--export-messages`` messages exported from SQLite and from Cassandra, through the
   exporter every interface uses, streamed to nowhere; messages per second, and memory (the peak of what the export
   allocated, traced, and the process's peak RSS growth).

Each figure is a median of ``--trials`` trials; the latencies are pooled over them. One line per measure, in a
stable format (``measure=... value=...``), for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from om_stream.adapters.cassandra_store import CassandraContentStore  # noqa: E402
from om_stream.adapters.sqlite_store import SqliteContentStore  # noqa: E402
from om_stream.core.messages import Message, TextPart  # noqa: E402
from om_stream.devservices import start_services  # noqa: E402
from om_stream.ports import ContentStore, ExportSource  # noqa: E402
from om_stream.runtime.exporter import ExportSpec, HeldStates, export_lines  # noqa: E402
from om_stream.settings import CassandraSettings  # noqa: E402
from tests.support.cluster import WorkerGroup, drop_keyspace, new_keyspace  # noqa: E402
from tests.support.worker import Agent, agent_for, message_record  # noqa: E402

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 300, "bufferTokens": False},
                           "reflection": {"observationTokens": 200_000}, "retrieval": {"vector": True}}
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def text(thread: str, index: int) -> str:
    return (f"{thread} turn {index}: the ferry to the island leaves at nine and the lighthouse keeper wants the "
            f"tide report by Friday")


async def converse(agent: Agent, threads: dict[str, str], turns: int) -> None:
    """Every thread (thread -> resource) gets ``turns`` messages; the contexts through the last are waited for."""
    for index in range(turns):
        for thread, resource_id in threads.items():
            await agent.send(message_record(thread, index, "user" if index % 2 == 0 else "assistant",
                                            text(thread, index), resource=resource_id), key=thread.encode())
    for thread in threads:
        await agent.context_through(thread, f"{thread}-m{turns - 1}", timeout=300)


async def erase_and_wait(agent: Agent, scope: str, subject: str, resource_id: str, timeout: float = 300) -> float:
    """Command to receipt, in seconds."""
    erase_id = f"bench-{uuid.uuid4().hex[:10]}"
    command: dict[str, Any] = {"schema": "om.command/v1", "command_id": erase_id, "command": "erase",
                               "scope": scope, "resource_id": resource_id}
    if scope == "thread":
        command["thread_id"] = subject
    began = time.monotonic()
    await agent.send(command, key=subject.encode(), topic="commands")

    def done(current: Agent) -> bool:
        return any(h.get("ce_type") == b"data-om-erased" and v.get("eraseId") == erase_id
                   for _, v, h in current.events)

    await agent.until(done, timeout=timeout)
    return time.monotonic() - began


async def stream(agent: Agent, prefix: str, threads: int, turns: int) -> float:
    """Messages per second of a stream: every thread's agent publishes, waits for its context, publishes again."""
    names = {f"{prefix}-{n}": f"{prefix}-r{n % 10}" for n in range(threads)}

    async def one(thread: str, resource_id: str) -> None:
        for index in range(turns):
            await agent.send(message_record(thread, index, "user" if index % 2 == 0 else "assistant",
                                            text(thread, index), resource=resource_id), key=thread.encode())
            await agent.context_through(thread, f"{thread}-m{index}", timeout=300)

    began = time.monotonic()
    await asyncio.gather(*(one(t, r) for t, r in names.items()))
    return threads * turns / (time.monotonic() - began)


async def erasure_trial(bootstrap: str, cassandra: str, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    group = WorkerGroup(bootstrap, tmp, cassandra_hosts=cassandra, keyspace=new_keyspace(cassandra),
                        options=OPTIONS, extra={"OM_EMBEDDING_KIND": "offline"})
    # the index is the model workers': one worker holds it in local mode (a server in production)
    for _ in range(3):
        group.add()
    figures: dict[str, Any] = {}
    try:
        await group.settle()
        async with agent_for(group.members[0]) as agent:
            solo = {f"solo-{n}": f"solo-r{n}" for n in range(args.thread_erases)}
            big = {f"big{r}-{n}": f"big-r{r}" for r in range(args.resource_erases)
                   for n in range(args.threads_per_resource)}
            await converse(agent, {**solo, **big}, 2)
            figures["thread"] = [await erase_and_wait(agent, "thread", t, r) for t, r in solo.items()]
            figures["resource"] = [await erase_and_wait(agent, "resource", f"big-r{r}", f"big-r{r}")
                                   for r in range(args.resource_erases)]
            # the same stream alone, then beside erases
            figures["alone"] = await stream(agent, f"calm{uuid.uuid4().hex[:4]}", args.stream_threads,
                                            args.stream_turns)
            victims = {f"victim-{n}": f"victim-r{n % 5}" for n in range(40)}
            await converse(agent, victims, 2)

            async def erasing() -> None:
                for thread, resource_id in victims.items():
                    await erase_and_wait(agent, "thread", thread, resource_id)
                for n in range(5):
                    await erase_and_wait(agent, "resource", f"victim-r{n}", f"victim-r{n}")

            eraser = asyncio.create_task(erasing())
            figures["beside"] = await stream(agent, f"busy{uuid.uuid4().hex[:4]}", args.stream_threads,
                                             args.stream_turns)
            figures["beside_erases_done"] = eraser.done()
            await eraser
    finally:
        group.stop_all()
    return figures


async def seed(store: ContentStore, resource_id: str, messages: int, threads: int) -> None:
    per_thread = messages // threads
    writes: list[Awaitable[None]] = []
    for n in range(threads):
        thread = f"{resource_id}-t{n}"
        for i in range(per_thread):
            message = Message(message_id=f"{thread}-m{i}", thread_id=thread, resource_id=resource_id,
                              role="user" if i % 2 == 0 else "assistant",
                              created_at=T0 + timedelta(seconds=30 * i),
                              parts=(TextPart(text=text(thread, i)),))
            writes.append(store.put_message(thread, message, i, 24))
            if len(writes) >= 256:
                await asyncio.gather(*writes)
                writes = []
    await asyncio.gather(*writes)


async def export_once(store: ContentStore, resource_id: str) -> tuple[float, int, int, int]:
    """Seconds, bytes, lines, and the peak of what the export allocated (traced)."""
    assert isinstance(store, ExportSource)
    spec = ExportSpec(resource_id, store, HeldStates({}), "thread", "o200k_base", None)
    tracemalloc.start()
    began = time.perf_counter()
    size = lines = 0
    async for line in export_lines(spec):
        size += len(line)
        lines += line.count(b"\n")
    seconds = time.perf_counter() - began
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, size, lines, peak


def rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def export_bench(kind: str, open_store: Callable[[], ContentStore], args: argparse.Namespace) -> dict[str, Any]:
    store = open_store()
    resource_id = f"exp-{uuid.uuid4().hex[:6]}"
    try:
        await store.start()
        began = time.monotonic()
        await seed(store, resource_id, args.export_messages, args.export_threads)
        seeded_s = time.monotonic() - began
        runs = []
        before = rss_kb()
        for _ in range(args.trials):
            runs.append(await export_once(store, resource_id))
        grown = rss_kb() - before
    finally:
        await store.close()
    seconds = statistics.median(r[0] for r in runs)
    return {"store": kind, "messages": args.export_messages, "seed_s": seeded_s, "seconds": seconds,
            "msgs_per_s": args.export_messages / seconds, "mb": runs[0][1] / 1e6,
            "traced_peak_mb": max(r[3] for r in runs) / 1e6, "rss_growth_mb": grown / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--thread-erases", type=int, default=20)
    parser.add_argument("--resource-erases", type=int, default=2)
    parser.add_argument("--threads-per-resource", type=int, default=100)
    parser.add_argument("--stream-threads", type=int, default=24)
    parser.add_argument("--stream-turns", type=int, default=12)
    parser.add_argument("--export-messages", type=int, default=100_000)
    parser.add_argument("--export-threads", type=int, default=100)
    parser.add_argument("--skip", choices=("erase", "export"), action="append", default=[])
    args = parser.parse_args()
    bootstrap, cassandra = os.environ.get("OM_KAFKA_BOOTSTRAP"), os.environ.get("OM_CASSANDRA_HOSTS")
    services = None
    if not bootstrap or not cassandra:
        services = start_services(tuple(n for n, have in (("kafka", bootstrap), ("cassandra", cassandra)) if not have))
        if services.errors:
            raise SystemExit(f"services did not start: {services.errors}")
        bootstrap = bootstrap or (services.kafka.bootstrap if services.kafka else None)
        cassandra = cassandra or (services.cassandra.contact_point if services.cassandra else None)
    assert bootstrap
    assert cassandra
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if "erase" not in args.skip:
                trials = [asyncio.run(erasure_trial(bootstrap, cassandra, Path(tmp) / f"trial{n}", args))
                          for n in range(args.trials)]
                thread = [s for t in trials for s in t["thread"]]
                big = [s for t in trials for s in t["resource"]]
                alone = statistics.median(t["alone"] for t in trials)
                beside = statistics.median(t["beside"] for t in trials)
                print(f"measure=erase_thread_latency p50_ms={percentile(thread, 0.5) * 1000:.0f} "
                      f"p99_ms={percentile(thread, 0.99) * 1000:.0f} n={len(thread)} workers=3 store=cassandra")
                print(f"measure=erase_resource_latency threads={args.threads_per_resource} "
                      f"p50_ms={percentile(big, 0.5) * 1000:.0f} p99_ms={percentile(big, 0.99) * 1000:.0f} "
                      f"n={len(big)} workers=3 store=cassandra")
                print(f"measure=stream_during_erasures alone_msgs_per_s={alone:.1f} "
                      f"beside_erasures_msgs_per_s={beside:.1f} ratio={beside / alone:.2f} "
                      f"erases_still_running_at_end={sum(not t['beside_erases_done'] for t in trials)}/{len(trials)}")
            if "export" not in args.skip:
                keyspace = new_keyspace(cassandra)
                sqlite_path = Path(tmp) / "export.db"
                for figures in (
                        asyncio.run(export_bench("sqlite", lambda: SqliteContentStore(sqlite_path), args)),
                        asyncio.run(export_bench("cassandra", lambda: CassandraContentStore(
                            CassandraSettings(hosts=cassandra, keyspace=keyspace)), args))):
                    print(f"measure=export store={figures['store']} messages={figures['messages']} "
                          f"msgs_per_s={figures['msgs_per_s']:.0f} seconds={figures['seconds']:.2f} "
                          f"file_mb={figures['mb']:.1f} traced_peak_mb={figures['traced_peak_mb']:.1f} "
                          f"rss_growth_mb={figures['rss_growth_mb']:.1f} (seeded in {figures['seed_s']:.0f} s)",
                          flush=True)
                drop_keyspace(cassandra, keyspace)
    finally:
        if services is not None:
            services.stop()


if __name__ == "__main__":
    main()
