"""An in-memory content store: the twin of the Cassandra and SQLite stores, for the embedded runner and tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from om_stream.core.commands import ActivateChunks, CommitGeneration, PersistSegment, PersistThreadMetadata
from om_stream.core.messages import Message
from om_stream.ports import ThreadMetadata

__all__ = ["InMemoryContentStore", "StoredSegment"]


@dataclass
class StoredSegment:
    segment: PersistSegment
    status: str
    generations: set[int] = field(default_factory=set)


@dataclass
class _Record:
    messages: dict[str, tuple[Message, int, int]] = field(default_factory=dict)  # id -> (message, seq, tokens)
    generations: dict[int, tuple[str, ...]] = field(default_factory=dict)
    replaced: dict[str, tuple[str, ...]] = field(default_factory=dict)  # reflection id -> segments it condensed
    epoch: int = 0


class InMemoryContentStore:
    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}
        self._messages: dict[str, dict[str, Message]] = {}  # message id -> resource id -> message
        self.segments: dict[str, StoredSegment] = {}
        self._threads: dict[str, ThreadMetadata] = {}

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
        record.generations.setdefault(command.generation, command.segment_ids)  # first writer wins
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
            last_observed_message_id=command.last_observed_message_id or current.last_observed_message_id)

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

    async def close(self) -> None:
        return None

    # -- views used by reports and tests -------------------------------------------------------------------------

    def message_count(self) -> int:
        return sum(len(tenants) for tenants in self._messages.values())
