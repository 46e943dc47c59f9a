"""The contexts a worker published, read from its topics as an agent would read them, in ``om.context/v1`` form
whatever the wire: under ``OM_CONTEXT_WIRE=v2`` the cursors, the block index and the blocks are assembled by the
client's own ``ContextAssembly``, so a production-shape test judges the same contexts on either wire.

A cursor whose run the topics alone do not give (its messages were not all in the cursors read) is assembled from
the messages the conversation published, as an agent that keeps its own messages would; ``runs_from_published``
counts those.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from om_stream.client.assembly import ContextAssembly, RunWanted
from om_stream.core.messages import Message
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_v2 import ContextCursor, block_update, index_update

__all__ = ["ContextTopics"]


class ContextTopics:
    """Turns the records of the context topic (and, on v2, of the index and blocks topics) into v1 contexts."""

    def __init__(self, topics: dict[str, str], wire: str = "v1",
                 published: Callable[[str], Sequence[Message]] | None = None) -> None:
        self.wire = wire
        self.context_topic = topics["context"]
        self.topics = [topics["context"]] + ([topics["context_index"], topics["context_blocks"]] if wire == "v2"
                                             else [])
        self._published = published
        self._assembly = ContextAssembly()
        self.runs_from_published = 0

    def consumer(self, bootstrap: str, group: str) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(*self.topics, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=group, metadata_max_age_ms=1000)

    def read(self, record: ConsumerRecord[bytes, bytes]) -> tuple[str, dict[str, Any]] | None:
        """The thread and the v1 context a record completes, if it completes one. A tombstone (an erase, a segment
        roll) completes none; on v2 it takes the thread's cursor, index or block away, as it does in the client."""
        if record.key is None:
            return None
        if self.wire == "v1":
            return (record.key.decode(), json.loads(record.value)) if record.value is not None else None
        outcome = self._outcome(record)
        if isinstance(outcome, RunWanted):
            self.runs_from_published += 1
            thread = outcome.cursor.thread_id
            outcome = self._assembly.with_run(outcome.cursor, self._published(thread) if self._published else [])
        if outcome is None:
            return None
        return outcome.thread_id, json.loads(encode(outcome))

    def _outcome(self, record: ConsumerRecord[bytes, bytes]) -> ContextRecord | RunWanted | None:
        """What a v2 record changes, read by the client's own rules (``index_update``, ``block_update``)."""
        assert record.key is not None
        if record.topic == self.context_topic:
            if record.value is None:
                self._assembly.forget(record.key.decode("utf-8", "replace"))
                return None
            return self._assembly.on_cursor(ContextCursor.model_validate_json(record.value))
        if record.topic == self.topics[1]:
            index = index_update(record.key, record.value)
            return self._assembly.on_index(*index) if index is not None else None
        block = block_update(record.key, record.value)
        return self._assembly.on_block(*block) if block is not None else None
