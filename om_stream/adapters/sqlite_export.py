"""``ports.ExportSource`` for the SQLite store (a base of :class:`~om_stream.adapters.sqlite_store.
SqliteContentStore`): what it holds of one resource, read a page at a time.

Keyset pagination on the store's own indexes: messages by ``(resource, thread, created_at, seq, id)``
(``messages_by_thread``), segments by ``(record, created_at, id)`` (``segments_by_record``). Each page is one
short read of its own, so an export of a long conversation holds one page in memory and never keeps the database
from the writers (file databases use WAL: the readers of other processes are not blocked either).

Never holds the store's writes; ``sqlite3`` exceptions are translated by the store's connection.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal, Protocol, TypeVar, cast

from om_stream.core.export_rows import ExportedMessage, ExportedSegment, ExportedThread
from om_stream.core.recall.groups import ranges_from_json
from om_stream.core.recall.records import GenerationRecord

__all__ = ["MESSAGE_PAGE", "SEGMENT_PAGE", "SqliteExports"]

T = TypeVar("T")
MESSAGE_PAGE = 500  # rows per read: a page of long tool results stays a few MB
SEGMENT_PAGE = 100
_THREAD_PAGE = 500


class _Reads(Protocol):
    async def _run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool = False) -> T: ...


class SqliteExports:
    """The export reads of the SQLite store, on the store's connection (``_run``)."""

    async def resource_threads(self: _Reads, resource_id: str) -> AsyncIterator[ExportedThread]:
        after = ""
        while True:
            def read(conn: sqlite3.Connection, after: str = after) -> list[Any]:
                return conn.execute(
                    "SELECT rt.thread_id, rt.created_at, rt.updated_at, t.title, t.current_task,"
                    " t.suggested_response, t.extracted, t.last_observed_message_id, t.working_memory"
                    " FROM resource_threads rt LEFT JOIN threads t"
                    " ON t.thread_id = rt.thread_id AND t.resource_id = rt.resource_id"
                    " WHERE rt.resource_id = ? AND rt.thread_id > ? ORDER BY rt.thread_id LIMIT ?",
                    (resource_id, after, _THREAD_PAGE)).fetchall()

            rows = await self._run(read)
            for (thread_id, created, updated, title, task, response, extracted, observed, memory) in rows:
                yield ExportedThread(thread_id, created, updated, title, task, response,
                                     json.loads(extracted) if extracted else {}, observed,
                                     None if memory is None else json.loads(memory))
            if len(rows) < _THREAD_PAGE:
                return
            after = rows[-1][0]

    async def resource_messages(self: _Reads, resource_id: str) -> AsyncIterator[ExportedMessage]:
        position: tuple[str, int, int, str] | None = None
        while True:
            def read(conn: sqlite3.Connection, position: tuple[str, int, int, str] | None = position) -> list[Any]:
                columns = ("SELECT thread_id, created_at, seq, message_id, record_key, tokens, body FROM messages"
                           " WHERE resource_id = ?")
                order = " ORDER BY thread_id, created_at, seq, message_id LIMIT ?"
                if position is None:
                    return conn.execute(columns + order, (resource_id, MESSAGE_PAGE)).fetchall()
                return conn.execute(columns + " AND (thread_id, created_at, seq, message_id) > (?, ?, ?, ?)" + order,
                                    (resource_id, *position, MESSAGE_PAGE)).fetchall()

            rows = await self._run(read)
            for _, created_at, seq, _, record_key, tokens, body in rows:
                yield ExportedMessage(record_key, seq, tokens, body, int(created_at))
            if len(rows) < MESSAGE_PAGE:
                return
            thread_id, created, seq, message_id = rows[-1][:4]
            position = (thread_id, created, seq, message_id)

    async def record_epoch(self: _Reads, record_key: str) -> int:
        def read(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT epoch FROM records WHERE record_key = ?", (record_key,)).fetchone()
            return int(row[0]) if row else 0

        return await self._run(read)

    async def record_segments(self: _Reads, record_key: str) -> AsyncIterator[ExportedSegment]:
        position: tuple[int, str] | None = None
        while True:
            def read(conn: sqlite3.Connection, position: tuple[int, str] | None = position) -> list[Any]:
                columns = ("SELECT segment_id, kind, generation, text, tokens, cycle_id, thread_ids, first_message_id,"
                           " last_message_id, message_ids, message_tokens, boundary_at, created_at, generations,"
                           " ranges, replaced FROM segments WHERE record_key = ?")
                order = " ORDER BY created_at, segment_id LIMIT ?"
                if position is None:
                    return conn.execute(columns + order, (record_key, SEGMENT_PAGE)).fetchall()
                return conn.execute(columns + " AND (created_at, segment_id) > (?, ?)" + order,
                                    (record_key, *position, SEGMENT_PAGE)).fetchall()

            rows = await self._run(read)
            for row in rows:
                yield _segment(record_key, row)
            if len(rows) < SEGMENT_PAGE:
                return
            position = (rows[-1][12], rows[-1][0])

    async def record_generations(self: _Reads, record_key: str) -> list[GenerationRecord]:
        def read(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute("SELECT generation, segment_ids, reflection_id, replaced_segment_ids,"
                                " observation_tokens FROM generations WHERE record_key = ? ORDER BY generation",
                                (record_key,)).fetchall()

        return [GenerationRecord(record_key, generation, tuple(json.loads(ids)), reflection,
                                 tuple(json.loads(replaced)), tokens)
                for generation, ids, reflection, replaced, tokens in await self._run(read)]


def _segment(record_key: str, row: Any) -> ExportedSegment:
    (segment_id, kind, generation, text, tokens, cycle_id, thread_ids, first, last, message_ids, message_tokens,
     boundary_at, created_at, generations, ranges, replaced) = row
    return ExportedSegment(
        record_key=record_key, segment_id=segment_id, kind=cast(Literal["observation", "reflection"], kind),
        generation=generation, text=text, tokens=tokens, cycle_id=cycle_id, thread_ids=tuple(json.loads(thread_ids)),
        first_message_id=first, last_message_id=last, message_ids=tuple(json.loads(message_ids)),
        message_tokens=message_tokens, boundary_at=boundary_at, created_at=created_at,
        generations=tuple(sorted(json.loads(generations))), ranges=ranges_from_json(ranges),
        replaced=tuple(json.loads(replaced)))
