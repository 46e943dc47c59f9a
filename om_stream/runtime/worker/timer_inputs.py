"""The records' timers as inputs: a timer that is due (or asked again after a hand-over) is sent to the results topic
at its record's home partition, so the memory agent handles it in order with the record's other inputs.

The wheel (``runtime/timers.py``) holds what the records' states schedule; this module only sends. It never fires a
timer itself: the record's one writer decides what a firing means.

Traced, each firing is a trace of its own: an ``om.timer`` producer span, a root (whatever the sending task's
current context holds is not its cause: the firing comes of a state written long before), whose context the record
carries in its headers, so that the firing's ``om.ingest`` and the cycle an idle activation starts continue it. A
firing sent by a take-over links to the span that sent it (``cause``). The span names the timer's kind (a cycle's
timer by the cycle's kind only: a cycle id carries an unkeyed hash of its record), its due time and how late it
went out; the record only as ``OM_TRACING_IDS`` says.
"""

from __future__ import annotations

from typing import Protocol

from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.util.types import AttributeValue

from om_stream.core.inputs import TimerFired
from om_stream.observability.tracing import Tracing
from om_stream.ports import Clock
from om_stream.runtime.internal_codec import encode_internal
from om_stream.runtime.spans import recording, traced
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.kafka_records import Publication, Publisher
from om_stream.trace_headers import inject

__all__ = ["SendTimer", "TimerInputs", "timer_kind"]


class Homes(Protocol):
    def home(self, key: str) -> int | None:
        """The partition of the record held here under ``key`` (None: not held here)."""
        ...


class SendTimer(Protocol):
    async def __call__(self, key: str, partition: int, timer: TimerFired, *, cause: Context | None = None) -> None:
        ...


def timer_kind(timer: str) -> str:
    """What a span may say of a timer's name: ``idle:observation``, ``retention:purge`` as they are; a cycle's
    timer (``deadline:<cycle id>``, ``resend:<cycle id>``) with the cycle's kind only (``deadline:obs``)."""
    purpose, _, what = timer.partition(":")
    return f"{purpose}:{what.split('-', 1)[0]}" if "-" in what else timer


class TimerInputs:
    def __init__(self, publisher: Publisher, topic: str, *, table: Homes, timers: TimerWheel, clock: Clock,
                 tracing: Tracing | None = None, resource_scope: bool = False) -> None:
        self.publisher = publisher
        self.topic = topic  # the internal results topic
        self.table = table
        self.timers = timers
        self.clock = clock
        self.tracing = tracing or Tracing.off()
        self.resource_scope = resource_scope  # a record key is a resource id (else a thread id)

    async def send(self, key: str, partition: int, timer: TimerFired, *, cause: Context | None = None) -> None:
        """A timer input for a record, on the results topic at the record's home partition; traced, in a trace of
        its own (linked to the span of ``cause`` when that is recorded)."""
        value = encode_internal(timer)
        tracing = self.tracing
        if not tracing.enabled:
            await self.publisher.send(Publication(self.topic, key.encode(), value, partition=partition))
            return
        links = [Link(get_current_span(cause).get_span_context())] if recording(cause) else None
        with traced(tracing.tracer, "om.timer", context=Context(), kind=SpanKind.PRODUCER,
                    attributes=self._attributes(key, partition, timer), links=links):
            await self.publisher.send(Publication(self.topic, key.encode(), value, inject(), partition=partition))

    def _attributes(self, key: str, partition: int, timer: TimerFired) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            "messaging.system": "kafka", "messaging.operation.type": "send",
            "messaging.destination.name": self.topic, "messaging.destination.partition.id": str(partition),
            "om.timer.name": timer_kind(timer.timer)}
        if timer.due_at is not None:
            attributes["om.timer.due_at"] = timer.due_at
            attributes["om.timer.late_ms"] = max(0, self.clock.now_ms() - timer.due_at)
        attributes.update(self.tracing.subject_attributes(resource_id=key) if self.resource_scope
                          else self.tracing.subject_attributes(thread_id=key))
        return attributes

    async def send_due(self) -> None:
        """Every timer due now of a record held here (a record no longer held is its new owner's to fire)."""
        for key, timer in self.timers.due(self.clock.now_ms()):
            home = self.table.home(key)
            if home is not None:
                await self.send(key, home, timer)
