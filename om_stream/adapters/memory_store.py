"""An in-memory content store: the twin of the Cassandra and SQLite stores, for the embedded runner and tests.

It keeps model-call results and their leases too (:class:`InMemoryCycleResults`), the reference behaviour of
``ports.CycleResults``: the other stores do the same with rows that expire.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from om_stream.adapters.memory_export import InMemoryExports
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
from om_stream.core.recall.records import StoredMessage
from om_stream.core.retention import ExpiryCounts, SegmentText
from om_stream.ports import ThreadMetadata

__all__ = ["RESULT_TTL_S", "InMemoryContentStore", "InMemoryCycleResults", "StoredSegment", "check_request"]

RESULT_TTL_S = 7 * 24 * 3600.0  # how long a model result is kept by default (as ``cassandra.cycle_result_ttl_s``)


@dataclass
class StoredSegment:
    segment: PersistSegment
    status: str
    generations: set[int] = field(default_factory=set)


@dataclass
class _Record:
    resource_id: str = ""  # the tenant of the record's first message
    messages: dict[str, tuple[Message, int, int]] = field(default_factory=dict)  # id -> (message, seq, tokens)
    generations: dict[int, CommitGeneration] = field(default_factory=dict)  # the first commit of each generation
    replaced: dict[str, tuple[str, ...]] = field(default_factory=dict)  # reflection id -> segments it condensed
    epoch: int = 0


def check_request(key: str, lease_s: float | None = None) -> None:
    """Refuse, in every store alike, what Cassandra cannot hold: an empty partition key, a lease of no time."""
    if not key:
        raise ValueError("a cycle result key must not be empty")
    if lease_s is not None and not lease_s > 0:
        raise ValueError(f"a lease must last more than 0 s, got {lease_s}")


class InMemoryCycleResults:
    """``ports.CycleResults`` in process: dicts with monotonic expiry, each holding at most ``max_entries``.

    Results are kept in write order, which is their expiry order (one TTL): the expired ones are dropped from the
    front as new ones arrive, and past the bound the oldest go first. Expired leases are dropped before live ones,
    so a live lease is only lost when ``max_entries`` leases are live at once.
    """

    def __init__(self, *, result_ttl_s: float = RESULT_TTL_S, max_entries: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = result_ttl_s
        self._max = max_entries
        self._clock = clock
        self._results: OrderedDict[str, tuple[bytes, float]] = OrderedDict()  # key -> (payload, expires at)
        self._leases: OrderedDict[str, tuple[str, float]] = OrderedDict()  # key -> (owner, expires at)
        self._by_record: dict[str, set[str]] = {}  # record key -> its result keys (an erase removes them)

    async def get_result(self, key: str) -> bytes | None:
        check_request(key)
        found = self._results.get(key)
        if found is None or found[1] <= self._clock():
            return None
        return found[0]

    async def put_result(self, key: str, payload: bytes, *, record_key: str) -> None:
        check_request(key)
        now = self._clock()
        self._results.pop(key, None)
        self._results[key] = (bytes(payload), now + self._ttl)
        self._by_record.setdefault(record_key, set()).add(key)
        while self._results and (len(self._results) > self._max or next(iter(self._results.values()))[1] <= now):
            self._results.popitem(last=False)
        if len(self._by_record) > self._max:  # keys of results that expired meanwhile
            self._by_record = {r: live for r, keys in self._by_record.items()
                               if (live := {k for k in keys if k in self._results})}

    async def drop_result(self, key: str) -> None:
        check_request(key)
        self._results.pop(key, None)

    def erase_record(self, record_key: str) -> int:
        """Remove the record's results; how many were held."""
        keys = self._by_record.pop(record_key, set())
        return sum(1 for key in keys if self._results.pop(key, None) is not None)

    def expire_record(self, record_key: str, keep_cycles: Sequence[str]) -> int:
        """Remove the record's results but those of the cycles ``keep_cycles`` (a result's key starts with its
        request id, ``<cycle>#<attempt>``); how many were held."""
        keys = self._by_record.get(record_key, set())
        gone = {k for k in keys if not k.startswith(tuple(f"{c}#" for c in keep_cycles))} if keep_cycles else keys
        self._by_record[record_key] = keys - gone
        return sum(1 for key in gone if self._results.pop(key, None) is not None)

    async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
        check_request(key, lease_s)
        now = self._clock()
        held = self._leases.get(key)
        if held is not None and held[0] != owner and held[1] > now:
            return held[0]
        self._leases.pop(key, None)
        self._leases[key] = (owner, now + lease_s)
        if len(self._leases) > self._max:
            for expired in [k for k, (_, until) in self._leases.items() if until <= now]:
                del self._leases[expired]
            while len(self._leases) > self._max:
                self._leases.popitem(last=False)
        return None

    def result_count(self) -> int:
        """Results held, expired ones not yet dropped included (for tests and reports)."""
        return len(self._results)


