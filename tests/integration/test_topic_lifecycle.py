"""The topics' data lifecycle on real Kafka, with real worker processes: every topic created with the configuration
the lifecycle settings promise, an existing topic that breaks it refused at start (exit status 4, a message naming
the topic, the key, the value and the promise, no traceback), one that keeps it accepted as it is, the repair
setting, and the compacted topics cleaned of an erased thread's records on a partition nobody writes to."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from om_stream.retention import DAY_MS, topic_policies
from om_stream.runtime.worker.main import EXIT_LIFECYCLE, EXIT_REFUSED
from om_stream.runtime.worker.segment_roll import ROLL_KEY
from om_stream.settings import KafkaSettings, LifecycleSettings
from tests.support.worker import WorkerProcess, agent_for, message_record, running_worker, worker_process

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 30_000}, "reflection": {"observationTokens": 40_000}}
PARTITIONS = 2


@asynccontextmanager
async def _admin(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def _create(bootstrap: str, name: str, config: dict[str, str]) -> None:
    async with _admin(bootstrap) as admin:
        await admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1,
                                            topic_configs=config)])


async def _configs(bootstrap: str, names: list[str]) -> dict[str, dict[str, str]]:
    async with _admin(bootstrap) as admin:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
    found = {}
    for response in responses:
        for error_code, _, _, name, entries in response.resources:
            assert error_code == 0, (name, error_code)
            found[name] = {entry[0]: entry[1] for entry in entries}
    return found


def _changelog(worker: WorkerProcess) -> str:
    return f"{worker.env['OM_WORKER_APP_ID']}-om_records-changelog"


def _policies(worker: WorkerProcess, lifecycle: LifecycleSettings) -> list[Any]:
    kafka = KafkaSettings(**{f"topic_{name}": topic for name, topic in worker.topics.items()})
    return topic_policies(kafka, lifecycle, resource_scope=False, changelogs=[_changelog(worker)])


async def test_a_worker_creates_every_topic_with_the_promised_configuration(kafka_bootstrap: str,
                                                                           tmp_path: Path) -> None:
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS) as worker:
        policies = _policies(worker, LifecycleSettings())
        configs = await _configs(kafka_bootstrap, [policy.topic for policy in policies])
    # eight logs (no records topic in thread scope), the context topic and om.context/v2's two, the changelog
    assert len(policies) == 12
    for policy in policies:
        assert policy.config().items() <= configs[policy.topic].items(), policy.topic
    assert configs[worker.topics["dlq"]]["retention.ms"] == str(14 * DAY_MS)
    assert configs[_changelog(worker)]["max.compaction.lag.ms"] == str(DAY_MS)
    assert configs[_changelog(worker)]["segment.bytes"] == str(16 * 2**20)  # OM_KAFKA_CHANGELOG_SEGMENT_MB
    assert "every topic keeps the lifecycle promise" in worker.tail(200_000)
    assert "gone within 15 d 1 h 6 min" in worker.tail(200_000)  # the DLQ's window, the longest


async def test_contexts_by_reference_refuse_a_context_topic_not_partitioned_like_the_messages(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    """OM_CONTEXT_WIRE=v2 publishes a thread's blocks to the partition number of its messages: a blocks topic with
    another partition count stops the worker before it starts (exit status 3), naming both counts."""
    worker = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, partitions=PARTITIONS,
                            extra={"OM_CONTEXT_WIRE": "v2"})
    blocks = worker.topics["context_blocks"]
    async with _admin(kafka_bootstrap) as admin:
        await admin.create_topics([NewTopic(blocks, num_partitions=PARTITIONS + 1, replication_factor=1,
                                            topic_configs=_policy_config(worker, blocks))])
    worker.start()
    assert worker.wait_exit(120) == EXIT_REFUSED
    log = worker.tail(100_000)
    assert f"topic {blocks} has {PARTITIONS + 1} partitions and {worker.topics['messages']} has {PARTITIONS}" in log


def _policy_config(worker: WorkerProcess, topic: str) -> dict[str, str]:
    return next(p for p in _policies(worker, LifecycleSettings()) if p.topic == topic).config()


# the old defaults (a deployment upgraded to this version), and a changelog made by hand
REFUSED = [
    ("dlq", {"retention.ms": str(30 * DAY_MS)},
     ["retention.ms is 2592000000 (30 d); the settings promise at most 1209600000 (14 d, "
      "OM_LIFECYCLE_DLQ_RETENTION_S): records would stay longer",
      "--entity-name {topic} --add-config retention.ms=1209600000,segment.ms=86400000"]),
    ("context", {"cleanup.policy": "compact"},
     ["max.compaction.lag.ms is 9223372036854775807 (infinite); the settings promise at most 86400000 (1 d, "
      "OM_LIFECYCLE_MAX_COMPACTION_LAG_S)",
      "delete.retention.ms is 86400000 (1 d); the settings promise exactly 604800000 (7 d, "
      "OM_LIFECYCLE_TOMBSTONE_RETENTION_S): a consumer offline longer than this never sees"]),
    ("changelog", {"cleanup.policy": "compact", "max.compaction.lag.ms": str(DAY_MS), "segment.ms": str(DAY_MS),
                   "delete.retention.ms": str(3_600_000)},
     ["delete.retention.ms is 3600000 (1 h); the settings promise exactly 604800000 (7 d"]),
]


@pytest.mark.parametrize(("topic", "config", "said"), REFUSED, ids=[case[0] for case in REFUSED])
async def test_an_existing_topic_that_breaks_the_promise_stops_the_worker_before_it_starts(
        kafka_bootstrap: str, tmp_path: Path, topic: str, config: dict[str, str], said: list[str]) -> None:
    worker = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, partitions=PARTITIONS)
    name = _changelog(worker) if topic == "changelog" else worker.topics[topic]
    await _create(kafka_bootstrap, name, config)
    worker.start()
    assert worker.wait_exit(120) == EXIT_LIFECYCLE
    log = worker.tail(100_000)
    assert f"topic {name}: " in log
    for sentence in said:
        assert sentence.format(topic=name) in log, sentence
    assert "the worker refuses to start: erased data would outlive what the OM_LIFECYCLE_* settings promise" in log
    assert "OM_LIFECYCLE_REPAIR_TOPICS=true" in log
    assert "Traceback" not in log
    assert "content store ready" not in log  # nothing started: refused before the store and the consumer
    assert (await _configs(kafka_bootstrap, [name]))[name].items() >= config.items()  # left as it was


async def test_an_existing_topic_that_keeps_the_promise_is_accepted_as_it_is(kafka_bootstrap: str,
                                                                            tmp_path: Path) -> None:
    worker = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, partitions=PARTITIONS)
    shorter = {"cleanup.policy": "delete", "retention.ms": str(DAY_MS), "segment.ms": "3600000",
               "message.timestamp.type": "LogAppendTime"}  # no skew to bound with the broker's own time
    compacted = {"cleanup.policy": "compact,delete", "retention.ms": str(20 * DAY_MS), "segment.ms": "3600000",
                 "max.compaction.lag.ms": "3600000", "delete.retention.ms": str(7 * DAY_MS),
                 "message.timestamp.type": "LogAppendTime"}
    await _create(kafka_bootstrap, worker.topics["messages"], shorter)
    await _create(kafka_bootstrap, worker.topics["context"], compacted)
    worker.start()
    try:
        await worker.wait_ready()
    finally:
        worker.stop()
    configs = await _configs(kafka_bootstrap, [worker.topics["messages"], worker.topics["context"]])
    assert configs[worker.topics["messages"]].items() >= shorter.items()  # not raised to the promised values
    assert configs[worker.topics["context"]].items() >= compacted.items()


async def test_with_repair_the_worker_alters_what_breaks_and_keeps_the_other_overrides(kafka_bootstrap: str,
                                                                                       tmp_path: Path) -> None:
    worker = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, partitions=PARTITIONS,
                            extra={"OM_LIFECYCLE_REPAIR_TOPICS": "true"})
    await _create(kafka_bootstrap, worker.topics["dlq"], {"retention.ms": str(30 * DAY_MS),
                                                          "max.message.bytes": "2000000"})
    await _create(kafka_bootstrap, worker.topics["context"], {"cleanup.policy": "compact"})
    worker.start()
    try:
        await worker.wait_ready()
    finally:
        worker.stop()
    configs = await _configs(kafka_bootstrap, [worker.topics["dlq"], worker.topics["context"]])
    policies = {policy.topic: policy for policy in _policies(worker, LifecycleSettings())}
    for topic in (worker.topics["dlq"], worker.topics["context"]):
        assert policies[topic].config().items() <= configs[topic].items(), topic
    assert configs[worker.topics["dlq"]]["max.message.bytes"] == "2000000"  # AlterConfigs replaced, ours kept it
    log = worker.tail(200_000)
    assert f"topic {worker.topics['dlq']}: retention.ms altered from 2592000000 to 1209600000" in log
    assert f"topic {worker.topics['context']}: max.compaction.lag.ms altered from 9223372036854775807" in log


async def _records(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of ``topic`` from the beginning to its end when asked: (partition, key, value)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                                group_id=None)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        found = []
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            batch = await consumer.getmany(timeout_ms=1500)
            for tp, records in batch.items():
                found += [(tp.partition, record.key, record.value) for record in records if record.offset < ends[tp]]
        return found
    finally:
        await consumer.stop()


SMALL = {"OM_LIFECYCLE_SEGMENT_S": "2", "OM_LIFECYCLE_MAX_COMPACTION_LAG_S": "2",
         "OM_LIFECYCLE_TOMBSTONE_RETENTION_S": "2"}


async def test_an_erased_threads_context_leaves_a_partition_nobody_writes_to(kafka_bootstrap: str,
                                                                            tmp_path: Path) -> None:
    """The context topic's tombstone removes the thread's contexts although no context is published after it: the
    worker's roll tombstones roll the segment. A control topic with the same configuration and no writer keeps
    them (Kafka never compacts an active segment), which is why the roll exists."""
    thread = f"quiet-{uuid.uuid4().hex[:6]}"
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, partitions=PARTITIONS,
                              extra=SMALL) as worker:
        control = f"{worker.topics['context']}.control"
        policy = next(p for p in _policies(worker, LifecycleSettings(**{k.removeprefix("OM_LIFECYCLE_").lower(): v
                                                                         for k, v in SMALL.items()}))
                      if p.topic == worker.topics["context"])
        await _create(kafka_bootstrap, control, policy.config())
        async with agent_for(worker) as agent:
            for index in range(3):
                await agent.send(message_record(thread, index, "user", f"note {index}"), key=thread.encode())
            await agent.context_through(thread, f"{thread}-m2")
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(control, b"a context", key=thread.encode(), partition=0)
            # the erase's tombstones (standing in for the erase): nothing is published for the thread after them
            await producer.send_and_wait(worker.topics["context"], None, key=thread.encode())
            await producer.send_and_wait(control, None, key=thread.encode(), partition=0)
        finally:
            await producer.stop()
        deadline = time.monotonic() + 150
        while True:
            left = [r for r in await _records(kafka_bootstrap, worker.topics["context"])
                    if r[1] == thread.encode() and r[2] is not None]
            if not left:
                break
            assert time.monotonic() < deadline, f"{len(left)} contexts of the erased thread are still on the topic"
            await asyncio.sleep(3)
        rolled = {(topic, partition) for topic in (worker.topics["context"], _changelog(worker))
                  for partition, key, value in await _records(kafka_bootstrap, topic)
                  if key == ROLL_KEY and value is None}
    assert rolled == {(topic, p) for topic in (worker.topics["context"], _changelog(worker))
                      for p in range(PARTITIONS)}  # every partition the worker holds, both topics
    controlled = await _records(kafka_bootstrap, control)
    assert (0, thread.encode(), b"a context") in controlled  # no writer after the tombstone: never compacted


async def _written(bootstrap: str, topic: str) -> int:
    """How many records ``topic`` was ever given (its partitions' end offsets)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return sum(ends.values())
    finally:
        await consumer.stop()


async def test_a_changelog_of_small_segments_is_compacted_so_a_take_over_reads_little(kafka_bootstrap: str,
                                                                                       tmp_path: Path) -> None:
    """A worker taking a partition over without a local copy reads its changelog from the start. Kafka compacts
    closed segments only: with the broker's 1 GiB segments and a day's segment.ms, every state a thread ever had
    would be read back. With OM_KAFKA_CHANGELOG_SEGMENT_MB=1 the filled segments roll and the cleaner keeps the
    newest state of each record, so a thread written hundreds of times is read back a few times, and a worker
    started without a local copy recovers the thread from what is left."""
    thread = f"long-{uuid.uuid4().hex[:6]}"
    messages = 400  # under messageTokens: nothing is observed, and each state is larger than the one before
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, partitions=PARTITIONS, store="sqlite",
                              extra={"OM_KAFKA_CHANGELOG_SEGMENT_MB": "1"}) as worker:
        changelog = _changelog(worker)
        assert (await _configs(kafka_bootstrap, [changelog]))[changelog]["segment.bytes"] == str(2**20)
        async with agent_for(worker) as agent:
            for index in range(messages):
                await agent.send(message_record(thread, index, "user", f"message {index} of a long thread"),
                                 key=thread.encode())
                await agent.context_through(thread, f"{thread}-m{index}")  # one state written per message
        written = await _written(kafka_bootstrap, changelog)
        assert written >= messages
        deadline = time.monotonic() + 150
        while True:
            read = await _records(kafka_bootstrap, changelog)
            if len(read) * 4 <= written:
                break
            assert time.monotonic() < deadline, (f"the changelog still gives {len(read)} of the {written} records "
                                                 f"written to a worker that reads it from the start")
            await asyncio.sleep(3)
        states = [value for _, key, value in read if key is not None and thread.encode() in key]
        assert states and states[-1] is not None  # the newest state stays, whatever was compacted
        worker.stop()
        # started again on an empty data folder: no local copy, the table is recovered from the changelog's start
        worker.env["OM_WORKER_DATA_DIR"] = str(tmp_path / "again")
        worker.start()
        await worker.wait_ready()
        async with agent_for(worker) as agent:
            await agent.send(message_record(thread, messages, "user", "one more"), key=thread.encode())
            context = await agent.context_through(thread, f"{thread}-m{messages}")
    assert len(context["messages"]) == messages + 1
