"""Retention on Cassandra (``ports.ExpiringStore``; ``migrations/0005_retention.cql``): what a record's purge reads,
the purge itself, and a record's own window. The store owns the session; this class runs its prepared statements.

How each table is purged, and why that way:

* Messages: a thread's messages are partitioned in 10-day buckets (``queries.BUCKET_MS``), clustered by creation
  time. A bucket that ends before the cutoff goes whole (one partition delete, and its row in the bucket list); the
  bucket the cutoff falls in loses the rows before it (one range delete on the clustering column). The
  ``messages_by_id`` rows are deleted by the ids read first from those rows.
* The thread's listing goes with its last message (the erase's way: each timestamped cell with its own
  timestamp, ``CassandraErasure.forget_listing``). While messages are left its first-message time stays as written:
  a cell written with a timestamp derived from the earliest message cannot be moved later without a tombstone that
  would shadow the new value. It is a time, never content.
* A segment written again without its expired entries is copied whole under its new id (kind, generations, ranges
  as they were), then the old row goes; a replay finds the copy and copies nothing twice.
* Derived thread metadata (the ``threads`` row, the listing's title), the record's cached model results (their
  rows by record name them): deleted at the present time, after the tenant check.

Deletes leave tombstones, dropped from the files at the first compaction after ``gc_grace_seconds``; reads never
return the deleted values again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from om_stream.adapters.cassandra_store.erasure import CassandraErasure
from om_stream.adapters.cassandra_store.queries import BUCKET_MS
from om_stream.adapters.cassandra_store.session import run_all
from om_stream.core.commands import ExpireStored, PersistRetention, SegmentRewrite
from om_stream.core.retention import ExpiryCounts, SegmentText

__all__ = ["CassandraRetention"]

Run = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]


class CassandraRetention:
    def __init__(self, run: Run, erasure: CassandraErasure, ttl_s: int) -> None:
        self._run = run
        self._erasure = erasure
        self._ttl = ttl_s

    async def _owned(self, record_key: str, resource_id: str) -> bool:
        rows = await self._run("record_owner", (record_key,))
        return not rows or not rows[0].resource_id or rows[0].resource_id == resource_id

    async def segment_texts_of(self, record_key: str, resource_id: str) -> list[SegmentText]:
        if not await self._owned(record_key, resource_id):
            return []
        ids = [row.segment_id for row in await self._run("record_segments", (record_key,))]
        rows = await run_all([self._run("segment", (i,)) for i in ids])
        return [SegmentText(r[0].segment_id, r[0].text, r[0].boundary_at or 0) for r in rows
                if r and r[0].text is not None and r[0].resource_id in (resource_id, "", None)]

    async def _buckets(self, resource_id: str, thread_id: str) -> list[int]:
        return [row.bucket for row in await self._run("buckets", (resource_id, thread_id))]

    async def next_message_at(self, resource_id: str, thread_ids: Sequence[str], at_or_after: int) -> int | None:
        async def of_thread(thread_id: str) -> int | None:
            for bucket in await self._buckets(resource_id, thread_id):  # oldest first
                if (bucket + 1) * BUCKET_MS <= at_or_after:
                    continue
                rows = await self._run("bucket_first_from", (resource_id, thread_id, bucket, at_or_after))
                if rows:
                    return int(rows[0].created_at)
            return None

        found = [t for t in await run_all([of_thread(t) for t in dict.fromkeys(thread_ids)]) if t is not None]
        return min(found, default=None)

    async def _expire_messages(self, resource_id: str, thread_id: str, before: int) -> int:
        """The thread's messages created before ``before``; how many there were."""
        removed = 0
        for bucket in await self._buckets(resource_id, thread_id):
            if bucket * BUCKET_MS >= before:
                break
            whole = (bucket + 1) * BUCKET_MS <= before
            ids = [row.message_id for row in await (
                self._run("bucket_message_ids", (resource_id, thread_id, bucket)) if whole else
                self._run("bucket_ids_before", (resource_id, thread_id, bucket, before)))]
            await run_all([self._run("erase_message_by_id", (i, resource_id)) for i in ids])
            if whole:
                await self._run("erase_bucket", (resource_id, thread_id, bucket))
            elif ids:
                await self._run("expire_bucket_before", (resource_id, thread_id, bucket, before))
            if whole or (ids and not await self._run("bucket_first_from", (resource_id, thread_id, bucket, 0))):
                await self._run("expire_bucket_row", (resource_id, thread_id, bucket))  # nothing left in it
            removed += len(ids)
        return removed

    async def _rewrite(self, record_key: str, rewrite: SegmentRewrite) -> int:
        copied = 0
        if not await self._run("segment", (rewrite.new_id,)):
            found = await self._run("segment_row", (rewrite.old_id,))
            if found and found[0].record_key == record_key:
                row = found[0]
                await self._run("copy_segment", (
                    rewrite.new_id, row.record_key, row.resource_id, row.kind, row.generation, rewrite.text,
                    rewrite.tokens, row.cycle_id, row.thread_ids, row.first_message_id, row.last_message_id,
                    row.message_ids, row.message_tokens, row.boundary_at, row.created_at, row.generations, row.ranges,
                    row.replaced, self._ttl))
                await self._run("record_segment", (record_key, rewrite.new_id, row.created_at, self._ttl))
                copied = 1
        await self._delete_segment(record_key, rewrite.old_id)
        return copied

    async def _delete_segment(self, record_key: str, segment_id: str) -> int:
        found = await self._run("segment", (segment_id,))
        if found and found[0].record_key not in (record_key, None):
            return 0  # another record's segment: never this purge's
        await run_all([self._run("delete_segment", (segment_id,)),
                    self._run("expire_record_segment", (record_key, segment_id))])
        return 1 if found and found[0].text is not None else 0

    async def _expire_results(self, record_key: str, keep_cycles: Sequence[str]) -> int:
        keep = tuple(f"{cycle}#" for cycle in keep_cycles)
        keys = [row.request_key for row in await self._run("record_results", (record_key,))
                if not (keep and row.request_key.startswith(keep))]
        stored = [r for r in await run_all([self._run("cycle_result", (k,)) for k in keys]) if r]
        await run_all([self._run("drop_cycle_result", (k,)) for k in keys])
        await run_all([self._run("expire_record_result", (record_key, k)) for k in keys])
        return len(stored)

    async def expire(self, command: ExpireStored) -> tuple[ExpiryCounts, list[str]]:
        """The purge; also the threads it left without a message (the store forgets what it remembers of them)."""
        if not await self._owned(command.record_key, command.resource_id):
            return ExpiryCounts(), []
        resource, threads = command.resource_id, list(dict.fromkeys(command.thread_ids))
        messages = sum(await run_all([self._expire_messages(resource, t, command.before) for t in threads]))
        emptied = [t for t in threads if not await self._buckets(resource, t)]
        await run_all([self._erasure.forget_listing(resource, t) for t in emptied])
        rewritten = sum(await run_all([self._rewrite(command.record_key, r) for r in command.rewrites]))
        observations = sum(await run_all([self._delete_segment(command.record_key, s) for s in command.deletes]))
        metadata = 0
        for thread_id in command.threads:
            owner = await self._run("thread_owner", (thread_id,))
            if owner and owner[0].resource_id in (resource, None):
                await run_all([self._run("erase_thread_metadata", (thread_id,)),
                            self._run("erase_thread_title", (resource, thread_id))])
                metadata += 1
        results = await self._expire_results(command.record_key, command.keep_cycles)
        return ExpiryCounts(messages=messages, observations=observations, rewritten=rewritten, threads=metadata,
                            cycle_results=results), emptied

    async def put_retention(self, command: PersistRetention) -> None:
        await self._run("record_retention", (command.days, command.record_key))

    async def retention_of(self, record_key: str) -> int | None:
        rows = await self._run("record_retention_of", (record_key,))
        return int(rows[0].retention_days) if rows and rows[0].retention_days is not None else None

