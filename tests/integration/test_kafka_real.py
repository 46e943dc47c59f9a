"""Real Apache Kafka: a consumer group reads what a producer wrote, and committed offsets survive a restart."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def test_consumer_group_reads_produced_records_and_resumes_from_committed_offset(kafka_bootstrap: str) -> None:
    topic, group = f"it-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        await admin.close()

    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5)
    await producer.start()
    try:
        for i in range(30):
            await producer.send(topic, key=f"thread-{i % 5}".encode(), value=f"m{i}".encode())
        await producer.flush()
    finally:
        await producer.stop()

    async def consume(limit: int, committed_before: int) -> list[tuple[str, str]]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        seen: list[tuple[str, str]] = []
        try:
            while len(seen) < limit:
                batch = await consumer.getmany(timeout_ms=5000, max_records=limit - len(seen))
                if not batch:
                    break
                for records in batch.values():
                    seen.extend((r.key.decode(), r.value.decode()) for r in records)
            await consumer.commit()
            committed = sum([(await consumer.committed(TopicPartition(topic, p))) or 0 for p in range(3)])
            assert committed == committed_before + len(seen)
        finally:
            await consumer.stop()
        return seen

    first = await consume(12, 0)
    rest = await consume(100, 12)  # a new member of the group resumes where the first one committed
    values = [v for _, v in first + rest]
    assert len(first) == 12
    assert sorted(values, key=lambda v: int(v[1:])) == [f"m{i}" for i in range(30)]  # each record exactly once
    # records of one key share a partition, so they arrive in the order they were produced
    by_key: dict[str, list[int]] = {}
    for k, v in first + rest:
        by_key.setdefault(k, []).append(int(v[1:]))
    assert all(nums == sorted(nums) and len(nums) == 6 for nums in by_key.values())
