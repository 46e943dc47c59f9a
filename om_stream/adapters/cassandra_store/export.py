"""``ports.ExportSource`` for the Cassandra store (a base of :class:`~om_stream.adapters.cassandra_store.store.
CassandraContentStore`): what it holds of one resource, read partition by partition, a page at a time.

Every table the export reads is partitioned by something the export knows, so nothing scans the token ring:

* the resource's threads: its ``resource_threads`` partition, paged by thread id (the clustering key);
* a thread's messages: its ``message_buckets`` row lists its 10-day buckets, and each bucket's ``messages``
  partition is paged by its clustering key ``(created_at, seq, message_id)``;
* a record's segments: its ``record_segments`` partition, paged by segment id, each page's segments read by key;
* a record's generations and epoch: one partition, one row.

Each page is one query with ``LIMIT``, so an export holds a page of rows at a time (a message page and the one read
ahead) whatever the conversation's length. The statements are prepared once per store, on first use.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, Protocol, cast

from om_stream.adapters.cassandra_store.session import CassandraSession
from om_stream.core.export_rows import ExportedMessage, ExportedSegment, ExportedThread
from om_stream.core.recall.groups import ranges_from_json
from om_stream.core.recall.records import GenerationRecord

__all__ = ["MESSAGE_PAGE", "CassandraExports"]

MESSAGE_PAGE = 500
_THREAD_PAGE = 500
_SEGMENT_PAGE = 100

_STATEMENTS: dict[str, str] = {
    "threads": ("SELECT thread_id, created_at, updated_at, title FROM resource_threads"
                " WHERE resource_id = ? AND thread_id > ? LIMIT ?"),
    "thread_metadata": ("SELECT resource_id, title, current_task, suggested_response, extracted,"
                        " last_observed_message_id, working_memory FROM threads WHERE thread_id = ?"),
    "buckets": "SELECT bucket FROM message_buckets WHERE resource_id = ? AND thread_id = ?",
    "first_messages": ("SELECT created_at, seq, message_id, record_key, tokens, body FROM messages"
                       " WHERE resource_id = ? AND thread_id = ? AND bucket = ? LIMIT ?"),
    "next_messages": ("SELECT created_at, seq, message_id, record_key, tokens, body FROM messages"
                      " WHERE resource_id = ? AND thread_id = ? AND bucket = ?"
                      " AND (created_at, seq, message_id) > (?, ?, ?) LIMIT ?"),
    "epoch": "SELECT epoch FROM records WHERE record_key = ?",
    "segment_ids": "SELECT segment_id FROM record_segments WHERE record_key = ? AND segment_id > ? LIMIT ?",
    "segment": ("SELECT segment_id, record_key, kind, generation, text, tokens, cycle_id, thread_ids,"
                " first_message_id, last_message_id, message_ids, message_tokens, boundary_at, created_at,"
                " generations, ranges, replaced FROM segments WHERE segment_id = ?"),
    "generations": ("SELECT generation, segment_ids, reflection_id, replaced_segment_ids, observation_tokens"
                    " FROM generations WHERE record_key = ? AND epoch = ?"),
}


class _Connected(Protocol):
    _export_statements: dict[str, Any] | None

    async def _ready(self) -> CassandraSession: ...


class CassandraExports:
    """The export reads of the Cassandra store, on the store's session (``_ready``)."""

    _export_statements: dict[str, Any] | None = None  # prepared on first use

    async def resource_threads(self: _Connected, resource_id: str) -> AsyncIterator[ExportedThread]:
        async for row in _thread_rows(self, resource_id):
            found = await _query(self, "thread_metadata", (row.thread_id,))
            meta = found[0] if found and found[0].resource_id == resource_id else None
            created = row.created_at if row.created_at is not None else row.updated_at
            if meta is None:
                yield ExportedThread(row.thread_id, created, row.updated_at, row.title)
                continue
            yield ExportedThread(
                row.thread_id, created, row.updated_at, meta.title, meta.current_task, meta.suggested_response,
                {slug: json.loads(value) for slug, value in (meta.extracted or {}).items()},
                meta.last_observed_message_id, None if meta.working_memory is None else json.loads(meta.working_memory))

    async def resource_messages(self: _Connected, resource_id: str) -> AsyncIterator[ExportedMessage]:
        async for thread in _thread_rows(self, resource_id):
            buckets = sorted(row.bucket for row in await _query(self, "buckets", (resource_id, thread.thread_id)))
            for bucket in buckets:
                async for row in _bucket_rows(self, resource_id, thread.thread_id, bucket):
                    yield ExportedMessage(row.record_key, row.seq, row.tokens, row.body, int(row.created_at))

    async def record_epoch(self: _Connected, record_key: str) -> int:
        return await _epoch(self, record_key)

    async def record_segments(self: _Connected, record_key: str) -> AsyncIterator[ExportedSegment]:
        after = ""
        while True:
            ids = [row.segment_id for row in await _query(self, "segment_ids", (record_key, after, _SEGMENT_PAGE))]
            for segment_id in ids:
                found = await _query(self, "segment", (segment_id,))
                # an activation that reached a segment a clear deleted leaves a row with no record or text
                if found and found[0].record_key == record_key and found[0].text is not None:
                    yield _segment(found[0])
            if len(ids) < _SEGMENT_PAGE:
                return
            after = ids[-1]

    async def record_generations(self: _Connected, record_key: str) -> list[GenerationRecord]:
        rows = await _query(self, "generations", (record_key, await _epoch(self, record_key)))
        return sorted((GenerationRecord(record_key, row.generation, tuple(row.segment_ids or ()), row.reflection_id,
                                        tuple(row.replaced_segment_ids or ()), row.observation_tokens)
                       for row in rows), key=lambda g: g.generation)


