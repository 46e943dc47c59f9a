"""The memory agent's decoding of its input records (``runtime/worker/decoding.py``): every record's bytes are
parsed once and validated once, whatever the scope, and the core's message is the validated record's.

The parses and validations are counted as they happen (``sys.setprofile`` sees every call of the JSON decoder and
of pydantic's ``model_validate``), with nothing of the decoder replaced."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest
from pydantic import BaseModel

from om_stream.core.config import OMConfig
from om_stream.core.inputs import MessageAppended, ObserveNow
from om_stream.core.messages import Message
from om_stream.errors import WireDecodeError
from om_stream.runtime.worker.decoding import InputDecoder
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import decode_message

KAFKA = KafkaSettings()
MESSAGE = {"schema": "om.message/v1", "message_id": "m1", "thread_id": "t1", "resource_id": "r1", "role": "user",
           "created_at": "2026-03-02T09:00:00+01:00", "author": {"id": "u-7", "name": "Ana", "kind": "human"},
           "parts": [{"type": "text", "text": "the launch moves to friday"},
                     {"type": "tool-call", "tool_call_id": "c1", "tool_name": "calendar", "args": {"day": 5}}]}
COMMAND = {"schema": "om.command/v1", "command": "observe", "command_id": "k1", "thread_id": "t1",
           "resource_id": "r1", "force": True}


@contextmanager
def counted_calls(**functions: Callable[..., Any]) -> Iterator[Counter[str]]:
    """How often each of ``functions`` (Python functions) was entered while the block ran, by the given names."""
    names = {function.__code__: name for name, function in functions.items()}
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code in names:
            calls[names[frame.f_code]] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(previous)


def _decode(scope: str, record: SourceRecord) -> tuple[Any, Counter[str]]:
    decoder = InputDecoder(KAFKA, OMConfig.parse({"scope": scope}).resolve())
    with counted_calls(parse=json.JSONDecoder.decode, validate=BaseModel.model_validate.__func__,
                       validate_json=BaseModel.model_validate_json.__func__) as calls:
        arrival = decoder.decode(record)
    return arrival, calls


def _record(topic: str, key: bytes, value: dict[str, Any], headers: list[tuple[str, bytes]] | None = None,
            ) -> SourceRecord:
    return SourceRecord(topic=topic, partition=3, offset=41, key=key, value=json.dumps(value).encode(),
                        headers=headers or [])


RE_KEYED = [("om_source_topic", KAFKA.topic_messages.encode()), ("om_source_partition", b"0"),
            ("om_source_offset", b"7")]


@pytest.mark.parametrize(("scope", "record"), [
    ("thread", _record(KAFKA.topic_messages, b"t1", MESSAGE)),
    ("resource", _record(KAFKA.topic_records, b"r1", MESSAGE, RE_KEYED)),
], ids=["thread scope", "resource scope, re-keyed"])
def test_a_message_is_parsed_once_and_validated_once(scope: str, record: SourceRecord) -> None:
    arrival, calls = _decode(scope, record)
    assert calls == Counter(parse=1, validate=1)
    assert isinstance(arrival.input, MessageAppended)
    assert arrival.key == ("t1" if scope == "thread" else "r1") and arrival.resource_id == "r1"
    assert arrival.source is record


@pytest.mark.parametrize(("scope", "record"), [
    ("thread", _record(KAFKA.topic_commands, b"t1", COMMAND)),
    ("resource", _record(KAFKA.topic_records, b"r1", COMMAND, [("om_source_topic", KAFKA.topic_commands.encode())])),
], ids=["thread scope", "resource scope, re-keyed"])
def test_a_command_is_parsed_once_and_validated_once(scope: str, record: SourceRecord) -> None:
    arrival, calls = _decode(scope, record)
    assert calls == Counter(parse=1, validate=1)
    assert arrival.input == ObserveNow("t1", force=True)


def test_the_core_message_is_the_validated_record_s_own_fields() -> None:
    record = decode_message(b"t1", json.dumps(MESSAGE).encode(), max_bytes=65_536)
    message = record.to_message()
    validated_again = Message.model_validate(record.model_dump(exclude={"schema_"}))  # what it was made of before
    assert type(message) is Message
    assert message == validated_again
    assert message.model_fields_set == validated_again.model_fields_set
    assert message.compact_json == validated_again.compact_json
    assert message.created_at_ms == validated_again.created_at_ms
    # constructed from the record's values, not validated again: the very part and author objects
    assert message.parts[1] is record.parts[1] and message.author is record.author


def test_a_re_keyed_record_that_is_not_json_is_refused_for_that_reason() -> None:
    record = SourceRecord(topic=KAFKA.topic_records, partition=0, offset=1, key=b"r1", value=b"{not json",
                          headers=RE_KEYED)
    decoder = InputDecoder(KAFKA, OMConfig.parse({"scope": "resource"}).resolve())
    with pytest.raises(WireDecodeError) as refused:
        decoder.decode(record)
    assert refused.value.reason == "invalid_json"


def test_a_re_keyed_record_from_another_topic_is_no_input_whatever_its_value() -> None:
    record = SourceRecord(topic=KAFKA.topic_records, partition=0, offset=1, key=b"r1", value=b"{not json",
                          headers=[("om_source_topic", b"om.elsewhere")])
    decoder = InputDecoder(KAFKA, OMConfig.parse({"scope": "resource"}).resolve())
    with pytest.raises(WireDecodeError) as refused:
        decoder.decode(record)
    assert refused.value.reason == "unknown_schema"
