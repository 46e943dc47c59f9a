"""A thread's ``data-om-*`` events as typed values with their CloudEvents attributes (binary mode headers)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiokafka import ConsumerRecord
from pydantic import ValidationError

from om_stream.client.partitioning import partition_for
from om_stream.client.tail import TopicTail
from om_stream.core.events import EVENT_TYPES, OMEvent

__all__ = ["EventEnvelope", "EventStream"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EventEnvelope:
    """One event: ``data`` is the payload model of ``type`` (``EVENT_TYPES[type]``); ``id`` is deterministic, so a
    replayed event repeats it (dedupe on it); ``headers`` holds every record header as sent."""

    type: str
    id: str
    source: str
    subject: str
    time: str
    specversion: str
    data: OMEvent
    headers: Mapping[str, bytes]
    topic: str
    partition: int
    offset: int


def parse_event(record: ConsumerRecord[bytes, bytes]) -> EventEnvelope | None:
    """None for an event type this client does not know (a newer worker) or a payload that does not parse."""
    headers = dict(record.headers)
    text = {key: value.decode("utf-8", "replace") for key, value in headers.items()}
    event_type = text.get("ce_type", "")
    model = EVENT_TYPES.get(event_type)
    if model is None or record.value is None:
        log.debug("skipping event of unknown type %r at %s[%d]@%d", event_type, record.topic, record.partition,
                  record.offset)
        return None
    try:
        data = model.model_validate_json(record.value)
    except ValidationError as exc:
        log.warning("event %s at %s[%d]@%d does not match its schema: %s", event_type, record.topic,
                    record.partition, record.offset, exc.errors()[:3])
        return None
    return EventEnvelope(type=event_type, id=text.get("ce_id", ""), source=text.get("ce_source", ""),
                         subject=text.get("ce_subject", ""), time=text.get("ce_time", ""),
                         specversion=text.get("ce_specversion", ""), data=data, headers=headers, topic=record.topic,
                         partition=record.partition, offset=record.offset)


class EventStream:
    """``async with client.events(thread) as events: async for event in events: ...``

    Positioned when the ``async with`` block is entered (at the end of the thread's partition, or at its beginning
    with ``from_beginning``), so events caused by anything published inside the block are never missed. Only the
    thread's partition is read.
    """

    def __init__(self, bootstrap: str, topic: str, thread_id: str, *, from_beginning: bool = False,
                 kafka_options: Mapping[str, Any] | None = None, buffer: int = 1024) -> None:
        self.thread_id = thread_id
        self._queue: asyncio.Queue[EventEnvelope] = asyncio.Queue(maxsize=buffer)
        self._tail = TopicTail(bootstrap, topic, self._on_record, from_beginning=from_beginning,
                               partitions=lambda count: [partition_for(thread_id, count)],
                               kafka_options=kafka_options)

    async def _on_record(self, record: ConsumerRecord[bytes, bytes]) -> None:
        if record.key is None or record.key.decode("utf-8", "replace") != self.thread_id:
            return  # another thread on the same partition
        event = parse_event(record)
        if event is not None:
            await self._queue.put(event)  # back-pressure: the tail waits while the agent is behind

    async def __aenter__(self) -> EventStream:
        await self._tail.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._tail.stop()

    def __aiter__(self) -> AsyncIterator[EventEnvelope]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[EventEnvelope]:
        while True:
            yield await self._queue.get()

    async def next(self, timeout: float | None = None) -> EventEnvelope:
        """The next event; ``TimeoutError`` after ``timeout`` seconds without one."""
        return await asyncio.wait_for(self._queue.get(), timeout)
