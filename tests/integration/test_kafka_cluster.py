"""Real Apache Kafka nodes stopped, killed and restarted: what was acknowledged is still there afterwards.

These tests start their own nodes in ``tmp_path`` (never the session's shared broker): (a) one node, stopped with
SIGTERM and then killed with SIGKILL, each time restarted on the same folder and ports, keeps its topic, its records
and a consumer group's committed offsets; (b) a three-node KRaft cluster (replication 3, min.insync.replicas 2)
loses one node to SIGKILL while a producer writes with acks=all and a group consumer reads: every acknowledged
record survives, and the node, restarted, catches up and rejoins the in-sync replicas of every partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from om_stream.devservices import kafka

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 3


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def _create_topic(bootstrap: str, topic: str, replication: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=replication)])
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, key=v.encode(), value=v.encode()) for v in values]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _read(consumer: AIOKafkaConsumer, *, count: int | None = None,
                end: dict[TopicPartition, int] | None = None, timeout: float = 30.0) -> list[str]:
    """Poll until exactly ``count`` records arrived, or until the position reached ``end`` on every partition."""
    seen: list[str] = []

    async def done() -> bool:
        if count is not None:
            return len(seen) >= count
        assert end is not None
        return all([await consumer.position(tp) >= offset for tp, offset in end.items()])

    deadline = time.monotonic() + timeout
    while not await done():
        if time.monotonic() > deadline:
            pytest.fail(f"read only {len(seen)} records in {timeout:.0f}s (count {count}, end {end})")
        batch = await consumer.getmany(timeout_ms=1000, max_records=None if count is None else count - len(seen))
        seen.extend(r.value.decode() for records in batch.values() for r in records)
    return seen


async def _read_all(bootstrap: str, topic: str) -> list[str]:
    """Every record of ``topic``, from the first offset to the end, without a group."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        return await _read(consumer, end=await consumer.end_offsets(partitions))
    finally:
        await consumer.stop()


async def _consume_in_group(bootstrap: str, topic: str, group: str, limit: int) -> list[str]:
    """A new member of ``group`` reads ``limit`` records from the committed offsets, then commits its positions."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        seen = await _read(consumer, count=limit)
        await consumer.commit()
        return seen
    finally:
        await consumer.stop()


async def _committed(bootstrap: str, topic: str, group: str) -> int:
    """The sum of ``group``'s committed offsets over the partitions of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return sum([(await consumer.committed(TopicPartition(topic, p))) or 0 for p in range(PARTITIONS)])
    finally:
        await consumer.stop()


async def test_a_restarted_node_keeps_its_topic_records_and_committed_offsets(own_broker: kafka.KafkaNode) -> None:
    node = own_broker
    topic, group = _unique("restart"), _unique("g")
    values = [f"m{i}" for i in range(60)]
    await _create_topic(node.bootstrap, topic, replication=1)
    await _produce(node.bootstrap, topic, values[:40])
    first = await _consume_in_group(node.bootstrap, topic, group, limit=15)
    assert len(first) == 15
    assert await _committed(node.bootstrap, topic, group) == 15

    node.stop()  # SIGTERM: a clean shutdown
    assert not node.running
    node.restart()
    await kafka.wait_ready_async(node)
    assert sorted(await _read_all(node.bootstrap, topic)) == sorted(values[:40])
    assert await _committed(node.bootstrap, topic, group) == 15
    await _produce(node.bootstrap, topic, values[40:])
    second = await _consume_in_group(node.bootstrap, topic, group, limit=25)  # resumes after the first 15

    node.kill()  # SIGKILL: no shutdown hook, log recovery on the next start
    assert not node.running
    node.restart()
    await kafka.wait_ready_async(node)
    assert sorted(await _read_all(node.bootstrap, topic)) == sorted(values)
    assert await _committed(node.bootstrap, topic, group) == 40
    rest = await _consume_in_group(node.bootstrap, topic, group, limit=20)
    assert sorted(first + second + rest) == sorted(values)  # each record once: no offset went back or forward
    assert await _committed(node.bootstrap, topic, group) == 60  # the end of the log: nothing left unread


