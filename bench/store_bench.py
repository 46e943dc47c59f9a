"""``make bench-store``: messages written per second to Cassandra, and recall latency over 100,000 stored messages.

Workload: 200 users × 5 threads × 100 messages (100,000), realistic text lengths (the synthetic conversation
generator: 12-250 words, ~12 % tool calls with long JSON results). Messages are written the way the worker writes
them: each thread in order (one writer per thread, like one Kafka partition owner), many threads at once (bounded
concurrency: ``--writers`` threads in flight), each message one ``put_message`` (by thread, by id, thread times).

* write throughput: the 100,000 messages are written in ``--runs`` slices of equal size; messages/s per slice,
  median reported;
* recall latency: ``--calls`` recall calls per run over the full 100,000, one at a time, a mix of what an agent
  does (page from a cursor, read a thread from either end, one part at full detail, list threads, high detail);
  p50/p99 per run, medians reported;
* search (indicative): ``--search-messages`` messages embedded with the offline MiniLM into Qdrant local mode
  (brute force, in process), then ``mode="search"`` calls.

Uses ``OM_CASSANDRA_HOSTS`` when set, else starts its own Apache Cassandra node (devservices) and stops it after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from om_stream.adapters.cassandra_store import CassandraContentStore, migrate
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.config import RetrievalConfig
from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.recall import RecallScope
from om_stream.core.recall.groups import observation_ranges
from om_stream.replay.synthetic import generate
from om_stream.runtime.recall_service import RecallService
from om_stream.settings import CassandraSettings, Settings

USERS, THREADS_PER_USER, MESSAGES_PER_THREAD = 200, 5, 100


def build_messages(seed: int = 7) -> list[list[Message]]:
    """1,000 threads of 100 messages, texts from the synthetic conversation generator."""
    lines = list(generate(1_400, seed=seed))
    rng = random.Random(seed)
    start = datetime(2026, 1, 5, tzinfo=UTC)
    threads: list[list[Message]] = []
    for user in range(USERS):
        for t in range(THREADS_PER_USER):
            thread_id, resource_id = f"bench-u{user}-t{t}", f"bench-u{user}"
            at = start + timedelta(days=rng.randint(0, 120), seconds=rng.randint(0, 86_400))
            thread: list[Message] = []
            offset = rng.randrange(len(lines) - MESSAGES_PER_THREAD)
            for i, line in enumerate(lines[offset:offset + MESSAGES_PER_THREAD]):
                at += timedelta(seconds=rng.choice((5, 30, 90, 600, 3600)))
                mid = f"{thread_id}-m{i}"
                if line["role"] == "tool":
                    name = line.get("tool_name") or "tool"
                    parts: tuple[Any, ...] = (
                        ToolCallPart(tool_call_id=f"{mid}-c", tool_name=name, args=line.get("tool_args")),
                        ToolResultPart(tool_call_id=f"{mid}-c", tool_name=name, result=line["text"]))
                    role = "assistant"
                else:
                    parts, role = (TextPart(text=line["text"]),), line["role"]
                thread.append(Message(message_id=mid, thread_id=thread_id, resource_id=resource_id, role=role,
                                      created_at=at, parts=parts))
            threads.append(thread)
    return threads


@contextmanager
def cassandra_hosts() -> Iterator[str]:
    configured = Settings().cassandra.hosts
    import os

    if os.environ.get("OM_CASSANDRA_HOSTS"):
        yield configured
        return
    from om_stream.devservices import cassandra

    with tempfile.TemporaryDirectory(prefix="om-bench-cassandra-") as folder:
        print("starting Apache Cassandra (devservices)...", flush=True)
        node = cassandra.start(Path(folder))
        try:
            cassandra.wait_ready(node)
            yield node.contact_point
        finally:
            node.process.stop()


async def write_slice(store: CassandraContentStore, threads: list[list[Message]], writers: int) -> float:
    """Write these threads (each in order, ``writers`` threads at once); returns messages per second."""
    queue: asyncio.Queue[list[Message]] = asyncio.Queue()
    for thread in threads:
        queue.put_nowait(thread)

    async def writer() -> None:
        while not queue.empty():
            thread = queue.get_nowait()
            for seq, message in enumerate(thread):
                await store.put_message(message.thread_id, message, seq, len(message.text) // 4 + 4)

    began = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    elapsed = time.perf_counter() - began
    return sum(len(t) for t in threads) / elapsed


def recall_calls(threads: list[list[Message]], rng: random.Random,
                 n: int) -> list[tuple[str, RecallScope, dict[str, Any]]]:
    calls: list[tuple[str, RecallScope, dict[str, Any]]] = []
    for _ in range(n):
        thread = rng.choice(threads)
        message = rng.choice(thread)
        scope = RecallScope(message.resource_id, message.thread_id, RetrievalConfig(scope="resource"))
        kind = rng.choices(("cursor", "thread-start", "thread-end", "part", "threads", "high"),
                           weights=(40, 15, 15, 10, 10, 10))[0]
        args: dict[str, Any] = {
            "cursor": {"cursor": message.message_id, "page": rng.choice((1, 1, -1, 2, -2))},
            "thread-start": {"threadId": message.thread_id},
            "thread-end": {"threadId": "current", "anchor": "end", "limit": 10},
            "part": {"cursor": message.message_id, "partIndex": 0},
            "threads": {"mode": "threads"},
            "high": {"cursor": message.message_id, "detail": "high"},
        }[kind]
        calls.append((kind, scope, args))
    return calls


async def recall_run(service: RecallService, calls: list[tuple[str, RecallScope, dict[str, Any]]]) -> dict[str, Any]:
    latencies: dict[str, list[float]] = {}
    for kind, scope, args in calls:
        began = time.perf_counter()
        await service.recall(scope, args)
        latencies.setdefault(kind, []).append((time.perf_counter() - began) * 1000)
    every = sorted(x for values in latencies.values() for x in values)
    return {"p50": _pct(every, 50), "p99": _pct(every, 99),
            "by_kind_p50": {k: round(_pct(sorted(v), 50), 2) for k, v in sorted(latencies.items())}}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[index]


async def search_figures(threads: list[list[Message]], n_messages: int, calls: int) -> dict[str, float] | None:
    if n_messages <= 0:
        return None
    from om_stream.adapters.embedders import OfflineMiniLMEmbedder
    from om_stream.adapters.qdrant_index import QdrantRecallIndex
    from om_stream.adapters.sqlite_store import SqliteContentStore
    from om_stream.core.commands import IndexForRecall, PersistSegment

    store = SqliteContentStore(":memory:")
    embedder = OfflineMiniLMEmbedder()
    index = QdrantRecallIndex(embedder.model_id, embedder.dimension)
    counter = TiktokenCounter()
    service = RecallService(store, counter.count, index=index, embedder=embedder)
    chosen = threads[: max(1, n_messages // MESSAGES_PER_THREAD)]
    began = time.perf_counter()
    for thread in chosen:
        for seq, message in enumerate(thread):
            await store.put_message(message.thread_id, message, seq, 10)
        ids = tuple(m.message_id for m in thread)
        gid = f"{thread[0].thread_id}-g"
        await store.put_segment(PersistSegment(
            record_key=thread[0].thread_id, segment_id=gid, kind="observation", status="active", generation=0,
            text="\n".join(m.text[:200] for m in thread[:10]), tokens=100, cycle_id="c",
            thread_ids=(thread[0].thread_id,), first_message_id=ids[0], last_message_id=ids[-1], message_ids=ids,
            message_tokens=1000, boundary_at=thread[-1].created_at_ms, created_at=0,
            ranges=observation_ranges([(m.message_id, m.thread_id, seq) for seq, m in enumerate(thread)])))
        await service.index_segment(IndexForRecall(thread[0].thread_id, thread[0].resource_id,
                                                   (thread[0].thread_id,), gid))
    indexed_s = time.perf_counter() - began
    rng = random.Random(3)
    latencies = []
    for _ in range(calls):
        thread = rng.choice(chosen)
        scope = RecallScope(thread[0].resource_id, thread[0].thread_id, RetrievalConfig(vector=True))
        query = " ".join(rng.choice(thread).text.split()[:8]) or "budget"
        t = time.perf_counter()
        await service.recall(scope, {"mode": "search", "query": query})
        latencies.append((time.perf_counter() - t) * 1000)
    await index.close()
    await store.close()
    latencies.sort()
    points = sum(len(t) for t in chosen)
    return {"messages": points, "index_s": indexed_s, "p50": _pct(latencies, 50), "p99": _pct(latencies, 99)}


def drop_keyspace(settings: Any) -> None:
    """Drop the bench's keyspace (``settings``: the store's Cassandra settings), on a connection of its own."""
    from cassandra.cluster import Cluster

    (host, port), *_ = settings.contact_points()
    cluster = Cluster([host], port=port, protocol_version=5)
    try:
        cluster.connect().execute(f"DROP KEYSPACE IF EXISTS {settings.keyspace}", timeout=120)
    finally:
        cluster.shutdown()


async def bench(hosts: str, args: argparse.Namespace) -> dict[str, Any]:
    threads = build_messages()
    total = sum(len(t) for t in threads)
    print(f"dataset: {total:,} messages in {len(threads):,} threads of {USERS} users; "
          f"~{sum(len(m.text) for t in threads for m in t) / total:.0f} characters per message", flush=True)
    settings = CassandraSettings(hosts=hosts, keyspace=f"bench_{uuid.uuid4().hex[:8]}",
                                 max_concurrent_requests=args.in_flight)
    migrate(settings)
    store = CassandraContentStore(settings)
    await store.start()
    try:
        rates = []
        size = len(threads) // args.runs
        for run in range(args.runs):
            part = threads[run * size:(run + 1) * size] if run < args.runs - 1 else threads[run * size:]
            rate = await write_slice(store, part, args.writers)
            rates.append(rate)
            print(f"  write run {run + 1}: {sum(len(t) for t in part):,} messages, {rate:,.0f} messages/s",
                  flush=True)
        stored = sum([await store.count_thread_messages(t[0].resource_id, t[0].thread_id) for t in threads[:50]])
        assert stored == 50 * MESSAGES_PER_THREAD, stored
        service = RecallService(store, TiktokenCounter().count)
        rng = random.Random(11)
        await recall_run(service, recall_calls(threads, rng, 50))  # warm-up: caches, JIT paths, connections
        recalls = []
        for run in range(args.runs):
            figures = await recall_run(service, recall_calls(threads, rng, args.calls))
            recalls.append(figures)
            print(f"  recall run {run + 1}: p50 {figures['p50']:.2f} ms, p99 {figures['p99']:.2f} ms "
                  f"(p50 by call: {figures['by_kind_p50']})", flush=True)
    finally:
        await store.close()
        drop_keyspace(settings)
    search = await search_figures(threads, args.search_messages, args.search_calls)
    return {"messages": total, "writes_per_s": statistics.median(rates), "write_runs": [round(r) for r in rates],
            "recall_p50_ms": statistics.median(r["p50"] for r in recalls),
            "recall_p99_ms": statistics.median(r["p99"] for r in recalls), "recall_runs": recalls,
            "search": search}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--writers", type=int, default=128, help="threads written concurrently")
    parser.add_argument("--in-flight", type=int, default=256, help="Cassandra queries in flight at most")
    parser.add_argument("--calls", type=int, default=500, help="recall calls per run")
    parser.add_argument("--search-messages", type=int, default=1_000, help="messages indexed for search (0: skip)")
    parser.add_argument("--search-calls", type=int, default=100)
    args = parser.parse_args()
    with cassandra_hosts() as hosts:
        result = asyncio.run(bench(hosts, args))
    print()
    print(f"Cassandra writes: {result['writes_per_s']:,.0f} messages/s (median of {len(result['write_runs'])} runs: "
          f"{result['write_runs']})")
    print(f"Recall over {result['messages']:,} stored messages: p50 {result['recall_p50_ms']:.2f} ms, "
          f"p99 {result['recall_p99_ms']:.2f} ms (median of {len(result['recall_runs'])} runs of {args.calls} calls)")
    if result["search"]:
        s = result["search"]
        print(f"Search (Qdrant local, {s['messages']:,} messages + groups, offline MiniLM): p50 {s['p50']:.1f} ms, "
              f"p99 {s['p99']:.1f} ms; indexing took {s['index_s']:.1f} s")
    print(json.dumps({k: v for k, v in result.items() if k != "recall_runs"}, default=str))


if __name__ == "__main__":
    main()
