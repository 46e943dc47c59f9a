"""The records' timers as inputs: a timer that is due (or asked again after a hand-over) is sent to the results topic
at its record's home partition, so the memory agent handles it in order with the record's other inputs.

The wheel (``runtime/timers.py``) holds what the records' states schedule; this module only sends. It never fires a
timer itself: the record's one writer decides what a firing means.
"""

from __future__ import annotations

from om_stream.core.inputs import TimerFired
from om_stream.ports import Clock
from om_stream.runtime.internal_codec import encode_internal
from om_stream.runtime.timers import TimerWheel
from om_stream.runtime.worker.kafka_records import Publication, Publisher
from om_stream.runtime.worker.state_table import RecordTable

__all__ = ["TimerInputs"]


class TimerInputs:
    def __init__(self, publisher: Publisher, topic: str, *, table: RecordTable, timers: TimerWheel,
                 clock: Clock) -> None:
        self.publisher = publisher
        self.topic = topic  # the internal results topic
        self.table = table
        self.timers = timers
        self.clock = clock

    async def send(self, key: str, partition: int, timer: TimerFired) -> None:
        """A timer input for a record, on the results topic at the record's home partition."""
        await self.publisher.send(Publication(self.topic, key.encode(), encode_internal(timer), partition=partition))

    async def send_due(self) -> None:
        """Every timer due now of a record held here (a record no longer held is its new owner's to fire)."""
        for key, timer in self.timers.due(self.clock.now_ms()):
            home = self.table.home(key)
            if home is not None:
                await self.send(key, home, timer)
