"""The embedded content store: SQLite (stdlib), one file or ``:memory:``, the same behaviour as the Cassandra store.

Used by ``om-stream demo``, ``replay`` and the library. One connection (``sqlite_connection``): writes are
serialised, each store operation is one transaction, run on the caller's thread when it need not wait for a lock,
else on the connection's own thread (the event loop never waits on SQLite's locks). Inside ``batched_writes`` (the
host's phase 1 for a batch of inputs) a task's writes are held and committed together, one transaction per batch
(``sqlite_batch``).
File databases use WAL, so readers in other processes see committed data while the store writes.

The schema is created and upgraded by :meth:`SqliteContentStore.start` or on first use (``PRAGMA user_version``
counts the applied migrations): an embedded database belongs to the process that opens it, so there is no separate
migrate step.

Semantics shared with the other stores (``adapters/memory_store.py`` is the reference twin):

* every write is idempotent (ids are deterministic); a segment is written once (first writer wins), and so is a
  generation's log (``commit_generation``);
* ``clear`` forgets a record's observations (segments, groups, generations) and keeps its messages;
* a reflection's group keeps the ranges of every group it replaced (``core.recall.groups``);
* every recall read is keyed by the tenant (``resource_id``);
* model-call results and their leases (``ports.CycleResults``, ``sqlite_results``) share one table, each expiring
  on its own;
* an erase (``ports.ErasableStore``, ``sqlite_erasure``) and a retention purge (``ports.ExpiringStore``,
  ``sqlite_retention``) leave no copy of what they removed in the file: the connection runs with
  ``secure_delete`` on, and the file is rebuilt and its WAL truncated after each.

``sqlite3`` exceptions are translated into :class:`~om_stream.errors.StorageError` (``sqlite_connection``) and
never leave.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from om_stream.adapters import sqlite_erasure, sqlite_results, sqlite_retention
from om_stream.adapters.memory_store import RESULT_TTL_S, check_request
from om_stream.adapters.sqlite_batch import HeldWrites
from om_stream.adapters.sqlite_cache import ReadCache
from om_stream.adapters.sqlite_connection import SqliteConnection
from om_stream.adapters.sqlite_export import SqliteExports
from om_stream.adapters.sqlite_schema import MIGRATIONS
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
from om_stream.ports import (
    GenerationRecord,
    MessagePage,
    MessagePosition,
    ObservationGroup,
    StoredMessage,
    ThreadMetadata,
    ThreadPage,
    ThreadSummary,
)

__all__ = ["SqliteContentStore"]

log = logging.getLogger(__name__)
T = TypeVar("T")


_MAX_VARIABLES = 500  # stay well under SQLite's bound parameter limit in IN (...) lists
_CACHED_MESSAGES = 4096
_CACHED_TEXTS = 4096
_CACHED_THREADS = 1024


def _chunks(items: Sequence[str]) -> list[Sequence[str]]:
    return [items[i:i + _MAX_VARIABLES] for i in range(0, len(items), _MAX_VARIABLES)]


class SqliteContentStore(SqliteExports):
    """Content store on SQLite: ``SqliteContentStore(":memory:")`` or ``SqliteContentStore("memory.db")``."""

    def __init__(self, path: str | Path = ":memory:", *, timeout_s: float = 30.0,
                 result_ttl_s: float = RESULT_TTL_S) -> None:
        self._path = str(path)
        self._result_ttl = result_ttl_s
        self._db = SqliteConnection(self._path, timeout_s, MIGRATIONS)
        # the hot reads, kept in process (``sqlite_cache``): messages by (resource, id), segment texts by id,
        # thread metadata rows by thread id
        self._messages: ReadCache[tuple[str, str], Message] = ReadCache(_CACHED_MESSAGES)
        self._texts: ReadCache[str, str] = ReadCache(_CACHED_TEXTS)
        self._threads: ReadCache[str, tuple[Any, ...]] = ReadCache(_CACHED_THREADS)
        # the writes held by ``batched_writes`` in the current task (``sqlite_batch``)
        self._held = HeldWrites(self._db, str(id(self)))

    def __repr__(self) -> str:
        return f"SqliteContentStore({self._path!r})"

    async def _run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T:
        await self._held.commit()  # what this task wrote before sees it
        return await self._db.run(fn, write=write)

    async def _write(self, fn: Callable[[sqlite3.Connection], T], then: Callable[[T], None] | None = None) -> None:
        """A content write, ``then`` told its result once it is committed: now, or held by ``batched_writes``."""
        await self._held.write(fn, then)

    def batched_writes(self) -> AbstractAsyncContextManager[None]:
        """``ports.BatchedWrites``: this task's content writes in the block, one transaction when it ends. If the
        block raises, the writes it holds are dropped. Nested, the outermost block commits."""
        return self._held.block()

    async def start(self) -> None:
        """Open the database and create or upgrade its schema now (otherwise the first operation does)."""
        await self._run(lambda conn: None)

    async def close(self) -> None:
        await self._db.close()

    # -- ContentStore --------------------------------------------------------------------------------------------

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None:
        body = message.model_dump_json()
        created = message.created_at_ms

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO messages (resource_id, message_id, thread_id, record_key, created_at, seq, role, tokens,"
                " body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (resource_id, message_id) DO UPDATE SET"
                " thread_id = excluded.thread_id, record_key = excluded.record_key, created_at = excluded.created_at,"
                " seq = excluded.seq, role = excluded.role, tokens = excluded.tokens, body = excluded.body",
                (message.resource_id, message.message_id, message.thread_id, record_key, created, seq,
                 message.role, tokens, body))
            conn.execute(
                "INSERT INTO resource_threads (resource_id, thread_id, created_at, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (resource_id, thread_id) DO UPDATE SET"
                " created_at = min(created_at, excluded.created_at), updated_at = max(updated_at, excluded.updated_at)",
                (message.resource_id, message.thread_id, created, created))
            conn.execute(
                "INSERT INTO records (record_key, resource_id) VALUES (?, ?) ON CONFLICT (record_key) DO UPDATE SET"
                " resource_id = CASE WHEN records.resource_id = '' THEN excluded.resource_id"
                " ELSE records.resource_id END", (record_key, message.resource_id))

        key = (message.resource_id, message.message_id)
        self._messages.discard(key)
        await self._write(write, lambda _: self._messages.put(key, message))

    async def get_messages(self, message_ids: Sequence[str], *, resource_id: str | None = None) -> list[Message]:
        """The messages in the order asked; ids not found are left out. ``resource_id`` restricts to a tenant."""
        await self._held.commit()  # as every read: the cache holds committed rows only
        cached: dict[str, Message] = {}
        if resource_id is not None:  # without a tenant, the stored row of the first resource answers
            for message_id in message_ids:
                hit = self._messages.get((resource_id, message_id))
                if hit is not None:
                    cached[message_id] = hit
        ids = [i for i in dict.fromkeys(message_ids) if i not in cached]
        if not ids:
            return [cached[i] for i in message_ids]

        def read(conn: sqlite3.Connection) -> dict[str, str]:
            found: dict[str, str] = {}
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT message_id, body FROM messages WHERE message_id IN ({marks})"
                params: list[str] = list(chunk)
                if resource_id is not None:
                    sql += " AND resource_id = ?"
                    params.append(resource_id)
                for message_id, body in conn.execute(sql + " ORDER BY resource_id", params):
                    found.setdefault(message_id, body)
            return found

        bodies = await self._run(read)
        for message_id, body in bodies.items():
            cached[message_id] = found = Message.model_validate_json(body)
            if resource_id is not None:
                self._messages.put((resource_id, message_id), found)
        return [cached[i] for i in message_ids if i in cached]

    async def get_record_messages(self, record_key: str, *, resource_id: str, thread_ids: Sequence[str],
                                  through_seq: int) -> list[StoredMessage]:
        threads = list(dict.fromkeys(thread_ids))

        def read(conn: sqlite3.Connection) -> list[StoredMessage]:
            found: list[StoredMessage] = []
            for chunk in _chunks(threads):
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(f"SELECT record_key, seq, tokens, body FROM messages WHERE resource_id = ? AND"
                                    f" thread_id IN ({marks}) AND record_key = ? AND seq <= ?",
                                    [resource_id, *chunk, record_key, through_seq]).fetchall()
                found.extend(self._stored(row) for row in rows)
            return sorted(found, key=lambda stored: stored.seq)

        return await self._run(read)

    async def put_segment(self, segment: PersistSegment) -> None:
        def write(conn: sqlite3.Connection) -> bool:
            if conn.execute("SELECT 1 FROM segments WHERE segment_id = ?", (segment.segment_id,)).fetchone():
                return False  # first writer wins: a replay never rewrites a segment
            resource_id = self._resource_of(conn, segment.record_key, segment.first_message_id)
            generations = [segment.generation] if segment.status == "active" else []
            conn.execute(
                "INSERT INTO segments (segment_id, record_key, resource_id, kind, status, generation, text, tokens,"
                " cycle_id, thread_ids, first_message_id, last_message_id, message_ids, message_tokens,"
                " boundary_at, created_at, generations, ranges, replaced)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (segment.segment_id, segment.record_key, resource_id, segment.kind, segment.status,
                 segment.generation, segment.text, segment.tokens, segment.cycle_id, json.dumps(segment.thread_ids),
                 segment.first_message_id, segment.last_message_id, json.dumps(segment.message_ids),
                 segment.message_tokens, segment.boundary_at, segment.created_at, json.dumps(generations),
                 ranges_to_json(segment.ranges), "[]"))
            return True

        def written(inserted: bool) -> None:
            if inserted:
                self._texts.put(segment.segment_id, segment.text)

        await self._write(write, written)

    @staticmethod
    def _resource_of(conn: sqlite3.Connection, record_key: str, message_id: str) -> str:
        row = conn.execute("SELECT resource_id FROM records WHERE record_key = ?", (record_key,)).fetchone()
        if row and row[0]:
            return str(row[0])
        row = conn.execute("SELECT resource_id FROM messages WHERE message_id = ? ORDER BY resource_id",
                           (message_id,)).fetchone()
        return str(row[0]) if row else ""

    async def get_segment_texts(self, segment_ids: Sequence[str]) -> dict[str, str]:
        await self._held.commit()
        cached = {i: text for i in segment_ids if (text := self._texts.get(i)) is not None}
        ids = [i for i in dict.fromkeys(segment_ids) if i not in cached]
        if not ids:
            return cached

        def read(conn: sqlite3.Connection) -> dict[str, str]:
            texts: dict[str, str] = {}
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                texts.update(conn.execute(
                    f"SELECT segment_id, text FROM segments WHERE segment_id IN ({marks})", list(chunk)).fetchall())
            return texts

        found = await self._run(read)
        for segment_id, text in found.items():
            self._texts.put(segment_id, text)
        return {**cached, **found}

    @staticmethod
    def _activate(conn: sqlite3.Connection, segment_id: str, generation: int) -> None:
        row = conn.execute("SELECT generations FROM segments WHERE segment_id = ?", (segment_id,)).fetchone()
        if row is None:
            return
        generations = sorted(set(json.loads(row[0])) | {generation})
        conn.execute("UPDATE segments SET status = 'active', generations = ? WHERE segment_id = ?",
                     (json.dumps(generations), segment_id))

    async def activate_chunks(self, command: ActivateChunks) -> None:
        def write(conn: sqlite3.Connection) -> None:
            for chunk_id in command.chunk_ids:
                self._activate(conn, chunk_id, command.generation)

        await self._write(write)

    async def commit_generation(self, command: CommitGeneration) -> None:
        def write(conn: sqlite3.Connection) -> None:
            inserted = conn.execute(
                "INSERT INTO generations (record_key, generation, segment_ids, reflection_id, replaced_segment_ids,"
                " observation_tokens) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (record_key, generation) DO NOTHING",
                (command.record_key, command.generation, json.dumps(command.segment_ids), command.reflection_id,
                 json.dumps(command.replaced_segment_ids), command.observation_tokens)).rowcount
            if not inserted:
                row = conn.execute("SELECT reflection_id FROM generations WHERE record_key = ? AND generation = ?",
                                   (command.record_key, command.generation)).fetchone()
                if row is None or row[0] != command.reflection_id:
                    log.warning("generation %d of %s was already committed by another reflection; %s is ignored",
                                command.generation, command.record_key, command.reflection_id)
                    return
            replaced = dict.fromkeys(command.replaced_segment_ids)
            stored = {r[0]: ranges_from_json(r[1]) for r in conn.execute(
                f"SELECT segment_id, ranges FROM segments WHERE segment_id IN ({','.join('?' * len(replaced))})",
                list(replaced))} if replaced else {}
            # the reflection's own ranges first: none when the engine commits it, those it had when it is imported
            # (the segments it condensed may have been purged since: they no longer say what it covered)
            own = conn.execute("SELECT ranges FROM segments WHERE segment_id = ?", (command.reflection_id,)).fetchone()
            ranges = reflection_ranges([ranges_from_json(own[0]) if own else (),
                                        *(stored[s] for s in replaced if s in stored)])
            conn.execute("UPDATE segments SET ranges = ?, replaced = ? WHERE segment_id = ?",
                         (ranges_to_json(ranges), json.dumps(list(replaced)), command.reflection_id))
            for segment_id in command.segment_ids:
                self._activate(conn, segment_id, command.generation)

        await self._write(write)

    async def put_thread_metadata(self, command: PersistThreadMetadata) -> None:
        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT extracted FROM threads WHERE thread_id = ?", (command.thread_id,)).fetchone()
            extracted = {**(json.loads(row[0]) if row else {}), **command.extracted_values}
            conn.execute(
                "INSERT INTO threads (thread_id, resource_id, title, current_task, suggested_response, extracted,"
                " last_observed_message_id, working_memory) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (thread_id) DO UPDATE SET"
                " resource_id = excluded.resource_id, title = coalesce(excluded.title, threads.title),"
                " current_task = coalesce(excluded.current_task, threads.current_task),"
                " suggested_response = coalesce(excluded.suggested_response, threads.suggested_response),"
                " extracted = excluded.extracted, last_observed_message_id = coalesce("
                " excluded.last_observed_message_id, threads.last_observed_message_id),"
                " working_memory = coalesce(excluded.working_memory, threads.working_memory)",
                (command.thread_id, command.resource_id, command.title or None, command.current_task or None,
                 command.suggested_response or None, json.dumps(extracted, default=str),
                 command.last_observed_message_id or None,
                 None if command.working_memory is None else json.dumps(command.working_memory, default=str)))

        await self._write(write, lambda _: self._threads.discard(command.thread_id))

    async def get_thread_metadata(self, thread_id: str) -> ThreadMetadata:
        def read(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            row: tuple[Any, ...] | None = conn.execute(
                "SELECT resource_id, title, current_task, suggested_response, extracted, last_observed_message_id,"
                " working_memory FROM threads WHERE thread_id = ?", (thread_id,)).fetchone()
            return row

        # the row is cached, not the metadata: each caller gets its own (mutable) values, parsed from the row
        await self._held.commit()
        row = self._threads.get(thread_id)
        if row is None:
            row = await self._run(read)
            if row is None:
                return ThreadMetadata(thread_id)
            self._threads.put(thread_id, row)
        return ThreadMetadata(thread_id, row[0], row[1], row[2], row[3], json.loads(row[4]), row[5],
                              None if row[6] is None else json.loads(row[6]))

    async def clear(self, record_key: str, epoch: int) -> None:
        """Forget the record's observations (segments, groups, generations); the conversation's messages stay."""

        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT epoch FROM records WHERE record_key = ?", (record_key,)).fetchone()
            if row is not None and epoch <= row[0]:
                return
            conn.execute("DELETE FROM segments WHERE record_key = ?", (record_key,))
            conn.execute("DELETE FROM generations WHERE record_key = ?", (record_key,))
            conn.execute("INSERT INTO records (record_key, resource_id, epoch) VALUES (?, '', ?)"
                         " ON CONFLICT (record_key) DO UPDATE SET epoch = excluded.epoch", (record_key, epoch))

        await self._write(write, lambda _: self._texts.clear())  # the record's segments are gone (ids unknown)

    # -- MessageQueries ------------------------------------------------------------------------------------------

    @staticmethod
    def _stored(row: sqlite3.Row | tuple[Any, ...]) -> StoredMessage:
        record_key, seq, tokens, body = row
        return StoredMessage(Message.model_validate_json(body), record_key, seq, tokens)

    async def get_message(self, resource_id: str, message_id: str) -> StoredMessage | None:
        def read(conn: sqlite3.Connection) -> StoredMessage | None:
            row = conn.execute("SELECT record_key, seq, tokens, body FROM messages WHERE resource_id = ? AND"
                               " message_id = ?", (resource_id, message_id)).fetchone()
            return self._stored(row) if row else None

        return await self._run(read)

    async def list_thread_messages(self, resource_id: str, thread_id: str, *, limit: int,
                                   after: MessagePosition | None = None, before: MessagePosition | None = None,
                                   newest_first: bool = False) -> MessagePage:
        sql = ["SELECT record_key, seq, tokens, body FROM messages WHERE resource_id = ? AND thread_id = ?"]
        params: list[Any] = [resource_id, thread_id]
        if after is not None:
            sql.append("AND (created_at, seq, message_id) > (?, ?, ?)")
            params += [after.created_at, after.seq, after.message_id]
        if before is not None:
            sql.append("AND (created_at, seq, message_id) < (?, ?, ?)")
            params += [before.created_at, before.seq, before.message_id]
        order = "DESC" if newest_first else "ASC"
        sql.append(f"ORDER BY created_at {order}, seq {order}, message_id {order} LIMIT ?")
        params.append(limit + 1)
        query = " ".join(sql)

        def read(conn: sqlite3.Connection) -> MessagePage:
            rows = conn.execute(query, params).fetchall()
            return MessagePage(tuple(self._stored(r) for r in rows[:limit]), len(rows) > limit)

        return await self._run(read)

    async def count_thread_messages(self, resource_id: str, thread_id: str) -> int:
        def read(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT count(*) FROM messages WHERE resource_id = ? AND thread_id = ?",
                               (resource_id, thread_id)).fetchone()
            return int(row[0])

        return await self._run(read)

    # -- ThreadQueries -------------------------------------------------------------------------------------------

    _THREAD_SELECT = ("SELECT rt.thread_id, rt.resource_id, t.title, rt.created_at, rt.updated_at"
                      " FROM resource_threads rt LEFT JOIN threads t"
                      " ON t.thread_id = rt.thread_id AND t.resource_id = rt.resource_id")

    async def get_thread(self, resource_id: str, thread_id: str) -> ThreadSummary | None:
        def read(conn: sqlite3.Connection) -> ThreadSummary | None:
            row = conn.execute(f"{self._THREAD_SELECT} WHERE rt.resource_id = ? AND rt.thread_id = ?",
                               (resource_id, thread_id)).fetchone()
            return ThreadSummary(*row) if row else None

        return await self._run(read)

    async def list_threads(self, resource_id: str, *, offset: int = 0, limit: int = 20,
                           created_after: int | None = None, created_before: int | None = None) -> ThreadPage:
        sql = [f"{self._THREAD_SELECT} WHERE rt.resource_id = ?"]
        params: list[Any] = [resource_id]
        if created_after is not None:
            sql.append("AND rt.created_at > ?")
            params.append(created_after)
        if created_before is not None:
            sql.append("AND rt.created_at < ?")
            params.append(created_before)
        sql.append("ORDER BY rt.updated_at DESC, rt.thread_id LIMIT ? OFFSET ?")
        params += [limit + 1, offset]
        query = " ".join(sql)

        def read(conn: sqlite3.Connection) -> ThreadPage:
            rows = conn.execute(query, params).fetchall()
            return ThreadPage(tuple(ThreadSummary(*r) for r in rows[:limit]), len(rows) > limit)

        return await self._run(read)

    # -- GroupQueries --------------------------------------------------------------------------------------------

    _GROUP_SELECT = ("SELECT segment_id, record_key, resource_id, kind, status, generation, text, tokens, thread_ids,"
                     " ranges, boundary_at, created_at, replaced FROM segments")

    @staticmethod
    def _group(row: tuple[Any, ...]) -> ObservationGroup:
        (segment_id, record_key, resource_id, kind, status, generation, text, tokens, thread_ids, ranges,
         boundary_at, created_at, replaced) = row
        return ObservationGroup(
            group_id=segment_id, record_key=record_key, resource_id=resource_id,
            kind=cast(Literal["observation", "reflection"], kind),
            status=cast(Literal["buffered", "active"], status), generation=generation, text=text, tokens=tokens,
            thread_ids=tuple(json.loads(thread_ids)), ranges=ranges_from_json(ranges), observed_at=boundary_at,
            created_at=created_at, replaced_group_ids=tuple(json.loads(replaced)))

    async def get_groups(self, resource_id: str, group_ids: Sequence[str]) -> dict[str, ObservationGroup]:
        ids = list(dict.fromkeys(group_ids))

        def read(conn: sqlite3.Connection) -> dict[str, ObservationGroup]:
            groups: dict[str, ObservationGroup] = {}
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(f"{self._GROUP_SELECT} WHERE resource_id = ? AND segment_id IN ({marks})",
                                        [resource_id, *chunk]):
                    group = self._group(row)
                    groups[group.group_id] = group
            return groups

        return await self._run(read)

    async def list_groups(self, record_key: str) -> list[ObservationGroup]:
        def read(conn: sqlite3.Connection) -> list[ObservationGroup]:
            rows = conn.execute(f"{self._GROUP_SELECT} WHERE record_key = ? ORDER BY created_at, segment_id",
                                (record_key,)).fetchall()
            return [self._group(r) for r in rows]

        return await self._run(read)

    async def get_generation(self, record_key: str, generation: int) -> GenerationRecord | None:
        def read(conn: sqlite3.Connection) -> GenerationRecord | None:
            row = conn.execute("SELECT segment_ids, reflection_id, replaced_segment_ids, observation_tokens"
                               " FROM generations WHERE record_key = ? AND generation = ?",
                               (record_key, generation)).fetchone()
            if row is None:
                return None
            return GenerationRecord(record_key, generation, tuple(json.loads(row[0])), row[1],
                                    tuple(json.loads(row[2])), row[3])

        return await self._run(read)

    # -- CycleResults (``sqlite_results``) -------------------------------------------------------------------------

    async def get_result(self, key: str) -> bytes | None:
        check_request(key)
        return await self._run(lambda conn: sqlite_results.get_result(conn, key))

    async def put_result(self, key: str, payload: bytes, *, record_key: str) -> None:
        check_request(key)
        data = bytes(payload)
        await self._run(lambda conn: sqlite_results.put_result(conn, key, data, record_key, self._result_ttl),
                        write=True)

    async def drop_result(self, key: str) -> None:
        """A result written after its record was erased: removed, and the WAL scrubbed as after an erase."""
        check_request(key)
        await self._run(lambda conn: sqlite_results.drop_result(conn, key), write=True)
        await self._db.scrub()

    async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
        check_request(key, lease_s)
        return await self._run(lambda conn: sqlite_results.claim(conn, key, owner, lease_s), write=True)

    # -- ErasableStore (``sqlite_erasure``) ------------------------------------------------------------------------

    async def _erase(self, fn: Callable[[sqlite3.Connection], ErasureCounts]) -> ErasureCounts:
        counts = await self._run(fn, write=True)
        # what the caches hold of it: the caches are small, and an erase is rare
        self._messages.clear()
        self._texts.clear()
        self._threads.clear()
        await self._db.scrub()
        return counts

    async def erase_thread(self, resource_id: str, thread_id: str) -> ErasureCounts:
        return await self._erase(lambda conn: sqlite_erasure.erase_thread(conn, resource_id, thread_id))

    async def erase_record(self, record_key: str, resource_id: str) -> ErasureCounts:
        return await self._erase(lambda conn: sqlite_erasure.erase_record(conn, record_key, resource_id))

    async def erase_resource(self, resource_id: str) -> ErasureCounts:
        return await self._erase(lambda conn: sqlite_erasure.erase_resource(conn, resource_id))

    async def erase_writes(self, writes: StrayWrites) -> ErasureCounts:
        return await self._erase(lambda conn: sqlite_erasure.erase_writes(conn, writes))

    async def resource_of(self, record_key: str) -> str | None:
        return await self._run(lambda conn: sqlite_erasure.resource_of(conn, record_key))

    async def holds(self, resource_id: str, thread_id: str | None = None) -> bool:
        return await self._run(lambda conn: sqlite_erasure.holds(conn, resource_id, thread_id))

    async def erasure_part(self, erase_id: str, part: int) -> PartRecord | None:
        return await self._run(lambda conn: sqlite_erasure.erasure_part(conn, erase_id, part))

    async def put_erasure_part(self, record: PartRecord, ttl_s: int) -> None:
        await self._run(lambda conn: sqlite_erasure.put_erasure_part(conn, record, ttl_s), write=True)

    async def mark_erased(self, record_digest: str, epoch_through: int, ttl_s: int) -> None:
        await self._run(lambda conn: sqlite_erasure.mark_erased(conn, record_digest, epoch_through, ttl_s),
                        write=True)

    async def erased_through(self, record_digest: str) -> int | None:
        return await self._run(lambda conn: sqlite_erasure.erased_through(conn, record_digest))

    # -- ExpiringStore (``sqlite_retention``) ----------------------------------------------------------------------

    async def segment_texts_of(self, record_key: str, resource_id: str) -> list[SegmentText]:
        return await self._run(lambda conn: sqlite_retention.segment_texts_of(conn, record_key, resource_id))

    async def next_message_at(self, resource_id: str, thread_ids: Sequence[str], at_or_after: int) -> int | None:
        return await self._run(lambda conn: sqlite_retention.next_message_at(conn, resource_id, thread_ids,
                                                                             at_or_after))

    async def expire(self, command: ExpireStored) -> ExpiryCounts:
        counts = await self._run(lambda conn: sqlite_retention.expire(conn, command), write=True)
        self._messages.clear()  # what the caches hold of it, as after an erase (``_erase``)
        self._texts.clear()
        self._threads.clear()
        if counts != ExpiryCounts():
            await self._db.scrub()
        return counts

    async def put_retention(self, command: PersistRetention) -> None:
        await self._write(lambda conn: sqlite_retention.put_retention(conn, command))

    async def retention_of(self, record_key: str) -> int | None:
        return await self._run(lambda conn: sqlite_retention.retention_of(conn, record_key))
