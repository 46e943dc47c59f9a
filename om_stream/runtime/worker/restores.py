"""How ``om-stream import`` hands a worker deployment each imported record's state (the importer's
``RecordRestorer``): as an internal restore record on the results topic, at the record's home partition.

A record has one writer, the memory agent that owns its home partition, so a state is not written into the table
from outside: it is an input of the record (``core.inputs.RestoreRecord``), applied by the owner through its host
in order with the record's other inputs, which also publishes the record's contexts on the context topic. The
results topic is the memory agent's internal input addressed by record (model results and timers travel it too);
a restore is om-stream's own tool talking to its memory agents, not part of the agents' command contract, so it
adds nothing to ``om.command/v1``. Like every internal record, it is checked field by field when it is read.

The home partition is where the record's inputs land: the Java partitioner (murmur2) of its key, as every
om-stream client and the ingest agent partition. A worker that starts later applies what is waiting for it.
A state larger than the brokers take in one record (``message.max.bytes``, 1 MiB by default) cannot be restored:
the table's changelog could not hold it either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from om_stream.client.partitioning import partition_for
from om_stream.client.security import start_checked
from om_stream.core.inputs import RestoreRecord
from om_stream.core.state import RecordState
from om_stream.errors import StorageError
from om_stream.runtime.internal_codec import encode_internal
from om_stream.settings import KafkaSettings

__all__ = ["KafkaRestorer"]



class KafkaRestorer:
    """``async with KafkaRestorer(kafka, options) as restorer: await restorer.restore(state)``; each restore is
    acknowledged by the brokers before it returns."""

    def __init__(self, kafka: KafkaSettings, client_options: Mapping[str, Any]) -> None:
        self.kafka = kafka
        self.client_options = dict(client_options)
        self._producer: AIOKafkaProducer | None = None
        self._partitions = 0
        self.sent = 0

    async def __aenter__(self) -> KafkaRestorer:
        producer = AIOKafkaProducer(bootstrap_servers=self.kafka.bootstrap, acks="all",
                                    max_request_size=max(self.kafka.max_message_bytes, 1_048_576),
                                    **self.client_options)
        await start_checked(producer, self.kafka.bootstrap, self.client_options, close=producer.stop)
        self._producer = producer
        topic = self.kafka.topic_model_results
        partitions = await producer.partitions_for(topic)
        if len(partitions) != self.kafka.partitions:
            await producer.stop()
            raise StorageError(f"topic {topic!r} has {len(partitions)} partitions, the deployment "
                               f"{self.kafka.partitions} (OM_KAFKA_PARTITIONS): a record's home would be wrong",
                               transient=False)
        self._partitions = len(partitions)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def restore(self, state: RecordState) -> None:
        assert self._producer is not None, "KafkaRestorer is used inside 'async with'"
        value = encode_internal(RestoreRecord(state))
        try:
            await self._producer.send_and_wait(self.kafka.topic_model_results, value, key=state.key.encode(),
                                               partition=partition_for(state.key, self._partitions))
        except KafkaError as exc:
            raise StorageError(f"the state of record {state.key!r} ({len(value)} bytes) was not taken by the "
                               f"brokers: {type(exc).__name__}: {exc}", transient=False) from exc
        self.sent += 1
