"""Where the Cassandra store's write path spends the caller's thread: messages/s written, and the share of the
main thread's CPU in the driver's per-statement work (issue 29, item 5).

Writes ``--messages`` messages of ``bench/store_bench.py``'s dataset into a fresh keyspace on ``OM_CASSANDRA_HOSTS``
(required: this script starts nothing), in one of two shapes:

* ``threads``: ``store_bench``'s: ``--writers`` threads at once, each written in order, one message at a time;
* ``batches``: a worker's: input batches of ``--batch`` messages (consecutive messages of round-robin threads, as
  a partition's records arrive; ``--batch-threads`` threads at a time, so that a batch holds ``--batch`` /
  ``--batch-threads`` messages of each), each batch's messages written at once (``runtime.host``'s
  ``_write_messages``), one batch after the other.

Each shape runs twice: once as is (messages/s), once metered. The metered run times, on the main thread and in CPU
time (``time.thread_time``), the driver's calls the store makes per statement: binding (``PreparedStatement.bind``,
or ``statements.Prepared.bind`` where it exists), building a batch (``BatchStatement()``, ``.add``), handing a
request to the driver (``Session.execute_async``: the request message, its query plan, encoding, the I/O loop's
queue; the timestamp generator inside it is also timed alone). Cython-compiled driver code is invisible to
``cProfile``; timing at these calls sees it. Each timed call costs two clock reads, so the metered run is slower;
the shares are of its main thread's CPU over the whole write loop. ``--cprofile N`` also prints the metered run's
top N functions by own CPU time.

    PYTHONPATH=$PWD .venv/bin/python bench/store_profile.py --shape threads --messages 20000
    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/store_profile.py ...   # that checkout's store
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import json
import os
import pstats
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# om_stream comes from PYTHONPATH, so that this script profiles another checkout's store (the one before a change)
# as well as its own; the dataset comes from store_bench, beside it
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_bench import build_messages, drop_keyspace

import om_stream
from om_stream.adapters.cassandra_store import CassandraContentStore, migrate
from om_stream.core.messages import Message
from om_stream.settings import CassandraSettings


class Meter:
    """Own CPU time (children excluded) of wrapped calls made on the main thread, by label."""

    def __init__(self) -> None:
        self.own: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._children: list[float] = []
        self._main = threading.main_thread().ident

    def wrap(self, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self._main:
                return call(*args, **kwargs)
            began = time.thread_time()
            self._children.append(0.0)
            try:
                return call(*args, **kwargs)
            finally:
                elapsed = time.thread_time() - began
                children = self._children.pop()
                self.own[label] += elapsed - children
                self.calls[label] += 1
                if self._children:
                    self._children[-1] += elapsed

        return timed


@contextmanager
def metered(meter: Meter) -> Iterator[None]:
    """The driver's per-statement calls timed, whichever of them this version of the store makes."""
    from cassandra.cluster import Session
    from cassandra.query import BatchStatement, PreparedStatement
    from cassandra.timestamps import MonotonicTimestampGenerator

    targets: list[tuple[Any, str, str]] = [
        (PreparedStatement, "bind", "bind"), (BatchStatement, "__init__", "batch"), (BatchStatement, "add", "batch"),
        (Session, "execute_async", "execute_async"), (MonotonicTimestampGenerator, "__call__", "timestamp")]
    try:  # the store's own binding and timestamps, where this version has them
        statements = importlib.import_module("om_stream.adapters.cassandra_store.statements")
        targets.append((statements.Prepared, "bind", "bind"))
        if hasattr(statements, "ClientTimestamps"):
            targets.append((statements.ClientTimestamps, "__call__", "timestamp"))
    except ImportError:
        pass
    originals = [(owner, name, owner.__dict__[name]) for owner, name, _ in targets]
    for owner, name, label in targets:
        setattr(owner, name, meter.wrap(label, owner.__dict__[name]))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def thread_order(threads: list[list[Message]]) -> list[list[tuple[int, Message]]]:
    return [list(enumerate(thread)) for thread in threads]


def batch_order(threads: list[list[Message]], size: int, at_once: int) -> list[list[tuple[int, Message]]]:
    """Round-robin over ``at_once`` threads at a time (message i of each, then i + 1), cut in batches of ``size``."""
    stream: list[tuple[int, Message]] = []
    for k in range(0, len(threads), at_once or len(threads)):
        group = threads[k:k + (at_once or len(threads))]
        stream += [(i, t[i]) for i in range(max(len(t) for t in group)) for t in group if i < len(t)]
    return [stream[k:k + size] for k in range(0, len(stream), size)]


