"""Real Apache Kafka: where a partition's log has records, asked on a connection of its own. A transaction's
markers take offsets that hold no record: the only gap the offset ledger may take for a real one."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from om_stream.runtime.worker.partition_log import PartitionLog


async def _topic(bootstrap: str, partitions: int = 1) -> str:
    topic = f"plog-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    return topic


async def test_the_first_record_at_a_marker_is_the_next_transactions_and_at_a_record_the_record(
        kafka_bootstrap: str) -> None:
    topic = await _topic(kafka_bootstrap)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"tx-{uuid.uuid4().hex[:8]}")
    await producer.start()
    try:
        for i in range(3):  # one record per transaction: each commit marker takes the offset after its record
            async with producer.transaction():
                await producer.send_and_wait(topic, key=b"t", value=f"m{i}".encode(), partition=0)
    finally:
        await producer.stop()
    reader = AIOKafkaConsumer(topic, bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest")
    await reader.start()
    try:
        records = (await reader.getmany(timeout_ms=5000)).get(TopicPartition(topic, 0), [])
    finally:
        await reader.stop()
    offsets = [r.offset for r in records]
    assert offsets == [0, 2, 4], "a consumer sees a gap after every record: the markers"

    tp = TopicPartition(topic, 0)
    log = PartitionLog(kafka_bootstrap, client_options={}, timeout_s=5.0)
    try:
        assert await log.first_offset(tp, 1) == 2, "offset 1 is a marker: the log goes on at the next record"
        assert await log.first_offset(tp, 2) == 2
        assert await log.first_offset(tp, 0) == 0
        assert await log.first_offset(tp, 3) == 4, "asked again, on the same connection"
    finally:
        await log.close()


async def test_a_log_with_nothing_at_or_after_the_offset_cannot_tell(kafka_bootstrap: str) -> None:
    topic = await _topic(kafka_bootstrap)
    log = PartitionLog(kafka_bootstrap, client_options={}, timeout_s=1.5)
    try:
        assert await log.first_offset(TopicPartition(topic, 0), 0) is None, "no record: no answer, not a guess"
    finally:
        await log.close()


async def test_the_group_starts_where_it_committed_and_a_partition_it_never_committed_at_its_first_record(
        kafka_bootstrap: str) -> None:
    topic = await _topic(kafka_bootstrap, partitions=2)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for i in range(6):
            await producer.send_and_wait(topic, value=f"m{i}".encode(), partition=0)
    finally:
        await producer.stop()
    tp, group = TopicPartition(topic, 0), f"g-{uuid.uuid4().hex[:8]}"
    member = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
    await member.start()
    member.assign([tp, TopicPartition(topic, 1)])  # assigned by hand: it commits without joining
    log = PartitionLog(kafka_bootstrap, client_options={}, group_id=group, timeout_s=5.0)
    try:
        await member.commit({TopicPartition(topic, 1): 0})  # the group exists, with nothing committed on 0
        assert await log.group_start(tp) == 0, "never committed there: the log's first record"
        await member.commit({tp: 4})
        assert await log.group_start(tp) == 4, "committed: where the group reads next"
    finally:
        await log.close()
        await member.stop()
    assert await PartitionLog(kafka_bootstrap, client_options={}).group_start(tp) is None, "no group: cannot tell"
