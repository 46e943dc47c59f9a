"""A Faust event as the worker's agents see it: a ``SourceRecord`` (where it came from, its bytes and headers)."""

from __future__ import annotations

import time
from typing import Any

from faust.types import EventT

from om_stream.runtime.worker.kafka_records import SourceRecord

__all__ = ["header_list", "source_record"]


def header_list(raw: Any) -> list[tuple[str, bytes]]:
    """Faust's headers (a dict or pairs, values bytes or not) as (name, bytes) pairs."""
    items = raw.items() if isinstance(raw, dict) else (raw or [])
    return [(str(k), v if isinstance(v, bytes) else str(v).encode()) for k, v in items]


def source_record(event: EventT[bytes]) -> SourceRecord:
    message = event.message
    headers = header_list(message.headers)
    return SourceRecord(topic=message.topic, partition=message.partition, offset=message.offset,
                        key=message.key, value=message.value, headers=headers, received_at=time.monotonic(),
                        generation=int(message.generation_id or 0), handle=event,
                        timestamp_ms=int((message.timestamp or 0) * 1000))