async def _replicas(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], tuple[set[int], set[int]]]:
    """(replicas, in-sync replicas) of every partition of ``topics``, as the cluster's metadata shows them."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    await admin.start()
    try:
        described = await admin.describe_topics(topics)
    finally:
        await admin.close()
    return {(t["topic"], p["partition"]): (set(p["replicas"]), set(p["isr"]))
            for t in described for p in t["partitions"]}


async def _wait_for_isr(bootstrap: str, topics: list[str], expected: set[int], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    state: dict[tuple[str, int], tuple[set[int], set[int]]] | BaseException = {}
    while time.monotonic() < deadline:
        try:
            state = await _replicas(bootstrap, topics)
        except (KafkaError, OSError) as exc:  # a node that just died may still be in the metadata for a moment
            state = exc
        else:
            if state and all(isr == expected for _, isr in state.values()):
                return
        await asyncio.sleep(0.2)  # poll interval: the ISR changes show only in fresh metadata
    pytest.fail(f"in-sync replicas never became {sorted(expected)}: {state!r}")


async def test_a_cluster_loses_no_acknowledged_record_when_a_node_is_killed_and_restarted(
        own_cluster: kafka.KafkaCluster) -> None:
    cluster = own_cluster
    topic, group = _unique("cluster"), _unique("g")
    everyone = {n.node_id for n in cluster.nodes}
    await _create_topic(cluster.bootstrap, topic, replication=3)
    await _wait_for_isr(cluster.bootstrap, [topic], everyone)

    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True,
                                linger_ms=5, request_timeout_ms=30000)
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    acked: list[str] = []
    consumed: set[str] = set()
    progress = asyncio.Condition()

    async def produce(phase: str, count: int) -> None:
        values = [f"{phase}-{i}" for i in range(count)]
        futures = [await producer.send(topic, key=v.encode(), value=v.encode()) for v in values]
        for value, result in zip(values, await asyncio.gather(*futures, return_exceptions=True), strict=True):
            assert not isinstance(result, BaseException), f"{value} not acknowledged: {result!r}"
            acked.append(value)

    async def consume() -> None:
        try:
            while True:
                batch = await consumer.getmany(timeout_ms=500)
                if batch:
                    consumed.update(r.value.decode() for records in batch.values() for r in records)
                    # keeps __consumer_offsets (3 replicas) busy through the fail-over; a commit that meets a
                    # rebalance fails, and the group reads those records again: at least once, as in production
                    with contextlib.suppress(KafkaError):
                        await consumer.commit()
                    async with progress:
                        progress.notify_all()
        finally:
            async with progress:
                progress.notify_all()

    async def consumed_everything_acked(timeout: float = 60.0) -> None:
        try:
            async with progress:
                await asyncio.wait_for(progress.wait_for(lambda: reader.done() or consumed >= set(acked)), timeout)
        except TimeoutError:
            pytest.fail(f"the group read {len(consumed & set(acked))} of {len(acked)} acknowledged records")
        if reader.done():
            reader.result()  # raises what stopped the reader
            pytest.fail("the reader stopped")

    await producer.start()
    await consumer.start()
    reader = asyncio.create_task(consume())
    try:
        await produce("before", 300)
        await consumed_everything_acked()  # the group and its offsets topic exist while all three nodes are up

        leader = producer.client.cluster.leader_for_partition(TopicPartition(topic, 0))
        assert leader in everyone
        victim = cluster.node(leader)  # partition 0 must move its leadership, the others lose a follower
        victim.kill()
        started = time.monotonic()
        await produce("node-down", 300)  # acks=all succeeds on the two that are left (min.insync.replicas=2)
        fail_over_s = time.monotonic() - started
        await consumed_everything_acked()
        assert not victim.running
        survivors = everyone - {victim.node_id}  # fenced: out of the ISR of every partition, internal ones too
        await _wait_for_isr(cluster.bootstrap, [topic, "__consumer_offsets"], survivors)

        victim.restart()
        await asyncio.gather(produce("rejoining", 300), kafka.wait_ready_async(cluster))
        await _wait_for_isr(cluster.bootstrap, [topic, "__consumer_offsets"], everyone)
        await produce("after", 100)  # acks=all now needs the restarted node too: all three in sync
        await consumed_everything_acked()
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await consumer.stop()
        await producer.stop()

    stored = await _read_all(cluster.bootstrap, topic)
    assert len(acked) == 1000
    assert set(acked) <= set(stored), f"lost: {sorted(set(acked) - set(stored))[:10]}"
    assert len(stored) == len(set(stored)), "the idempotent producer wrote a record twice"
    assert fail_over_s < 30, f"acks=all writes stalled {fail_over_s:.1f}s after the kill"
