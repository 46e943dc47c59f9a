"""``ports.ExportSource`` for the in-memory store (a base of :class:`~om_stream.adapters.memory_store.
InMemoryContentStore`): what it holds of one resource, read from its dicts.

Everything is in memory already, so nothing is paged; each listing is taken as a snapshot first, so writes made
while an export runs never break its iteration.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from om_stream.core.export_rows import ExportedMessage, ExportedSegment, ExportedThread
from om_stream.core.recall.records import GenerationRecord

if TYPE_CHECKING:
    from om_stream.adapters.memory_store import StoredSegment, _Record
    from om_stream.core.messages import Message
    from om_stream.ports import ThreadMetadata

__all__ = ["InMemoryExports"]


class InMemoryExports:
    """The export reads of the in-memory store; its state is the store's own (declared here for type checkers)."""

    _records: dict[str, _Record]
    segments: dict[str, StoredSegment]
    _threads: dict[str, ThreadMetadata]

    def _resource_rows(self, resource_id: str) -> list[tuple[str, Message, int, int]]:
        """(record key, message, seq, tokens) of the resource's messages, in thread order, then each thread's."""
        rows = [(key, message, seq, tokens) for key, record in list(self._records.items())
                for message, seq, tokens in list(record.messages.values()) if message.resource_id == resource_id]
        return sorted(rows, key=lambda r: (r[1].thread_id, r[1].created_at_ms, r[2], r[1].message_id))

    async def resource_threads(self, resource_id: str) -> AsyncIterator[ExportedThread]:
        spans: dict[str, tuple[int, int]] = {}
        for _, message, _, _ in self._resource_rows(resource_id):
            at = message.created_at_ms
            first, newest = spans.get(message.thread_id, (at, at))
            spans[message.thread_id] = (min(first, at), max(newest, at))
        for thread_id, (created, updated) in spans.items():
            meta = self._threads.get(thread_id)
            if meta is None or meta.resource_id not in (None, resource_id):
                yield ExportedThread(thread_id, created, updated)
            else:
                yield ExportedThread(thread_id, created, updated, meta.title, meta.current_task,
                                     meta.suggested_response, dict(meta.extracted), meta.last_observed_message_id,
                                     meta.working_memory)

    async def resource_messages(self, resource_id: str) -> AsyncIterator[ExportedMessage]:
        for key, message, seq, tokens in self._resource_rows(resource_id):
            yield ExportedMessage(key, seq, tokens, message.model_dump_json(), message.created_at_ms)

    async def record_epoch(self, record_key: str) -> int:
        record = self._records.get(record_key)
        return record.epoch if record is not None else 0

    async def record_segments(self, record_key: str) -> AsyncIterator[ExportedSegment]:
        record = self._records.get(record_key)
        replaced = dict(record.replaced) if record is not None else {}
        stored = sorted((s for s in list(self.segments.values()) if s.segment.record_key == record_key),
                        key=lambda s: (s.segment.created_at, s.segment.segment_id))
        for item in stored:
            segment = item.segment
            yield ExportedSegment(
                record_key=record_key, segment_id=segment.segment_id, kind=segment.kind,
                generation=segment.generation, text=segment.text, tokens=segment.tokens, cycle_id=segment.cycle_id,
                thread_ids=segment.thread_ids, first_message_id=segment.first_message_id,
                last_message_id=segment.last_message_id, message_ids=segment.message_ids,
                message_tokens=segment.message_tokens, boundary_at=segment.boundary_at,
                created_at=segment.created_at, generations=tuple(sorted(item.generations)), ranges=segment.ranges,
                replaced=replaced.get(segment.segment_id, ()))

    async def record_generations(self, record_key: str) -> list[GenerationRecord]:
        record = self._records.get(record_key)
        commits = sorted(record.generations.items()) if record is not None else []
        return [GenerationRecord(record_key, generation, c.segment_ids, c.reflection_id, c.replaced_segment_ids,
                                 c.observation_tokens) for generation, c in commits]
