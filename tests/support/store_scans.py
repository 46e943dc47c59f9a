"""Reading what every store holds, raw, for the erasure and retention tests: the bytes of a folder's files (SQLite,
Qdrant's local files), the latest record per key of a compacted topic, and the rows of a Cassandra keyspace as
text. The tests look for their markers in these, so nothing the product decodes can hide a leftover."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition
from cassandra.cluster import Cluster, Session

from om_stream.settings import CassandraSettings

__all__ = ["cassandra_rows", "cql", "files_bytes", "holding", "latest_per_key"]


def files_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


async def latest_per_key(bootstrap: str, topic: str) -> dict[str, bytes | None]:
    """Every key's latest record value on ``topic`` (None: a tombstone), read from the beginning to the end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        for _ in range(50):
            if partitions:
                break
            await asyncio.sleep(0.2)
            await consumer._client.force_metadata_update()  # a topic created a moment ago
            partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        latest: dict[str, bytes | None] = {}
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for record in records:
                    latest[(record.key or b"").decode("utf-8", "replace")] = record.value
        return latest
    finally:
        await consumer.stop()


@contextmanager
def _session(hosts: str, keyspace: str | None = None) -> Iterator[Session]:
    """A session on a connection of its own, closed on the way out. ``hosts`` may name several nodes of one
    cluster (one port)."""
    points = CassandraSettings(hosts=hosts).contact_points()
    cluster = Cluster([host for host, _ in points], port=points[0][1], protocol_version=5)
    try:
        yield cluster.connect(keyspace)
    finally:
        cluster.shutdown()


def cql(hosts: str, *statements: str, timeout: float = 60) -> list[object]:
    """Each statement's result."""
    with _session(hosts) as session:
        return [session.execute(s, timeout=timeout) for s in statements]


def cassandra_rows(hosts: str, keyspace: str) -> dict[str, list[str]]:
    """Every row of every table of the keyspace, as text, by table."""
    with _session(hosts, keyspace) as session:
        tables = [r.table_name for r in session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))]
        return {table: [str(row) for row in session.execute(f"SELECT * FROM {table}")] for table in tables}


def holding(rows: dict[str, list[str]], markers: set[str]) -> dict[str, list[str]]:
    """The rows (by table) that hold one of ``markers``."""
    found = {table: [row[:600] for row in held if any(m in row for m in markers)] for table, held in rows.items()}
    return {table: held for table, held in found.items() if held}
