"""The production content store on Apache Cassandra (schema: ``migrations/``).

Behaviour is the SQLite store's and the in-memory twin's (``adapters/memory_store.py``): idempotent writes with
deterministic ids; a generation's log written once (first writer wins: ``INSERT ... IF NOT EXISTS``, the only
lightweight transaction among the content writes); ``clear`` forgets a record's observations and keeps its
messages; a reflection's group keeps the ranges of every group it replaced; every recall read is keyed by the
tenant.

How the writes stay idempotent without read-before-write or transactions:

* A message is two plain inserts (by thread, by id) with fixed values; a replay rewrites the same cells.
* Thread first/last message times are cell-timestamped by the message time (``USING TIMESTAMP``), so the earliest
  and newest win in any order; a record's clear epoch is timestamped by the epoch, so the highest wins.
* A segment's text is written once per id with fixed values; which generations hold it is a set that only grows
  (``generations + {g}``), so an activation replayed before or after anything else converges; "buffered" is
  simply an empty set.

What it remembers of its own writes (a thread's buckets and message times, a record's resource) only saves writes:
forgotten, the same idempotent rows are written once more. So each is bounded (``REMEMBERED``): the oldest go first,
and a worker's memory does not grow with the threads it has seen.

It also keeps model-call results and their leases (``ports.CycleResults``, in ``cycle_results.py``) on the same
session.

A store connects in :meth:`CassandraContentStore.start` (or on first use), and refuses to start on unreachable
contact points, or on a keyspace that is missing or lacks a packaged migration
(:class:`~om_stream.errors.StorageError` naming the fix: the hosts, ``om-stream migrate``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal, cast

from opentelemetry.trace import Tracer

from om_stream.adapters.cassandra_store.cycle_results import CassandraCycleResults
from om_stream.adapters.cassandra_store.erasure import CassandraErasure
from om_stream.adapters.cassandra_store.export import CassandraExports
from om_stream.adapters.cassandra_store.message_batches import MAX_BODY_CHARS, MessageBatches
from om_stream.adapters.cassandra_store.queries import BUCKET_MS, CAS, CREATED_TS_BASE, READS, WRITES, thread_page
from om_stream.adapters.cassandra_store.retention import CassandraRetention
from om_stream.adapters.cassandra_store.schema_migrations import check_migrated
from om_stream.adapters.cassandra_store.session import CassandraSession
from om_stream.adapters.cassandra_store.statements import Prepared
from om_stream.core.commands import (
    ActivateChunks,
    CommitGeneration,
    ExpireStored,
    PersistRetention,
    PersistSegment,
    PersistThreadMetadata,
)
from om_stream.core.erasure import ErasureCounts, PartRecord, StrayWrites
from om_stream.core.messages import Message
from om_stream.core.recall.groups import ranges_from_json, ranges_to_json, reflection_ranges
from om_stream.core.retention import ExpiryCounts, SegmentText
from om_stream.errors import StorageError
from om_stream.ports import (
    GenerationRecord,
    MessagePage,
    MessagePosition,
    ObservationGroup,
    StoredMessage,
    StoreOutages,
    ThreadMetadata,
    ThreadPage,
    ThreadSummary,
)
from om_stream.settings import CassandraSettings

__all__ = ["CassandraContentStore"]

log = logging.getLogger(__name__)
_RECORD_PAGE = 500  # messages per read when a clear reads a record's conversation back
REMEMBERED = 100_000  # threads' buckets, threads' message times, records' resources: each at most this many


def _keep_recent(remembered: dict[Any, Any]) -> None:
    while len(remembered) > REMEMBERED:
        del remembered[next(iter(remembered))]


def _bucket(created_at: int) -> int:
    return created_at // BUCKET_MS


class CassandraContentStore(CassandraExports):
    """``CassandraContentStore(settings.cassandra)``; ``await store.start()`` at startup to fail fast. ``outages``
    is told of every query that fails and is retried, and of every one that succeeds (the worker's outage watch)."""

    def __init__(self, settings: CassandraSettings, *, outages: StoreOutages | None = None,
                 tracer: Tracer | None = None) -> None:
        self.settings = settings
        self.outages = outages
        self.tracer = tracer  # the worker's: a span per statement within a traced input (``CassandraSession``)
        self._session: CassandraSession | None = None
        self._statements: dict[str, Prepared] = {}
        self._pages: dict[tuple[bool, bool, bool], Prepared] = {}
        self._connecting = asyncio.Lock()
        self._ttl = settings.ttl_seconds
        self._cache: OrderedDict[str, tuple[str, Message]] = OrderedDict()  # message id -> (resource, message)
        self._record_resources: dict[str, str] = {}
        self._buckets: set[tuple[str, str, int]] = set()
        self._spans: dict[tuple[str, str], tuple[int, int]] = {}  # thread -> (first, newest) message time written
        self._closed = False
        self._results = CassandraCycleResults(self._run, settings.cycle_result_ttl_s)
        self._erasure = CassandraErasure(self._run)
        self._retention = CassandraRetention(self._run, self._erasure, self._ttl)
        self._messages = MessageBatches(self._message_batch)

    def __repr__(self) -> str:
        return f"CassandraContentStore(hosts={self.settings.hosts!r}, keyspace={self.settings.keyspace!r})"

    # -- connection ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, check the keyspace holds every packaged migration, prepare the statements; idempotent. Raises
        StorageError naming the fix when it cannot (the contact points, ``om-stream migrate``)."""
        await self._ready()

    async def _ready(self) -> CassandraSession:
        if self._session is not None:
            return self._session
        if self._closed:
            raise StorageError("the Cassandra content store is closed")
        async with self._connecting:
            if self._session is None:
                session = await CassandraSession.connect(self.settings, self.settings.keyspace, self.outages,
                                                         self.tracer)
                try:
                    await self._check_schema(session)
                    # compare-and-set statements are retried by hand: a retry reads the row the first attempt
                    # may have won
                    statements = {name: await session.prepare(cql, write=True, idempotent=name not in CAS)
                                  for name, cql in WRITES.items()}
                    assert not set(READS) & set(WRITES), "statement names must be unique"
                    statements.update({name: await session.prepare(cql) for name, cql in READS.items()
                                       if name != "migrations"})
                    for after in (False, True):
                        for before in (False, True):
                            for newest in (False, True):
                                self._pages[(after, before, newest)] = await session.prepare(
                                    thread_page(after=after, before=before, newest_first=newest))
                except BaseException:
                    await session.close()
                    raise
                self._statements = statements
                self._session = session
        assert self._session is not None
        return self._session

    async def _check_schema(self, session: CassandraSession) -> None:
        try:
            rows = await session.execute(READS["migrations"], what="reading schema_migrations")
        except StorageError as exc:
            raise StorageError(f"Cassandra keyspace {self.settings.keyspace!r} is not migrated (no "
                               "schema_migrations table): run `om-stream migrate` before starting om-stream") from exc
        check_migrated({row.version: row.checksum for row in rows}, self.settings.keyspace)

    async def close(self) -> None:
        self._closed = True
        await self._messages.drain()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    @property
    def retries(self) -> int:
        """Queries attempted again after a timeout or an unavailable node, since the store connected."""
        return self._session.retries if self._session else 0

    async def _run(self, name: str, params: Sequence[Any]) -> list[Any]:
        session = await self._ready()
        return await session.execute(self._statements[name], params, what=name)

    # -- messages ------------------------------------------------------------------------------------------------

    def _remember(self, message: Message) -> None:
        if self.settings.message_cache_size <= 0:
            return
        self._cache[message.message_id] = (message.resource_id, message)
        self._cache.move_to_end(message.message_id)
        while len(self._cache) > self.settings.message_cache_size:
            self._cache.popitem(last=False)

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None:
        """One unlogged batch per message (by thread, by id, the thread's times), shared with the thread's other
        messages written at the same moment (``message_batches.py``): a single request, and no batch log. Not
        atomic across the tables, which a replay repairs: every statement in it is idempotent. Large messages (long
        tool results) go as separate concurrent requests, below the server's batch size limits."""
        resource, thread = message.resource_id, message.thread_id
        created = message.created_at_ms
        bucket = _bucket(created)
        body = message.model_dump_json()
        ttl = self._ttl
        writes: list[tuple[str, tuple[Any, ...]]] = [
            ("put_message", (resource, thread, bucket, created, seq, message.message_id, record_key, message.role,
                             tokens, body, ttl)),
            ("put_message_by_id", (message.message_id, resource, thread, bucket, created, seq, record_key,
                                   message.role, tokens, body, ttl)),
        ]
        if (resource, thread, bucket) not in self._buckets:
            writes.append(("put_bucket", (resource, thread, bucket, ttl)))
        first, newest = self._spans.get((resource, thread), (None, None))
        if newest is None or created > newest:
            writes.append(("thread_updated", (created * 1000, ttl, created, resource, thread)))
        if first is None or created < first:
            writes.append(("thread_created", (CREATED_TS_BASE - created * 1000, ttl, created, resource, thread)))
        if self._record_resources.get(record_key) != resource:
            writes.append(("record_resource", (resource, record_key)))
        if len(body) <= MAX_BODY_CHARS:
            await self._messages.write((resource, thread), writes, len(body))
        else:  # a batch this large would pass Cassandra's batch size thresholds: separate requests
            await _all([self._run(name, params) for name, params in writes])
        if len(self._buckets) >= REMEMBERED:
            self._buckets.clear()  # each thread writes its bucket row once more, then it is known again
        self._buckets.add((resource, thread, bucket))
        self._spans.pop((resource, thread), None)  # to the end: a busy thread is forgotten last
        self._spans[(resource, thread)] = (min(created, first if first is not None else created),
                                           max(created, newest if newest is not None else created))
        self._record_resources.setdefault(record_key, resource)
        _keep_recent(self._spans)
        _keep_recent(self._record_resources)
        self._remember(message)

    async def _batch(self, writes: Sequence[tuple[str, Sequence[Any]]], *, what: str) -> None:
        session = await self._ready()
        statements = self._statements
        batch = session.unlogged_batch([(statements[name], params) for name, params in writes])
        await session.execute(batch, None, what=what)

    async def _message_batch(self, writes: Sequence[tuple[str, Sequence[Any]]]) -> None:
        await self._batch(writes, what="put_message")

    async def get_messages(self, message_ids: Sequence[str], *, resource_id: str | None = None) -> list[Message]:
        """The messages in the order asked; ids not found are left out. ``resource_id`` restricts to a tenant."""
        found: dict[str, Message] = {}
        missing: list[str] = []
        for message_id in dict.fromkeys(message_ids):
            cached = self._cache.get(message_id)
            if cached is not None and (resource_id is None or cached[0] == resource_id):
                found[message_id] = cached[1]
            else:
                missing.append(message_id)

        async def fetch(message_id: str) -> None:
            if resource_id is None:
                rows = await self._run("message_by_id", (message_id,))
            else:
                rows = await self._run("message_of_resource", (message_id, resource_id))
            if rows:
                message = Message.model_validate_json(rows[0].body)
                found[message_id] = message
                if resource_id is None or len(rows) == 1:
                    self._remember(message)

        await _all([fetch(i) for i in missing])
        return [found[i] for i in message_ids if i in found]

    def _stored(self, row: Any) -> StoredMessage:
        return StoredMessage(Message.model_validate_json(row.body), row.record_key, row.seq, row.tokens)

    async def get_message(self, resource_id: str, message_id: str) -> StoredMessage | None:
        rows = await self._run("message_of_resource", (message_id, resource_id))
        return self._stored(rows[0]) if rows else None

    async def _thread_buckets(self, resource_id: str, thread_id: str) -> list[int]:
        return [row.bucket for row in await self._run("buckets", (resource_id, thread_id))]

    async def list_thread_messages(self, resource_id: str, thread_id: str, *, limit: int,
                                   after: MessagePosition | None = None, before: MessagePosition | None = None,
                                   newest_first: bool = False) -> MessagePage:
        buckets = await self._thread_buckets(resource_id, thread_id)
        if after is not None:
            buckets = [b for b in buckets if b >= _bucket(after.created_at)]
        if before is not None:
            buckets = [b for b in buckets if b <= _bucket(before.created_at)]
        if newest_first:
            buckets.reverse()
        session = await self._ready()
        found: list[StoredMessage] = []
        seen: set[str] = set()
        for bucket in buckets:
            params: list[Any] = [resource_id, thread_id, bucket]
            if after is not None:
                params += [after.created_at, after.seq, after.message_id]
            if before is not None:
                params += [before.created_at, before.seq, before.message_id]
            params.append(limit + 1 - len(found))
            statement = self._pages[(after is not None, before is not None, newest_first)]
            for row in await session.execute(statement, params, what="list_thread_messages"):
                if row.message_id not in seen:
                    seen.add(row.message_id)
                    found.append(self._stored(row))
            if len(found) > limit:
                break
        return MessagePage(tuple(found[:limit]), len(found) > limit)

    async def get_record_messages(self, record_key: str, *, resource_id: str, thread_ids: Sequence[str],
                                  through_seq: int) -> list[StoredMessage]:
        """Each thread's messages page by page (a thread's partitions are its time buckets), those of the record
        up to ``through_seq`` kept."""

        async def of_thread(thread_id: str) -> list[StoredMessage]:
            kept: list[StoredMessage] = []
            after: MessagePosition | None = None
            while True:
                page = await self.list_thread_messages(resource_id, thread_id, limit=_RECORD_PAGE, after=after)
                kept.extend(m for m in page.messages if m.record_key == record_key and m.seq <= through_seq)
                if not page.has_more or not page.messages:
                    return kept
                after = page.messages[-1].position

        found = [m for thread in await _all([of_thread(t) for t in dict.fromkeys(thread_ids)]) for m in thread]
        return sorted(found, key=lambda stored: stored.seq)

    async def count_thread_messages(self, resource_id: str, thread_id: str) -> int:
        buckets = await self._thread_buckets(resource_id, thread_id)
        counts = await _all([self._run("count_bucket", (resource_id, thread_id, b)) for b in buckets])
        return sum(int(rows[0].count) for rows in counts if rows)

    # -- threads -------------------------------------------------------------------------------------------------

    @staticmethod
    def _summary(resource_id: str, row: Any) -> ThreadSummary | None:
        if row.updated_at is None:  # only a title was written: the thread has no message of this tenant
            return None
        created = row.created_at if row.created_at is not None else row.updated_at
        return ThreadSummary(row.thread_id, resource_id, row.title, created, row.updated_at)

    async def get_thread(self, resource_id: str, thread_id: str) -> ThreadSummary | None:
        rows = await self._run("thread", (resource_id, thread_id))
        return self._summary(resource_id, rows[0]) if rows else None

    async def list_threads(self, resource_id: str, *, offset: int = 0, limit: int = 20,
                           created_after: int | None = None, created_before: int | None = None) -> ThreadPage:
        # a tenant's threads are one partition, read whole and ordered here (Cassandra cannot order by a column
        # that changes); fine up to tens of thousands of threads per resource
        threads = [t for row in await self._run("threads", (resource_id,))
                   if (t := self._summary(resource_id, row)) is not None
                   and (created_after is None or t.created_at > created_after)
                   and (created_before is None or t.created_at < created_before)]
        threads.sort(key=lambda t: (-t.updated_at, t.thread_id))
        return ThreadPage(tuple(threads[offset:offset + limit]), len(threads) > offset + limit)

    async def put_thread_metadata(self, command: PersistThreadMetadata) -> None:
        from cassandra.query import UNSET_VALUE

        def value(text: str | None) -> Any:
            return text if text else UNSET_VALUE

        extracted = {slug: json.dumps(v, default=str) for slug, v in command.extracted_values.items()}
        working_memory = UNSET_VALUE if command.working_memory is None else json.dumps(command.working_memory,
                                                                                        default=str)
        writes = [self._run("thread_metadata", (
            self._ttl, command.resource_id, value(command.title), value(command.current_task),
            value(command.suggested_response), value(command.last_observed_message_id), extracted,
            working_memory, command.thread_id))]
        if command.title:
            writes.append(self._run("thread_title", (self._ttl, command.title, command.resource_id,
                                                     command.thread_id)))
        await _all(writes)

    async def get_thread_metadata(self, thread_id: str) -> ThreadMetadata:
        rows = await self._run("thread_metadata_row", (thread_id,))
        if not rows:
            return ThreadMetadata(thread_id)
        row = rows[0]
        extracted = {slug: json.loads(v) for slug, v in (row.extracted or {}).items()}
        return ThreadMetadata(thread_id, row.resource_id, row.title, row.current_task, row.suggested_response,
                              extracted, row.last_observed_message_id,
                              None if row.working_memory is None else json.loads(row.working_memory))

    # -- segments and generations --------------------------------------------------------------------------------

    async def _record(self, record_key: str) -> tuple[str | None, int]:
        rows = await self._run("record", (record_key,))
        if not rows:
            return None, 0
        resource, epoch = rows[0].resource_id, rows[0].epoch or 0
        if resource:
            self._record_resources[record_key] = resource
            _keep_recent(self._record_resources)
        return resource, epoch

    async def _epoch(self, record_key: str) -> int:
        # read every time, never cached: after a rebalance another worker may have cleared the record meanwhile
        return (await self._record(record_key))[1]

    async def _resource_of(self, segment: PersistSegment) -> str:
        known = self._record_resources.get(segment.record_key)
        if known:
            return known
        resource, _ = await self._record(segment.record_key)
        if resource:
            return resource
        rows = await self._run("message_by_id", (segment.first_message_id,))
        return str(rows[0].resource_id) if rows else ""

    async def put_segment(self, segment: PersistSegment) -> None:
        resource = await self._resource_of(segment)
        common = (segment.segment_id, segment.record_key, resource, segment.generation, segment.text,
                  segment.tokens, segment.cycle_id, list(segment.thread_ids), segment.first_message_id,
                  segment.last_message_id, list(segment.message_ids), segment.message_tokens, segment.boundary_at,
                  segment.created_at)
        if segment.kind == "observation":
            write = self._run("put_observation", (*common, ranges_to_json(segment.ranges), self._ttl))
        else:
            write = self._run("put_reflection", (*common, self._ttl))
        writes = [write, self._run("record_segment", (segment.record_key, segment.segment_id, segment.created_at,
                                                      self._ttl))]
        if segment.status == "active":
            writes.append(self._run("segment_active", (self._ttl, {segment.generation}, segment.segment_id)))
        await _all(writes)

    async def get_segment_texts(self, segment_ids: Sequence[str]) -> dict[str, str]:
        ids = list(dict.fromkeys(segment_ids))
        rows = await _all([self._run("segment", (i,)) for i in ids])
        return {i: r[0].text for i, r in zip(ids, rows, strict=True) if r and r[0].text is not None}

    async def activate_chunks(self, command: ActivateChunks) -> None:
        await _all([self._run("segment_active", (self._ttl, {command.generation}, chunk_id))
                    for chunk_id in command.chunk_ids])

    async def commit_generation(self, command: CommitGeneration) -> None:
        epoch = await self._epoch(command.record_key)
        rows = await self._run("commit_generation", (
            command.record_key, epoch, command.generation, list(command.segment_ids), command.reflection_id,
            list(command.replaced_segment_ids), command.observation_tokens, 0, self._ttl))
        outcome = rows[0] if rows else None
        # not applied: a generation already committed. A retry of our own write (the first attempt applied but
        # its answer was lost) finds our reflection there; anything else is another writer who won.
        if outcome is not None and not outcome.applied and outcome.reflection_id != command.reflection_id:
            log.warning("generation %d of %s was already committed by another reflection; %s is ignored",
                        command.generation, command.record_key, command.reflection_id)
            return
        replaced = list(dict.fromkeys(command.replaced_segment_ids))
        # the reflection's own ranges first: none when the engine commits it, those it had when it is imported (the
        # segments it condensed may have been purged since: they no longer say what it covered)
        own, *found = await _all([self._run("segment", (s,)) for s in [command.reflection_id, *replaced]])
        ranges = reflection_ranges(ranges_from_json(r[0].ranges) for r in [own, *found] if r)
        await self._run("reflection_ranges", (self._ttl, ranges_to_json(ranges), replaced, command.reflection_id))
        await _all([self._run("segment_active", (self._ttl, {command.generation}, s))
                    for s in command.segment_ids])

    async def clear(self, record_key: str, epoch: int) -> None:
        """Forget the record's observations (segments, groups, generations); the conversation's messages stay."""
        _, current = await self._record(record_key)
        if epoch <= current:
            return
        segment_ids = [row.segment_id for row in await self._run("record_segments", (record_key,))]
        await _all([self._run("delete_segment", (s,)) for s in segment_ids])
        await _all([self._run("delete_record_segments", (record_key,)),
                    self._run("delete_generations", (record_key, current))])
        await self._run("record_epoch", (epoch, epoch, record_key))  # the epoch is its own cell timestamp

    # -- groups --------------------------------------------------------------------------------------------------

    @staticmethod
    def _group(row: Any) -> ObservationGroup | None:
        if row.record_key is None or row.text is None:  # an activation that reached a deleted segment
            return None
        generations = row.generations or set()
        return ObservationGroup(
            group_id=row.segment_id, record_key=row.record_key, resource_id=row.resource_id or "",
            kind=cast(Literal["observation", "reflection"], row.kind),
            status="active" if generations else "buffered", generation=row.generation, text=row.text,
            tokens=row.tokens, thread_ids=tuple(row.thread_ids or ()), ranges=ranges_from_json(row.ranges),
            observed_at=row.boundary_at, created_at=row.created_at, replaced_group_ids=tuple(row.replaced or ()))

    async def get_groups(self, resource_id: str, group_ids: Sequence[str]) -> dict[str, ObservationGroup]:
        ids = list(dict.fromkeys(group_ids))
        rows = await _all([self._run("segment", (i,)) for i in ids])
        groups = [g for r in rows if r and (g := self._group(r[0])) is not None and g.resource_id == resource_id]
        return {g.group_id: g for g in groups}

    async def list_groups(self, record_key: str) -> list[ObservationGroup]:
        ids = [row.segment_id for row in await self._run("record_segments", (record_key,))]
        rows = await _all([self._run("segment", (i,)) for i in ids])
        groups = [g for r in rows if r and (g := self._group(r[0])) is not None]
        return sorted(groups, key=lambda g: (g.created_at, g.group_id))

    async def get_generation(self, record_key: str, generation: int) -> GenerationRecord | None:
        epoch = await self._epoch(record_key)
        rows = await self._run("generation", (record_key, epoch, generation))
        if not rows:
            return None
        row = rows[0]
        return GenerationRecord(record_key, generation, tuple(row.segment_ids or ()), row.reflection_id,
                                tuple(row.replaced_segment_ids or ()), row.observation_tokens)

    # -- CycleResults --------------------------------------------------------------------------------------------

    async def get_result(self, key: str) -> bytes | None:
        return await self._results.get_result(key)

    async def put_result(self, key: str, payload: bytes, *, record_key: str) -> None:
        await self._results.put_result(key, payload, record_key)

    async def drop_result(self, key: str) -> None:
        await self._results.drop_result(key)

    # -- ErasableStore (``erasure.py``) --------------------------------------------------------------------------

    async def erase_thread(self, resource_id: str, thread_id: str) -> ErasureCounts:
        counts = await self._erasure.erase_thread(resource_id, thread_id)
        self._forget_thread(resource_id, thread_id)
        return counts

    def _forget_thread(self, resource_id: str, thread_id: str) -> None:
        """What this process remembers of a thread: its cached messages, its buckets and message times."""
        for message_id in [i for i, (r, m) in self._cache.items() if r == resource_id and m.thread_id == thread_id]:
            del self._cache[message_id]
        self._buckets = {b for b in self._buckets if b[:2] != (resource_id, thread_id)}
        self._spans.pop((resource_id, thread_id), None)

    async def erase_record(self, record_key: str, resource_id: str) -> ErasureCounts:
        counts = await self._erasure.erase_record(record_key, resource_id)
        if self._record_resources.get(record_key) == resource_id:
            del self._record_resources[record_key]
        return counts

    async def erase_writes(self, writes: StrayWrites) -> ErasureCounts:
        counts, threads = await self._erasure.erase_writes(writes, await self._epoch(writes.record_key))
        for thread_id in threads:
            self._forget_thread(writes.resource_id, thread_id)
        return counts

    async def erase_resource(self, resource_id: str) -> ErasureCounts:
        threads = await self._erasure.thread_ids(resource_id)
        counts = ErasureCounts()
        for thread_id in threads:
            counts += await self.erase_thread(resource_id, thread_id)
        # a record is a thread (thread scope) or the resource itself (resource scope): each checks its tenant
        for record_key in dict.fromkeys([*threads, resource_id]):
            counts += await self.erase_record(record_key, resource_id)
        return counts

    async def resource_of(self, record_key: str) -> str | None:
        return await self._erasure.resource_of(record_key)

    async def holds(self, resource_id: str, thread_id: str | None = None) -> bool:
        return await self._erasure.holds(resource_id, thread_id)

    async def erasure_part(self, erase_id: str, part: int) -> PartRecord | None:
        return await self._erasure.erasure_part(erase_id, part)

    async def put_erasure_part(self, record: PartRecord, ttl_s: int) -> None:
        await self._erasure.put_erasure_part(record, ttl_s)

    async def mark_erased(self, record_digest: str, epoch_through: int, ttl_s: int) -> None:
        await self._erasure.mark_erased(record_digest, epoch_through, ttl_s)

    async def erased_through(self, record_digest: str) -> int | None:
        return await self._erasure.erased_through(record_digest)

    async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
        return await self._results.claim(key, owner, lease_s)

    # -- ExpiringStore (``retention.py``) ------------------------------------------------------------------------

    async def segment_texts_of(self, record_key: str, resource_id: str) -> list[SegmentText]:
        return await self._retention.segment_texts_of(record_key, resource_id)

    async def next_message_at(self, resource_id: str, thread_ids: Sequence[str], at_or_after: int) -> int | None:
        return await self._retention.next_message_at(resource_id, thread_ids, at_or_after)

    async def expire(self, command: ExpireStored) -> ExpiryCounts:
        counts, emptied = await self._retention.expire(command)
        threads = set(command.thread_ids)
        for message_id in [i for i, (r, m) in self._cache.items() if r == command.resource_id
                           and m.thread_id in threads and m.created_at_ms < command.before]:
            del self._cache[message_id]
        # buckets whose rows went must be written again by the next message into them
        self._buckets = {b for b in self._buckets if b[0] != command.resource_id or b[1] not in threads}
        for thread_id in emptied:
            self._spans.pop((command.resource_id, thread_id), None)
        return counts

    async def put_retention(self, command: PersistRetention) -> None:
        await self._retention.put_retention(command)

    async def retention_of(self, record_key: str) -> int | None:
        return await self._retention.retention_of(record_key)


async def _all(calls: Sequence[Any]) -> list[Any]:
    """Run store calls concurrently; the first failure is raised after every call has finished."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return list(results)
