"""Erasure on Cassandra (``ports.ErasableStore``; tables: ``migrations/0004_erasure.cql``): a subject's rows
deleted, read back, and the erasure ledger. The store owns the session; this class runs its prepared statements.

How each table is erased, and why that way:

* Messages: each of the thread's time buckets is a partition of ``messages`` (one partition delete each); the
  ``messages_by_id`` rows are deleted by the ids read from those partitions first; then the bucket list.
* The thread's listing (``resource_threads``): its first and newest message times are cells written with a
  timestamp of their own (the message times: the earliest and the newest win in any order), so a delete at the
  present time would leave the first-message time (its timestamp is far in the future) and shadow every newest
  time written later. Each is deleted with exactly the timestamp it was written with (read with ``writetime``): the
  tombstone removes that cell and nothing newer. A thread id reused after its erase gets a first-message time from
  its first message again only if that message is older than the erased one's; otherwise listings show its
  creation time as its newest message's (the only visible effect).
* The record row's clear epoch is timestamped by the epoch itself: deleted with that timestamp, so a record made
  again for the subject, whose epochs count on from the erased one's, writes over it.
* The thread metadata row, the record's segments, generations and cached model results: deleted at the present
  time; a tenant check comes first (the row must name the resource erased).

What a refused batch wrote of an erased record (``erase_writes``): each message row by its full key (read from
``messages_by_id``), then its ``messages_by_id`` row; a bucket left empty, and the listing of a thread left with
no bucket, go as in a thread's erase; segments and generations row by row, after the tenant check.

Deletes leave tombstones: Cassandra drops the deleted values from its files at the first compaction after the
table's ``gc_grace_seconds`` (10 days by default). Reads never return them again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from om_stream.adapters.cassandra_store.session import run_all
from om_stream.core.erasure import ErasureCounts, PartRecord, StrayWrites

__all__ = ["CassandraErasure"]

Run = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]


class CassandraErasure:
    def __init__(self, run: Run) -> None:
        self._run = run

    async def erase_thread(self, resource_id: str, thread_id: str) -> ErasureCounts:
        buckets = [row.bucket for row in await self._run("buckets", (resource_id, thread_id))]
        ids: list[str] = []
        for bucket in buckets:
            ids += [row.message_id for row in await self._run("bucket_message_ids", (resource_id, thread_id, bucket))]
        await run_all([self._run("erase_message_by_id", (i, resource_id)) for i in ids])
        await run_all([self._run("erase_bucket", (resource_id, thread_id, b)) for b in buckets])
        await self._run("erase_buckets", (resource_id, thread_id))
        threads = 1 if await self.forget_listing(resource_id, thread_id) else 0
        owner = await self._run("thread_owner", (thread_id,))
        if owner and owner[0].resource_id in (resource_id, None):
            await self._run("erase_thread_metadata", (thread_id,))
            threads = 1
        return ErasureCounts(messages=len(ids), threads=threads)

    async def forget_listing(self, resource_id: str, thread_id: str) -> bool:
        """The thread's row in its resource's listing, each timestamped cell with its own timestamp (see above);
        False when there was none."""
        listing = await self._run("thread_listing", (resource_id, thread_id))
        if not listing:
            return False
        row = listing[0]
        deletes = [self._run("erase_thread_title", (resource_id, thread_id))]
        if row.created_ts is not None:
            deletes.append(self._run("erase_thread_created", (row.created_ts, resource_id, thread_id)))
        if row.updated_ts is not None:
            deletes.append(self._run("erase_thread_updated", (row.updated_ts, resource_id, thread_id)))
        await run_all(deletes)
        return True

    async def erase_record(self, record_key: str, resource_id: str) -> ErasureCounts:
        rows = await self._run("record", (record_key,))
        owner = rows[0].resource_id if rows else None
        epoch = (rows[0].epoch or 0) if rows else 0
        segment_ids = [row.segment_id for row in await self._run("record_segments", (record_key,))]
        if not owner and segment_ids:  # a record without a row: its segments name their tenant
            found = await self._run("segment", (segment_ids[0],))
            owner = found[0].resource_id if found else None
        if owner and owner != resource_id:
            return ErasureCounts()  # another tenant's record under the same key
        segments = [r for r in await run_all([self._run("segment", (s,)) for s in segment_ids]) if r]
        await run_all([self._run("delete_segment", (s,)) for s in segment_ids])
        await self._run("delete_record_segments", (record_key,))
        generations = await self._run("generations_of", (record_key, epoch))
        await self._run("delete_generations", (record_key, epoch))
        keys = [row.request_key for row in await self._run("record_results", (record_key,))]
        stored = [r for r in await run_all([self._run("cycle_result", (k,)) for k in keys]) if r]
        await run_all([self._run("drop_cycle_result", (k,)) for k in keys])
        await self._run("erase_record_results", (record_key,))
        if rows:
            await run_all([self._run("erase_record_resource", (record_key,)),
                        self._run("erase_record_epoch", (epoch, record_key))])
        return ErasureCounts(observations=len(segments), generations=len(generations), cycle_results=len(stored))

    async def erase_writes(self, writes: StrayWrites, epoch: int) -> tuple[ErasureCounts, set[str]]:
        """What one refused batch wrote of a record (``ports.ErasableStore.erase_writes``); ``epoch``: the record's
        clear epoch in the store now (its generations may have been written under it or under the incarnation's).
        Returns the counts and the threads whose messages were removed."""
        resource_id = writes.resource_id
        places = await run_all([self._run("message_place", (i, resource_id)) for i in writes.message_ids])
        found = [(i, rows[0]) for i, rows in zip(writes.message_ids, places, strict=True) if rows]
        # the row by thread first, then by id: an undo cut short is found again by id
        await run_all([self._run("erase_message", (resource_id, p.thread_id, p.bucket, p.created_at, p.seq, i))
                       for i, p in found])
        await run_all([self._run("erase_message_by_id", (i, resource_id)) for i, _ in found])
        threads = {p.thread_id for _, p in found}
        for thread_id, bucket in {(p.thread_id, p.bucket) for _, p in found}:
            left = await self._run("count_bucket", (resource_id, thread_id, bucket))
            if not left or not int(left[0].count):
                await self._run("expire_bucket_row", (resource_id, thread_id, bucket))
        for thread_id in threads:
            if not await self._run("buckets", (resource_id, thread_id)):
                await self.forget_listing(resource_id, thread_id)
        counts = ErasureCounts(messages=len(found))
        owner = await self._run("record_owner", (writes.record_key,))
        if not owner or owner[0].resource_id in (None, resource_id):  # not another tenant's record
            segments = [s for s, rows in zip(writes.segment_ids, await run_all(
                [self._run("segment", (s,)) for s in writes.segment_ids]), strict=True)
                if rows and rows[0].record_key == writes.record_key and rows[0].resource_id in ("", resource_id)]
            await run_all([self._run("delete_segment", (s,)) for s in segments])
            await run_all([self._run("expire_record_segment", (writes.record_key, s)) for s in segments])
            keys = [(e, g) for e in sorted({writes.epoch, epoch}) for g in writes.generations]
            rows = await run_all([self._run("generation", (writes.record_key, e, g)) for e, g in keys])
            held = [k for k, r in zip(keys, rows, strict=True) if r]
            await run_all([self._run("erase_generation", (writes.record_key, e, g)) for e, g in held])
            counts += ErasureCounts(observations=len(segments), generations=len(held))
        for thread_id in writes.thread_ids:
            metadata = await self._run("thread_owner", (thread_id,))
            if metadata and metadata[0].resource_id in (resource_id, None):
                await self._run("erase_thread_metadata", (thread_id,))
                counts += ErasureCounts(threads=1)
        return counts, threads

    async def thread_ids(self, resource_id: str) -> list[str]:
        return [row.thread_id for row in await self._run("resource_thread_ids", (resource_id,))]

    async def holds(self, resource_id: str, thread_id: str | None) -> bool:
        if thread_id is None:
            return bool(await self.thread_ids(resource_id)) or bool(
                [r for r in await self._run("record", (resource_id,)) if r.resource_id == resource_id])
        if await self._run("thread_listing", (resource_id, thread_id)):
            return True
        if await self._run("buckets", (resource_id, thread_id)):
            return True
        owner = await self._run("thread_owner", (thread_id,))
        return bool(owner) and owner[0].resource_id == resource_id

    # -- the ledger --------------------------------------------------------------------------------------------------

    async def erasure_part(self, erase_id: str, part: int) -> PartRecord | None:
        rows = await self._run("erasure_part", (erase_id, part))
        if not rows:
            return None
        row = rows[0]
        counts = ErasureCounts.from_dict(json.loads(row.counts)) if row.counts is not None else None
        return PartRecord(erase_id, part, tuple((int(p), int(o)) for p, o in json.loads(row.offsets or "[]")),
                          counts, bool(row.found), row.completed_at)

    async def put_erasure_part(self, record: PartRecord, ttl_s: int) -> None:
        await self._run("put_erasure_part", (
            record.erase_id, record.part, json.dumps([list(o) for o in record.offsets]),
            None if record.counts is None else json.dumps(record.counts.as_dict()), record.found,
            record.completed_at, ttl_s))

    async def resource_of(self, record_key: str) -> str | None:
        rows = await self._run("record_owner", (record_key,))
        if rows and rows[0].resource_id:
            return str(rows[0].resource_id)
        owner = await self._run("thread_owner", (record_key,))
        return str(owner[0].resource_id) if owner and owner[0].resource_id else None

    async def mark_erased(self, record_digest: str, epoch_through: int, ttl_s: int) -> None:
        await self._run("mark_erased", (epoch_through, ttl_s, epoch_through, record_digest))

    async def erased_through(self, record_digest: str) -> int | None:
        rows = await self._run("erased_through", (record_digest,))
        return int(rows[0].epoch_through) if rows and rows[0].epoch_through is not None else None

