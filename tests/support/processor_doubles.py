"""What the memory agent's batch driver (``MemoryProcessor``) is given in broker-less unit tests: a state table in a
dict, a producer that keeps what it is asked to send, and a word counter for tokens."""

from __future__ import annotations

from om_stream.core.state import RecordState
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.worker.kafka_records import Publication, SourceRecord

__all__ = ["Producer", "Table", "words"]


def words(text: str) -> int:
    return len(text.split())


class Table:
    def __init__(self) -> None:
        self.states: dict[str, RecordState] = {}

    def get(self, arrival: Arrival[SourceRecord]) -> RecordState | None:
        return self.states.get(arrival.key)

    def set(self, arrival: Arrival[SourceRecord], state: RecordState) -> None:
        self.states[arrival.key] = state


class Producer:
    def __init__(self) -> None:
        self.sent: list[Publication] = []

    async def send(self, publication: Publication) -> None:
        self.sent.append(publication)

    def to(self, topic: str) -> list[Publication]:
        return [p for p in self.sent if p.topic == topic]