async def write(store: CassandraContentStore, shape: str, work: list[list[tuple[int, Message]]],
                writers: int) -> None:
    async def put(seq: int, message: Message) -> None:
        await store.put_message(message.thread_id, message, seq, len(message.text) // 4 + 4)

    if shape == "batches":
        for batch in work:
            await asyncio.gather(*(put(seq, m) for seq, m in batch))
        return
    queue = list(reversed(work))

    async def writer() -> None:
        while queue:
            for seq, message in queue.pop():
                await put(seq, message)

    await asyncio.gather(*(writer() for _ in range(writers)))


async def run(hosts: str, args: argparse.Namespace) -> dict[str, Any]:
    threads = build_messages()
    per_thread = len(threads[0])
    chosen = threads[: max(1, args.messages // per_thread)]
    count = sum(len(t) for t in chosen)
    half = len(chosen) // 2  # the first half as is, the second metered: no message is written twice
    settings = CassandraSettings(hosts=hosts, keyspace=f"profile_{uuid.uuid4().hex[:8]}",
                                 max_concurrent_requests=args.in_flight)
    migrate(settings)
    store = CassandraContentStore(settings)
    await store.start()
    result: dict[str, Any] = {"store": str(Path(om_stream.__file__).parent.parent), "shape": args.shape,
                              "messages": count, "batch": args.batch, "batch_threads": args.batch_threads}
    try:
        warm = [[(0, t[0])] for t in chosen[:20]]
        await write(store, "batches", warm, args.writers)  # connections and caches warm; not counted
        for label, part in (("plain", chosen[:half]), ("metered", chosen[half:])):
            work = batch_order(part, args.batch, args.batch_threads) if args.shape == "batches" else \
                thread_order(part)
            written = sum(len(t) for t in part)
            meter = Meter()
            profile = cProfile.Profile(time.thread_time) if label == "metered" and args.cprofile else None
            cpu, began = time.thread_time(), time.perf_counter()
            if label == "metered":
                with metered(meter):
                    if profile is not None:
                        profile.enable()
                    await write(store, args.shape, work, args.writers)
                    if profile is not None:
                        profile.disable()
            else:
                await write(store, args.shape, work, args.writers)
            wall, cpu = time.perf_counter() - began, time.thread_time() - cpu
            result[label] = {"messages": written, "msgs_per_s": round(written / wall),
                             "main_cpu_us_per_msg": round(cpu / written * 1e6, 1)}
            if label == "metered":
                shares = {k: round(100 * v / cpu, 1) for k, v in sorted(meter.own.items())}
                shares["driver_per_statement"] = round(100 * sum(meter.own.values()) / cpu, 1)
                result[label]["share_of_main_cpu_pct"] = shares
                result[label]["us_per_msg"] = {k: round(v / written * 1e6, 1) for k, v in sorted(meter.own.items())}
                result[label]["calls_per_msg"] = {k: round(v / written, 2) for k, v in sorted(meter.calls.items())}
            if profile is not None:
                print(f"\ncProfile of the metered run (own CPU time, top {args.cprofile}):")
                pstats.Stats(profile).sort_stats("tottime").print_stats(args.cprofile)
    finally:
        await store.close()
        drop_keyspace(settings)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("threads", "batches"), default="threads")
    parser.add_argument("--messages", type=int, default=20_000, help="half written as is, half metered")
    parser.add_argument("--writers", type=int, default=128, help="threads written at once (shape threads)")
    parser.add_argument("--batch", type=int, default=100, help="messages per input batch (shape batches)")
    parser.add_argument("--batch-threads", type=int, default=0,
                        help="threads interleaved at a time (shape batches; 0: all of them)")
    parser.add_argument("--in-flight", type=int, default=256, help="Cassandra queries in flight at most")
    parser.add_argument("--cprofile", type=int, default=0, help="print the metered run's top N functions")
    args = parser.parse_args()
    hosts = os.environ.get("OM_CASSANDRA_HOSTS")
    if not hosts:
        raise SystemExit("set OM_CASSANDRA_HOSTS (host:port of a running Cassandra)")
    result = asyncio.run(run(hosts, args))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
