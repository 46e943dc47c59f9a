"""The wire encoder: a context's messages spliced in from their cached JSON give exactly the model's own JSON, and a
required field that is null is written as null (not left out)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from om_stream.core.messages import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextHints, ContextRecord, ContextTokens


def _messages() -> list[Message]:
    at = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    return [
        Message(message_id="m1", thread_id="t", resource_id="r", role="user", created_at=at,
                parts=(TextPart(text="é \"quoted\" \n line 💡"), ImagePart(url="https://x/y.png", width=640))),
        Message(message_id="m2", thread_id="t", resource_id="r", role="assistant", created_at=at, model="m/x",
                parts=(ReasoningPart(text="think"), ToolCallPart(tool_call_id="c1", tool_name="search",
                                                                 args={"q": "a", "n": [1, 2.5, None]}))),
        Message(message_id="m3", thread_id="t", resource_id="r", role="tool", created_at=at,
                metadata={"k": {"nested": True}},
                parts=(ToolResultPart(tool_call_id="c1", tool_name="search", result=["r1", {"big": 2**40}]),
                       FilePart(data="AAAA", filename="a.txt", size_bytes=3))),
    ]


def _context(messages: list[Message], through: str | None) -> ContextRecord:
    return ContextRecord(thread_id="t", resource_id="r", version=3, through_message_id=through,
                         observations="<observations>\n* 🔴 fact\n</observations>",
                         hints=ContextHints(current_task="task"), messages=messages,
                         system_blocks=["block one", "block two"], continuation=None,
                         tokens=ContextTokens(messages=12, observations=4), generation=1)


def _model_json(record: ContextRecord) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(record.model_dump_json(by_alias=True, exclude_none=True))
    return loaded


def test_a_context_encodes_to_the_models_own_json() -> None:
    record = _context(_messages(), "m3")
    assert json.loads(encode(record)) == _model_json(record)


def test_a_context_without_messages_is_valid_json() -> None:
    record = _context([], "m3")
    assert json.loads(encode(record)) == _model_json(record)


def test_a_required_null_is_written_and_an_optional_null_is_left_out() -> None:
    decoded = json.loads(encode(_context(_messages(), None)))
    assert "through_message_id" in decoded and decoded["through_message_id"] is None
    assert "continuation" not in decoded and "thread_title" not in decoded


def test_the_cached_message_json_is_the_messages_json() -> None:
    for message in _messages():
        assert json.loads(message.compact_json) == json.loads(message.model_dump_json(by_alias=True,
                                                                                      exclude_none=True))