async def _query(store: _Connected, name: str, params: Sequence[Any]) -> list[Any]:
    session = await store._ready()
    if store._export_statements is None:
        store._export_statements = {key: await session.prepare(cql) for key, cql in _STATEMENTS.items()}
    return await session.execute(store._export_statements[name], params, what=f"export: {name}")


async def _epoch(store: _Connected, record_key: str) -> int:
    rows = await _query(store, "epoch", (record_key,))
    return int(rows[0].epoch or 0) if rows else 0


async def _bucket_rows(store: _Connected, resource_id: str, thread_id: str, bucket: int) -> AsyncIterator[Any]:
    """A bucket's messages, a page at a time; the next page is read while this one is handed on (two pages held
    at most), so the node's time and the export's overlap."""
    rows = await _query(store, "first_messages", (resource_id, thread_id, bucket, MESSAGE_PAGE))
    while True:
        following: asyncio.Task[list[Any]] | None = None
        if len(rows) == MESSAGE_PAGE:
            last = rows[-1]
            following = asyncio.ensure_future(_query(store, "next_messages", (
                resource_id, thread_id, bucket, last.created_at, last.seq, last.message_id, MESSAGE_PAGE)))
        try:
            for row in rows:
                yield row
        except BaseException:  # the reader stopped (closed the iterator) or failed: the read ahead is not wanted
            if following is not None:
                following.cancel()
            raise
        if following is None:
            return
        rows = await following


async def _thread_rows(store: _Connected, resource_id: str) -> AsyncIterator[Any]:
    """The resource's ``resource_threads`` rows that hold a message of it, by thread id."""
    after = ""
    while True:
        rows = await _query(store, "threads", (resource_id, after, _THREAD_PAGE))
        for row in rows:
            if row.updated_at is not None:  # only a title was written: no message of this tenant
                yield row
        if len(rows) < _THREAD_PAGE:
            return
        after = rows[-1].thread_id


def _segment(row: Any) -> ExportedSegment:
    return ExportedSegment(
        record_key=row.record_key, segment_id=row.segment_id,
        kind=cast(Literal["observation", "reflection"], row.kind), generation=row.generation, text=row.text,
        tokens=row.tokens, cycle_id=row.cycle_id, thread_ids=tuple(row.thread_ids or ()),
        first_message_id=row.first_message_id, last_message_id=row.last_message_id,
        message_ids=tuple(row.message_ids or ()), message_tokens=row.message_tokens, boundary_at=row.boundary_at,
        created_at=row.created_at, generations=tuple(sorted(row.generations or ())),
        ranges=ranges_from_json(row.ranges), replaced=tuple(row.replaced or ()))