class InMemoryContentStore(InMemoryExports):
    def __init__(self, *, result_ttl_s: float = RESULT_TTL_S, max_results: int = 10_000) -> None:
        self._records: dict[str, _Record] = {}
        self._messages: dict[str, dict[str, Message]] = {}  # message id -> resource id -> message
        self.segments: dict[str, StoredSegment] = {}
        self._threads: dict[str, ThreadMetadata] = {}
        self.cycle_results = InMemoryCycleResults(result_ttl_s=result_ttl_s, max_entries=max_results)
        # the erasure ledger (``ports.ErasableStore``): rows with their expiry (epoch seconds)
        self._parts: dict[tuple[str, int], tuple[PartRecord, float]] = {}
        self._erased: dict[str, tuple[int, float]] = {}
        self._retention: dict[str, int] = {}  # record key -> its own retention window (days)

    def _record(self, key: str) -> _Record:
        return self._records.setdefault(key, _Record())

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None:
        record = self._record(record_key)
        record.resource_id = record.resource_id or message.resource_id
        record.messages[message.message_id] = (message, seq, tokens)
        self._messages.setdefault(message.message_id, {})[message.resource_id] = message

    async def get_messages(self, message_ids: Sequence[str], *, resource_id: str | None = None) -> list[Message]:
        found = []
        for message_id in message_ids:
            tenants = self._messages.get(message_id, {})
            message = tenants.get(resource_id) if resource_id is not None else next(iter(tenants.values()), None)
            if message is not None:
                found.append(message)
        return found

    async def get_record_messages(self, record_key: str, *, resource_id: str, thread_ids: Sequence[str],
                                  through_seq: int) -> list[StoredMessage]:
        threads = set(thread_ids)
        record = self._records.get(record_key)
        found = [StoredMessage(message, record_key, seq, tokens) for message, seq, tokens in
                 (record.messages.values() if record is not None else ())
                 if seq <= through_seq and message.resource_id == resource_id and message.thread_id in threads]
        return sorted(found, key=lambda stored: stored.seq)

    async def put_segment(self, segment: PersistSegment) -> None:
        existing = self.segments.get(segment.segment_id)
        if existing is None:
            self.segments[segment.segment_id] = StoredSegment(segment, segment.status, {segment.generation}
                                                              if segment.status == "active" else set())

    async def get_segment_texts(self, segment_ids: Sequence[str]) -> dict[str, str]:
        return {i: self.segments[i].segment.text for i in segment_ids if i in self.segments}

    async def activate_chunks(self, command: ActivateChunks) -> None:
        for chunk_id in command.chunk_ids:
            stored = self.segments.get(chunk_id)
            if stored is not None:
                stored.status = "active"
                stored.generations.add(command.generation)

    async def commit_generation(self, command: CommitGeneration) -> None:
        record = self._record(command.record_key)
        record.generations.setdefault(command.generation, command)  # first writer wins
        record.replaced[command.reflection_id] = command.replaced_segment_ids
        for segment_id in command.segment_ids:
            stored = self.segments.get(segment_id)
            if stored is not None:
                stored.status = "active"
                stored.generations.add(command.generation)

    async def put_thread_metadata(self, command: PersistThreadMetadata) -> None:
        current = self._threads.get(command.thread_id, ThreadMetadata(command.thread_id, command.resource_id))
        self._threads[command.thread_id] = replace(
            current, resource_id=command.resource_id, title=command.title or current.title,
            current_task=command.current_task or current.current_task,
            suggested_response=command.suggested_response or current.suggested_response,
            extracted={**current.extracted, **command.extracted_values},
            last_observed_message_id=command.last_observed_message_id or current.last_observed_message_id,
            working_memory=current.working_memory if command.working_memory is None else command.working_memory)

    async def get_thread_metadata(self, thread_id: str) -> ThreadMetadata:
        return self._threads.get(thread_id, ThreadMetadata(thread_id))

    async def clear(self, record_key: str, epoch: int) -> None:
        """Forget the record's observations (segments, generations); the conversation's messages stay."""
        record = self._record(record_key)
        if epoch <= record.epoch:
            return
        self.segments = {i: s for i, s in self.segments.items() if s.segment.record_key != record_key}
        record.generations.clear()
        record.replaced.clear()
        record.epoch = epoch

    async def start(self) -> None:
        return None  # nothing to connect to

    async def close(self) -> None:
        return None

    # -- CycleResults --------------------------------------------------------------------------------------------

    async def get_result(self, key: str) -> bytes | None:
        return await self.cycle_results.get_result(key)

    async def put_result(self, key: str, payload: bytes, *, record_key: str) -> None:
        await self.cycle_results.put_result(key, payload, record_key=record_key)

    async def drop_result(self, key: str) -> None:
        await self.cycle_results.drop_result(key)

    # -- ErasableStore -------------------------------------------------------------------------------------------

    async def erase_thread(self, resource_id: str, thread_id: str) -> ErasureCounts:
        messages = 0
        for record in self._records.values():
            gone = [i for i, (m, _, _) in record.messages.items()
                    if m.resource_id == resource_id and m.thread_id == thread_id]
            for message_id in gone:
                del record.messages[message_id]
            messages += len(gone)
        for message_id in [i for i, tenants in self._messages.items()
                           if (m := tenants.get(resource_id)) is not None and m.thread_id == thread_id]:
            del self._messages[message_id][resource_id]
            if not self._messages[message_id]:
                del self._messages[message_id]
        metadata = self._threads.get(thread_id)
        threads = 0
        if metadata is not None and metadata.resource_id in (resource_id, None):
            del self._threads[thread_id]
            threads = 1
        return ErasureCounts(messages=messages, threads=threads)

    async def erase_record(self, record_key: str, resource_id: str) -> ErasureCounts:
        record = self._records.get(record_key)
        if record is not None and record.resource_id and record.resource_id != resource_id:
            return ErasureCounts()  # another tenant's record under the same key
        segments = [i for i, s in self.segments.items() if s.segment.record_key == record_key]
        for segment_id in segments:
            del self.segments[segment_id]
        generations = 0
        if record is not None:
            generations = len(record.generations)
            record.generations.clear()
            record.replaced.clear()
            record.epoch = 0
            if not record.messages:
                del self._records[record_key]
        results = self.cycle_results.erase_record(record_key)
        self._retention.pop(record_key, None)
        return ErasureCounts(observations=len(segments), generations=generations, cycle_results=results)

    async def erase_resource(self, resource_id: str) -> ErasureCounts:
        counts = ErasureCounts()
        threads = {m.thread_id for tenants in self._messages.values() if (m := tenants.get(resource_id))}
        threads |= {t for t, meta in self._threads.items() if meta.resource_id == resource_id}
        records = [key for key, record in self._records.items() if record.resource_id == resource_id]
        for thread_id in sorted(threads):
            counts += await self.erase_thread(resource_id, thread_id)
        for key in records:
            counts += await self.erase_record(key, resource_id)
        return counts

    async def erase_writes(self, writes: StrayWrites) -> ErasureCounts:
        resource_id = writes.resource_id
        messages = 0
        record = self._records.get(writes.record_key)
        for message_id in writes.message_ids:
            tenants = self._messages.get(message_id, {})
            if tenants.pop(resource_id, None) is not None:
                messages += 1
            if not tenants:
                self._messages.pop(message_id, None)
            if record is not None:
                held = record.messages.get(message_id)
                if held is not None and held[0].resource_id == resource_id:
                    del record.messages[message_id]
        ours = record is None or record.resource_id in ("", resource_id)  # not another tenant's record
        segments = [i for i in writes.segment_ids if ours
                    and (s := self.segments.get(i)) is not None and s.segment.record_key == writes.record_key]
        for segment_id in segments:
            del self.segments[segment_id]
        generations = 0
        if record is not None and ours:
            for generation in writes.generations:
                generations += record.generations.pop(generation, None) is not None
        threads = 0
        for thread_id in writes.thread_ids:
            metadata = self._threads.get(thread_id)
            if metadata is not None and metadata.resource_id in (resource_id, None):
                del self._threads[thread_id]
                threads += 1
        return ErasureCounts(messages=messages, observations=len(segments), generations=generations,
                             threads=threads)

    async def resource_of(self, record_key: str) -> str | None:
        record = self._records.get(record_key)
        if record is not None and record.resource_id:
            return record.resource_id
        metadata = self._threads.get(record_key)
        return metadata.resource_id if metadata is not None else None

    async def holds(self, resource_id: str, thread_id: str | None = None) -> bool:
        def ours(message: Message) -> bool:
            return thread_id is None or message.thread_id == thread_id

        if any((m := tenants.get(resource_id)) is not None and ours(m) for tenants in self._messages.values()):
            return True
        if any(meta.resource_id == resource_id and (thread_id is None or t == thread_id)
               for t, meta in self._threads.items()):
            return True
        return thread_id is None and any(r.resource_id == resource_id and (r.messages or r.generations)
                                         for r in self._records.values())

    async def erasure_part(self, erase_id: str, part: int) -> PartRecord | None:
        found = self._parts.get((erase_id, part))
        return found[0] if found is not None and found[1] > time.time() else None

    async def put_erasure_part(self, record: PartRecord, ttl_s: int) -> None:
        now = time.time()
        self._parts = {k: v for k, v in self._parts.items() if v[1] > now}
        self._parts[(record.erase_id, record.part)] = (record, now + ttl_s)

    async def mark_erased(self, record_digest: str, epoch_through: int, ttl_s: int) -> None:
        now = time.time()
        self._erased = {k: v for k, v in self._erased.items() if v[1] > now}
        known = self._erased.get(record_digest)
        self._erased[record_digest] = (max(epoch_through, known[0] if known else epoch_through), now + ttl_s)

    async def erased_through(self, record_digest: str) -> int | None:
        found = self._erased.get(record_digest)
        return found[0] if found is not None and found[1] > time.time() else None

    async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
        return await self.cycle_results.claim(key, owner, lease_s)

    # -- ExpiringStore -------------------------------------------------------------------------------------------

    def _of_tenant(self, record_key: str, resource_id: str) -> bool:
        record = self._records.get(record_key)
        return record is None or not record.resource_id or record.resource_id == resource_id

    async def segment_texts_of(self, record_key: str, resource_id: str) -> list[SegmentText]:
        if not self._of_tenant(record_key, resource_id):
            return []
        return [SegmentText(i, s.segment.text, s.segment.boundary_at) for i, s in self.segments.items()
                if s.segment.record_key == record_key]

    async def next_message_at(self, resource_id: str, thread_ids: Sequence[str], at_or_after: int) -> int | None:
        threads = set(thread_ids)
        times = [m.created_at_ms for tenants in self._messages.values() if (m := tenants.get(resource_id))
                 and m.thread_id in threads and m.created_at_ms >= at_or_after]
        return min(times, default=None)

    async def expire(self, command: ExpireStored) -> ExpiryCounts:
        if not self._of_tenant(command.record_key, command.resource_id):
            return ExpiryCounts()
        resource, threads = command.resource_id, set(command.thread_ids)

        def expired(message: Message) -> bool:
            return (message.resource_id == resource and message.thread_id in threads
                    and message.created_at_ms < command.before)

        messages = 0
        for record in self._records.values():
            for message_id in [i for i, (m, _, _) in record.messages.items() if expired(m)]:
                del record.messages[message_id]
        for message_id in [i for i, tenants in self._messages.items() if (m := tenants.get(resource)) and expired(m)]:
            del self._messages[message_id][resource]
            messages += 1
            if not self._messages[message_id]:
                del self._messages[message_id]
        rewritten = 0
        owner = self._records.get(command.record_key)
        for rewrite in command.rewrites:
            old = self.segments.get(rewrite.old_id)
            if old is not None and rewrite.new_id not in self.segments:
                self.segments[rewrite.new_id] = StoredSegment(
                    replace(old.segment, segment_id=rewrite.new_id, text=rewrite.text, tokens=rewrite.tokens),
                    old.status, set(old.generations))
                rewritten += 1
                if owner is not None and rewrite.old_id in owner.replaced:
                    owner.replaced[rewrite.new_id] = owner.replaced.pop(rewrite.old_id)
            self.segments.pop(rewrite.old_id, None)
        observations = sum(1 for i in command.deletes if self.segments.pop(i, None) is not None)
        metadata = 0
        for thread_id in command.threads:
            found = self._threads.get(thread_id)
            if found is not None and found.resource_id in (resource, None):
                del self._threads[thread_id]
                metadata += 1
        results = self.cycle_results.expire_record(command.record_key, command.keep_cycles)
        return ExpiryCounts(messages=messages, observations=observations, rewritten=rewritten, threads=metadata,
                            cycle_results=results)

    async def put_retention(self, command: PersistRetention) -> None:
        if command.days is None:
            self._retention.pop(command.record_key, None)
        else:
            self._retention[command.record_key] = command.days

    async def retention_of(self, record_key: str) -> int | None:
        return self._retention.get(record_key)

    # -- views used by reports and tests -------------------------------------------------------------------------

    def message_count(self) -> int:
        return sum(len(tenants) for tenants in self._messages.values())
