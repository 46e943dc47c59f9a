"""KIP-1259's zombie keys, on real Kafka with real worker processes and the RocksDB table store: a worker restarting
with a local copy of the state table older than the changelog's tombstone window would never read the tombstone of
a record erased meanwhile (the log cleaner has removed it) and would keep the record. The worker wipes such a copy
at start and recovers the partition from the changelog: the erased record stays gone, the others come back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.support.worker import WorkerProcess, agent_for, http_call, message_record, worker_process

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 30_000}, "reflection": {"observationTokens": 40_000}}
PARTITIONS = 2
# a tombstone window of seconds, so that the cleaner removes the tombstone while the worker is stopped
SMALL = {"OM_WORKER_TABLE_STORE": "rocksdb://", "OM_LIFECYCLE_SEGMENT_S": "2",
         "OM_LIFECYCLE_MAX_COMPACTION_LAG_S": "2", "OM_LIFECYCLE_TOMBSTONE_RETENTION_S": "3"}


async def _changelog(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the changelog from the beginning to its end when asked: (partition, key, value)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        found = []
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for tp, records in (await consumer.getmany(timeout_ms=1500)).items():
                found += [(tp.partition, r.key, r.value) for r in records if r.offset < ends[tp]]
        return found
    finally:
        await consumer.stop()


async def _erase_from_changelog(bootstrap: str, topic: str, key: bytes, partition: int) -> None:
    """What an erase does to the changelog, and what the log cleaner does next while no worker runs: a tombstone
    for ``key``, then records of another key until the cleaner has removed the key's values and the tombstone."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, None, key=key, partition=partition)
        deadline = time.monotonic() + 180
        while [r for r in await _changelog(bootstrap, topic) if r[1] == key]:
            assert time.monotonic() < deadline, "the cleaner never removed the erased record and its tombstone"
            await producer.send_and_wait(topic, None, key=b"\xfffiller", partition=partition)  # rolls the segment
            await asyncio.sleep(2)
    finally:
        await producer.stop()


async def test_a_copy_older_than_the_tombstone_window_is_wiped_so_an_erased_record_stays_erased(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    worker: WorkerProcess = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite",
                                           partitions=PARTITIONS, extra=SMALL)
    changelog = f"{worker.env['OM_WORKER_APP_ID']}-om_records-changelog"
    worker.start()
    try:
        await worker.wait_ready()
        async with agent_for(worker) as agent:
            for thread in ("erased", "kept"):
                for index in range(2):
                    await agent.send(message_record(thread, index, "user", f"{thread} note {index}"),
                                     key=thread.encode())
                await agent.context_through(thread, f"{thread}-m1")
        for thread in ("erased", "kept"):
            assert (await http_call(worker.port, "GET", f"/v1/threads/{thread}/status"))["threadId"] == thread
    finally:
        worker.stop()
    assert worker.popen is not None and worker.popen.returncode == 0
    (home,) = {p for p, key, value in await _changelog(kafka_bootstrap, changelog) if key == b"erased" and value}
    copies = sorted(path.name for path in tmp_path.rglob("om_records-*.db"))
    assert f"om_records-{home}.db" in copies  # the local copy that holds the record

    await _erase_from_changelog(kafka_bootstrap, changelog, b"erased", home)

    worker.start()
    try:
        await worker.wait_ready()
        await http_call(worker.port, "GET", "/v1/threads/erased/status", expect=404)
        assert (await http_call(worker.port, "GET", "/v1/threads/kept/status"))["threadId"] == "kept"
    finally:
        worker.stop()
    log = worker.tail(400_000)
    assert f"local state of table om_records partition {home} wiped" in log
    assert "Traceback" not in log


async def test_a_copy_recovered_a_moment_before_a_stop_is_kept_for_the_next_start(kafka_bootstrap: str,
                                                                                   tmp_path: Path) -> None:
    """The copy is in step from the moment the table is recovered, not from the first periodic marking a minute
    later: a worker stopped within that minute (a rollout, a crash loop, this test) must not leave copies that the
    next start takes for stale, wipes and recovers from the whole changelog."""
    worker = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=PARTITIONS,
                            extra={"OM_WORKER_TABLE_STORE": "rocksdb://"})
    worker.start()
    try:
        await worker.wait_ready()
        async with agent_for(worker) as agent:
            for thread in ("a", "b", "c", "d"):
                await agent.send(message_record(thread, 0, "user", f"{thread} note"), key=thread.encode())
                await agent.context_through(thread, f"{thread}-m0")
    finally:
        worker.stop()
    copies = sorted(path.name for path in tmp_path.rglob("om_records-*.db"))
    assert copies == [f"om_records-{p}.db" for p in range(PARTITIONS)]

    worker.start()
    try:
        await worker.wait_ready()
        for thread in ("a", "b", "c", "d"):
            assert (await http_call(worker.port, "GET", f"/v1/threads/{thread}/status"))["threadId"] == thread
    finally:
        worker.stop()
    log = worker.tail(400_000)
    assert "wiped" not in log, log[-3000:]
    assert "Traceback" not in log
