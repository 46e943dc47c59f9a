"""Records' states for an export of a worker deployment (``runtime/exporter.py``'s ``StateReader``), read from the
memory agents' state table.

:class:`ChangelogStates` reads them from the table's changelog topic (``<app_id>-om_records-changelog``), so a
process that holds no partition can export (``om-stream export``, even with every worker stopped), and so can a
worker for the records other workers hold. The changelog is the table's durable copy: compacted, each record's
states written to its home partition (``state_table``), which is where the record's inputs land, the Java
partitioner (murmur2) of its key, as every om-stream client and the ingest agent partition
(``client/partitioning``). A record is looked for there first, in one read of the partition up to the end it had
when the read began; a record not found there is looked for in the other partitions (an agent that partitions its
own way). Only the newest value of each wanted key is held, so the memory an export takes is its states', whatever
the changelog's size; the time is the size of the partitions read.

:class:`TableThenChangelog` is the worker's: the records it holds from its own table, the others from the
changelog. A worker's table is at least as new as the changelog (the changelog is written from it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from om_stream.client.partitioning import partition_for
from om_stream.client.security import start_checked
from om_stream.core.state import RecordState
from om_stream.errors import StorageError
from om_stream.runtime.worker.state_table import TABLE_NAME, RecordTable, decode_held
from om_stream.settings import KafkaSettings

__all__ = ["ChangelogStates", "TableThenChangelog", "changelog_topic"]

log = logging.getLogger(__name__)
_STALL_S = 30.0  # a partition read that makes no progress for this long fails the export


def changelog_topic(app_id: str) -> str:
    """The state table's changelog: Faust names it ``<app id>-<table>-changelog`` (the app id of the memory role)."""
    return f"{app_id}-{TABLE_NAME}-changelog"


class ChangelogStates:
    """``StateReader`` over the table's changelog, on a consumer of its own (no group, nothing committed)."""

    def __init__(self, kafka: KafkaSettings, app_id: str, *, client_options: Mapping[str, Any]) -> None:
        self.kafka = kafka
        self.topic = changelog_topic(app_id)
        self.client_options = dict(client_options)

    async def states(self, resource_id: str, record_keys: Collection[str]) -> AsyncIterator[RecordState]:
        async for state in self.states_of(record_keys):
            if state.resource_id == resource_id:
                yield state

    async def states_of(self, record_keys: Collection[str]) -> AsyncIterator[RecordState]:
        """The states of ``record_keys`` the table holds, whichever resource they belong to."""
        wanted = set(record_keys)
        if not wanted:
            return
        consumer = AIOKafkaConsumer(bootstrap_servers=self.kafka.bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest", **self.client_options)
        await start_checked(consumer, self.kafka.bootstrap, self.client_options, close=consumer.stop)
        try:
            partitions = await self._partitions(consumer)
            homes = {partition_for(key, len(partitions)) for key in wanted}
            found = await _newest(consumer, [TopicPartition(self.topic, p) for p in sorted(homes)], wanted)
            if wanted - set(found):
                others = [TopicPartition(self.topic, p) for p in sorted(set(partitions) - homes)]
                found.update(await _newest(consumer, others, wanted - set(found)))
        finally:
            await consumer.stop()
        for key in sorted(found):
            try:
                _, state = decode_held(found[key])
            except (ValueError, KeyError, TypeError) as exc:  # not a table value this version can read
                log.warning("the changelog's state of record %s is unreadable (%s): left out", key,
                            type(exc).__name__)
                continue
            if state.key == key:
                yield state

    async def _partitions(self, consumer: AIOKafkaConsumer) -> list[int]:
        """The changelog's partitions: as many as the input topics' (Faust refuses a table that differs)."""
        if self.topic not in await consumer.topics():
            raise StorageError(f"the state table's changelog {self.topic!r} is not on the brokers at "
                               f"{self.kafka.bootstrap}: check OM_WORKER_APP_ID (the memory workers' app id) and "
                               "OM_KAFKA_BOOTSTRAP", transient=False)
        return list(range(self.kafka.partitions))


async def _newest(consumer: AIOKafkaConsumer, partitions: list[TopicPartition],
                  wanted: set[str]) -> dict[str, bytes]:
    """The newest value of each wanted key in ``partitions``, read from their start to the end they have now."""
    if not partitions:
        return {}
    consumer.assign(partitions)
    ends = await consumer.end_offsets(partitions)
    await consumer.seek_to_beginning(*partitions)
    found: dict[str, bytes] = {}
    pending = {tp for tp in partitions if ends[tp] > 0}
    loop = asyncio.get_running_loop()
    progress = loop.time()
    while pending:
        batch = await consumer.getmany(*pending, timeout_ms=500)
        for records in batch.values():
            for record in records:
                key = record.key.decode(errors="replace") if record.key is not None else ""
                if key not in wanted:
                    continue
                if record.value is None:  # a tombstone: the record was dropped from the table
                    found.pop(key, None)
                else:
                    found[key] = record.value
        for tp in list(pending):
            if await consumer.position(tp) >= ends[tp]:
                pending.discard(tp)
        if batch:
            progress = loop.time()
        elif loop.time() - progress > _STALL_S:
            stalled = sorted(tp.partition for tp in pending)
            raise StorageError(f"reading the state table's changelog stalled at partitions {stalled} (no record "
                               f"for {_STALL_S:.0f} s)")
    return found


class TableThenChangelog:
    """A worker's ``StateReader``: the records its table holds now, then the others from the changelog."""

    def __init__(self, table: RecordTable, changelog: ChangelogStates) -> None:
        self.table = table
        self.changelog = changelog

    async def states(self, resource_id: str, record_keys: Collection[str]) -> AsyncIterator[RecordState]:
        elsewhere = []
        for key in sorted(record_keys):
            held = self.table.lookup(key)
            if held is not None:
                yield held.state
            else:
                elsewhere.append(key)
        async for state in self.changelog.states(resource_id, elsewhere):
            yield state
