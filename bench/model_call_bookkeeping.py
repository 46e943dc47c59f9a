"""What a model call's bookkeeping costs on Cassandra: the path ``runtime/worker/model_calls.py`` takes when no
other worker holds the request (read the result, claim the lease, read again, store the result), ``--calls`` times
in a row on a fresh keyspace (dropped after), ``--rounds`` times. Prints per round the milliseconds per call (wall
and this process's CPU) and the ``system.paxos`` writes per call on the node: each lightweight transaction writes
that table on every replica (promise, proposal, commit), so it counts them exactly.

Uses ``OM_CASSANDRA_HOSTS`` (one node) when set, else starts its own node (devservices) and stops it after. To
compare two versions of the code, run it with ``PYTHONPATH`` set to each checkout, against the same node.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from cassandra.cluster import Cluster
from store_bench import cassandra_hosts, drop_keyspace

from om_stream.adapters.cassandra_store import CassandraContentStore, migrate
from om_stream.settings import CassandraSettings

PAYLOAD = b"an observation the Observer returned " * 40  # ~1.5 KB, the size of a short Observer answer


def paxos_writes(hosts: str) -> int:
    """``system.paxos`` writes the node has counted since it started (``system_views.local_write_latency``)."""
    host, _, port = hosts.split(",", maxsplit=1)[0].rpartition(":")
    cluster = Cluster([host], port=int(port))
    try:
        rows = cluster.connect().execute(
            "SELECT keyspace_name, table_name, count FROM system_views.local_write_latency")
        return sum(row.count for row in rows if row.keyspace_name == "system" and row.table_name == "paxos")
    finally:
        cluster.shutdown()


async def one_round(hosts: str, calls: int) -> tuple[float, float, float]:
    settings = CassandraSettings(hosts=hosts, keyspace=f"bk_{uuid.uuid4().hex[:10]}")
    await asyncio.to_thread(migrate, settings)
    store = CassandraContentStore(settings)
    await store.start()
    try:
        for i in range(20):  # prepares every statement, warms the connection
            await store.put_result(f"warm-{i}", PAYLOAD, record_key="warm")
            await store.claim(f"warm-{i}", "worker-a", 10.0)
        before = await asyncio.to_thread(paxos_writes, hosts)
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(calls):
            key = f"req-{i}"
            assert await store.get_result(key) is None
            assert await store.claim(key, "worker-a", 10.0) is None
            assert await store.get_result(key) is None
            await store.put_result(key, PAYLOAD, record_key=f"rec-{i % 50}")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        after = await asyncio.to_thread(paxos_writes, hosts)
        return wall / calls * 1000, cpu / calls * 1000, (after - before) / calls
    finally:
        await store.close()
        await asyncio.to_thread(drop_keyspace, settings)  # a node shared with other runs keeps no bench keyspace


async def main(args: argparse.Namespace) -> None:
    with cassandra_hosts() as hosts:
        found = [await one_round(hosts, args.calls) for _ in range(args.rounds)]
    for n, (wall, cpu, paxos) in enumerate(found, 1):
        print(f"round {n}: {wall:.2f} ms per call (CPU here {cpu:.2f} ms), {paxos:.2f} system.paxos writes per call")
    print(f"median of {args.rounds} rounds of {args.calls} calls: {statistics.median(f[0] for f in found):.2f} ms "
          f"per call, {statistics.median(f[2] for f in found):.2f} system.paxos writes per call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
