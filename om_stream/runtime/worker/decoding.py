"""The memory agent's inputs from Kafka records: each record of an input topic becomes one ``Arrival`` for its
record (thread, or resource in resource scope), or a ``WireDecodeError`` that says why it cannot (the memory agent
dead-letters it with that reason).

A record's bytes are parsed once and validated once, whatever the scope: a record the ingest agent re-keyed
(resource scope) names its original key inside its value, read from the same parse that is then validated, and the
validated wire record becomes the core's message without a second validation (``MessageRecord.to_message``).
"""

from __future__ import annotations

import time

from om_stream.core.config import ResolvedConfig
from om_stream.core.engine import record_key
from om_stream.core.erasure import EraseIndexDone, ErasePart, ErasePartDone, EraseRequested
from om_stream.core.inputs import (
    ClearRecord,
    Input,
    MessageAppended,
    ModelResultArrived,
    ObserveNow,
    OverrideThresholds,
    ReflectNow,
    ReportProgress,
    RestoreRecord,
    TimerFired,
)
from om_stream.errors import WireDecodeError
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.internal_codec import decode_internal
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import decode_json, read_command, read_message
from om_stream.wire.commands import CommandRecord

__all__ = ["InputDecoder"]


class InputDecoder:
    """The input a record of any of the memory agent's topics carries, for its record."""

    def __init__(self, kafka: KafkaSettings, config: ResolvedConfig) -> None:
        self.kafka = kafka
        self.config = config

    def decode(self, record: SourceRecord) -> Arrival[SourceRecord]:
        """Raises ``WireDecodeError`` for a record that is no input."""
        topic = self.kafka
        if record.topic == topic.topic_model_results:
            return self._internal(record)
        origin, thread_key = record.topic, record.key
        if record.topic == topic.topic_records:  # resource scope: validated and re-keyed by the ingest agent
            origin = dict(record.headers).get("om_source_topic", topic.topic_messages.encode()).decode()
        if origin not in (topic.topic_messages, topic.topic_commands):
            raise WireDecodeError("unknown_schema", f"records from {record.topic!r} are not inputs")
        data = decode_json(record.value, topic.max_message_bytes)
        if record.topic == topic.topic_records:
            # the original key travels inside the value (the thread's, or the resource's for an erase of a
            # resource): checked against itself
            original = (data.get("thread_id", "") if origin == topic.topic_messages else
                        data.get("thread_id") or data.get("resource_id") or "")
            thread_key = str(original).encode()
        if origin == topic.topic_messages:
            message = read_message(thread_key, data).to_message()
            key = record_key(self.config.scope, message.thread_id, message.resource_id)
            return Arrival(key, message.resource_id, MessageAppended(message), record)
        command = read_command(thread_key, data)
        if command.command == "erase":
            return self._erase(command, record)
        assert command.thread_id is not None  # the wire contract: only an erase of a resource leaves it out
        resource = command.resource_id or command.thread_id
        return Arrival(record_key(self.config.scope, command.thread_id, resource), resource,
                       _command_input(command), record)

    def _internal(self, record: SourceRecord) -> Arrival[SourceRecord]:
        if record.key is None or record.value is None:
            raise WireDecodeError("missing_key", "internal records carry the record key")
        internal = decode_internal(record.value)
        if not isinstance(internal, ModelResultArrived | TimerFired | ErasePart | ErasePartDone
                          | EraseIndexDone | RestoreRecord):
            raise WireDecodeError("invalid_fields", "only model results, timers, restores and an erase's steps "
                                                    "belong on the results topic")
        try:
            key = record.key.decode()
        except UnicodeDecodeError as exc:
            raise WireDecodeError("invalid_utf8", f"key: {exc}") from None
        if isinstance(internal, RestoreRecord):  # om-stream import: the only input here that makes a record
            if internal.state.key != key:
                raise WireDecodeError("invalid_fields", "a restore is keyed by the record of its state")
            return Arrival(key, internal.state.resource_id, internal, record)
        return Arrival(key, "", internal, record)

    def _erase(self, command: CommandRecord, record: SourceRecord) -> Arrival[SourceRecord]:
        """An erase command: a thread's (keyed by its record), or a resource's (keyed by the resource: in thread
        scope its coordinator is the resource key's partition)."""
        assert command.scope is not None  # the wire contract: an erase names its scope
        requested = command.requested_at
        requested_at = (int(requested.timestamp() * 1000) if requested is not None
                        else record.timestamp_ms or int(time.time() * 1000))
        erase = EraseRequested(command.command_id, command.scope, command.resource_id, command.thread_id,
                               requested_at)
        if command.scope == "resource":
            assert command.resource_id is not None
            return Arrival(command.resource_id, command.resource_id, erase, record)
        assert command.thread_id is not None
        key = record_key(self.config.scope, command.thread_id, command.resource_id or command.thread_id)
        return Arrival(key, command.resource_id or "", erase, record)


def _command_input(command: CommandRecord) -> Input:
    assert command.thread_id is not None  # the wire contract: only an erase of a resource leaves it out
    if command.command == "observe":
        return ObserveNow(command.thread_id, force=bool(command.force))
    if command.command == "reflect":
        return ReflectNow(command.guidance, command.thread_id)
    if command.command == "override":
        return OverrideThresholds(command.message_tokens, command.observation_tokens, command.thread_id,
                                  replace=bool(command.replace), retention_days=command.retention_days)
    if command.command == "progress":
        return ReportProgress(command.thread_id, command.command_id, command.through_message_id)
    return ClearRecord(command.thread_id)
