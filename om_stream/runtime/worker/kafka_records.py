"""The Kafka records every role of the worker shares: a record read (``SourceRecord``), a record to write
(``Publication``) and the producer that writes it (``Publisher``), and the two records every role may write the
same way: a dead letter (the original bytes, where they came from, why) and a lifecycle event's CloudEvents headers.

No role's logic lives here, and nothing here knows Faust (``records.py`` turns a Faust event into a
``SourceRecord``): the model workers, the recall agent and the HTTP API import this module, not the memory
agent's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from om_stream.observability.metrics import Metrics
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import encode
from om_stream.wire.dlq import DeadLetterRecord

__all__ = ["Publication", "Publisher", "SourceRecord", "dead_letter", "event_headers"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceRecord:
    """A record read from a topic: where it came from, its bytes and headers, and when it was read."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    received_at: float = 0.0  # monotonic seconds, for message-to-context latency
    generation: int = 0  # the consumer-group generation the record was read in
    handle: object = None  # the transport's own object for the record (a Faust event): the table writes through it
    timestamp_ms: int = 0  # the record's Kafka timestamp


@dataclass(frozen=True)
class Publication:
    topic: str
    key: bytes
    value: bytes | None  # None: a tombstone (compacted topics forget the key)
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int | None = None  # None: the producer's partitioner places it by key


class Publisher(Protocol):
    async def send(self, publication: Publication) -> Awaitable[object]:
        """Queue a record (in call order); the returned awaitable resolves when the broker acknowledges it."""
        ...


def event_headers(event_type: str, event_id: str, thread_id: str, source: str, at_ms: int) -> list[tuple[str, bytes]]:
    """CloudEvents binary mode headers (``ce_*``) and the content type."""
    return [("ce_specversion", b"1.0"), ("ce_type", event_type.encode()), ("ce_id", event_id.encode()),
            ("ce_source", source.encode()), ("ce_subject", thread_id.encode()),
            ("ce_time", datetime.fromtimestamp(at_ms / 1000, UTC).isoformat().replace("+00:00", "Z").encode()),
            ("content-type", b"application/json")]


def dead_letter(kafka: KafkaSettings, metrics: Metrics, record: SourceRecord, reason: str, detail: str) -> Publication:
    """The dead-letter record of ``record``: the original bytes, where they came from, and why."""
    metrics.dlq_records.labels(reason).inc()
    log.warning("dead letter from %s[%d]@%d: %s (%s)", record.topic, record.partition, record.offset, reason,
                detail[:200])
    letter = DeadLetterRecord.build(
        reason=reason, detail=detail, topic=record.topic, partition=record.partition, offset=record.offset,
        key=record.key, value=record.value or b"", headers=record.headers,
        failed_at=datetime.now(UTC).isoformat().replace("+00:00", "Z"))
    return Publication(kafka.topic_dlq, record.key or b"", encode(letter), [("om_dlq_reason", reason.encode())])
