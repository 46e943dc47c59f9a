"""How the memory side takes its inputs in: the memory agent's batches, and in resource scope the ``ingest`` agent's
re-keying of messages and commands by resource.

Every batch is handled under the offset ledger's lock (a rebalance waits for it), admitted in sequence by the
hand-over (records Faust dropped are read again first), and marked handled only once the processor has committed
it; a batch fenced off is not, and its records are read again from the committed offset by whoever owns them
(``handover``). In resource scope a message or command is validated here, re-keyed by its resource id onto
``om.records`` with where it came from, or dead-lettered; the memory agent then reads it like any input.
"""

from __future__ import annotations

from collections.abc import Sequence

from faust.types import EventT

from om_stream.errors import WireDecodeError
from om_stream.observability.metrics import Metrics
from om_stream.runtime.worker.handover import Handover
from om_stream.runtime.worker.kafka_records import Publication, Publisher, dead_letter
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.runtime.worker.processor import MemoryProcessor
from om_stream.runtime.worker.records import header_list, source_record
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import decode_command, decode_message

__all__ = ["Ingest"]


class Ingest:
    def __init__(self, kafka: KafkaSettings, metrics: Metrics, *, offsets: OffsetLedger, handover: Handover,
                 processor: MemoryProcessor, publisher: Publisher) -> None:
        self.kafka = kafka
        self.metrics = metrics
        self.offsets = offsets
        self.handover = handover
        self.processor = processor
        self.publisher = publisher
        self.handling = 0  # batches the memory and ingest agents have in hand (waiting for the ledger's lock too)

    async def memory_batch(self, events: Sequence[EventT[bytes]]) -> None:
        """A batch of the memory agent's inputs, folded into the records' states by the processor."""
        self.handling += 1
        try:
            # the ledger's lock for the whole batch: a rebalance waits for it. A batch fenced off (read before a
            # rebalance, or by a member the group dropped: membership.py) is not handled; its records are read
            # again from the committed offset by whoever owns them now
            async with self.offsets.batch():
                records = await self.handover.admit([source_record(event) for event in events])
                if records and await self.processor.process(records):
                    self.offsets.handled((r.topic, r.partition, r.offset) for r in records)
        finally:
            self.handling -= 1

    async def resource_event(self, event: EventT[bytes]) -> None:
        """Resource scope: a message or command of the agents, re-keyed by resource (or dead-lettered)."""
        self.handling += 1
        try:
            async with self.offsets.batch():
                if self.handover.current(event) and await self.handover.admit([source_record(event)]):
                    await self._rekey(event)
                    message = event.message
                    self.offsets.handled([(message.topic, message.partition, message.offset)])
        finally:
            self.handling -= 1

    async def _rekey(self, event: EventT[bytes]) -> None:
        """Validate, then re-key by resource id so one record owner sees all its threads."""
        kafka = self.kafka
        message = event.message
        key, value = message.key, message.value
        try:
            if message.topic == kafka.topic_messages:
                resource = decode_message(key, value, max_bytes=kafka.max_message_bytes).resource_id
            else:
                command = decode_command(key, value, max_bytes=kafka.max_message_bytes)
                if command.resource_id is None:
                    raise WireDecodeError("invalid_fields", "resource scope: commands need resource_id")
                resource = command.resource_id
        except WireDecodeError as exc:
            await self.publisher.send(dead_letter(kafka, self.metrics, source_record(event), exc.reason, exc.detail))
            return
        # where it came from: its topic, and its position in it (an erase's fence is defined on om.messages)
        await self.publisher.send(Publication(
            kafka.topic_records, resource.encode(), value or b"",
            [*header_list(message.headers), ("om_source_topic", message.topic.encode()),
             ("om_source_partition", str(message.partition).encode()),
             ("om_source_offset", str(message.offset).encode())]))
