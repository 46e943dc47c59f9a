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
from om_stream.core.commands import ActivateChunks, CommitGeneration, PersistSegment, PersistThreadMetadata
from om_stream.core.messages import Message
from om_stream.core.recall.records import StoredMessage
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

    async def get_result(self, key: str) -> bytes | None:
        check_request(key)
        found = self._results.get(key)
        if found is None or found[1] <= self._clock():
            return None
        return found[0]

    async def put_result(self, key: str, payload: bytes) -> None:
        check_request(key)
        now = self._clock()
        self._results.pop(key, None)
        self._results[key] = (bytes(payload), now + self._ttl)
        while self._results and (len(self._results) > self._max or next(iter(self._results.values()))[1] <= now):
            self._results.popitem(last=False)
        self._leases.pop(key, None)

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

    def _record(self, key: str) -> _Record:
        return self._records.setdefault(key, _Record())

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None:
        self._record(record_key).messages[message.message_id] = (message, seq, tokens)
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

    async def put_result(self, key: str, payload: bytes) -> None:
        await self.cycle_results.put_result(key, payload)

    async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
        return await self.cycle_results.claim(key, owner, lease_s)

    # -- views used by reports and tests -------------------------------------------------------------------------

    def message_count(self) -> int:
        return sum(len(tenants) for tenants in self._messages.values())
