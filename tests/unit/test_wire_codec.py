"""The wire codec. Encoding: a context's messages spliced in from their cached JSON give exactly the model's own
JSON, and a required field that is null is written as null (not left out). Decoding: bounded I-JSON, each refusal
with its dead-letter reason (the fuzz and the corpus are in test_wire_fuzz.py)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta, timezone
from types import FrameType
from typing import Any

import pytest

from om_stream.core.messages import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from om_stream.errors import WireDecodeError
from om_stream.runtime.internal_codec import decode_internal
from om_stream.runtime.recall import decode_recall_request
from om_stream.wire.codec import MAX_DEPTH, decode_command, decode_json, decode_message, encode
from om_stream.wire.context import ContextHints, ContextRecord, ContextTokens
from om_stream.wire.dlq import DLQ_REASONS


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


# -- decoding: bounded I-JSON -------------------------------------------------------------------------------------


def _refusal(value: bytes | None, max_bytes: int = 65_536) -> tuple[str, str]:
    with pytest.raises(WireDecodeError) as caught:
        decode_json(value, max_bytes)
    return caught.value.reason, caught.value.detail


def _nested(levels: int, *, objects: bool) -> bytes:
    """A JSON object ``levels`` deep: the outer object, then arrays or objects."""
    opening, closing = (b'{"k":', b"}") if objects else (b"[", b"]")
    return b'{"x":' + opening * (levels - 1) + b"1" + closing * (levels - 1) + b"}"


@pytest.mark.parametrize("objects", [False, True], ids=["arrays", "objects"])
def test_nesting_is_allowed_to_the_limit_and_refused_past_it(objects: bool) -> None:
    assert decode_json(_nested(MAX_DEPTH, objects=objects), 65_536)
    reason, detail = _refusal(_nested(MAX_DEPTH + 1, objects=objects))
    assert reason == "too_deep" and str(MAX_DEPTH + 1) in detail


def test_five_thousand_levels_are_refused_by_the_scan_not_by_the_recursion_limit() -> None:
    deep = _nested(5_000, objects=True)
    assert 30_000 < len(deep) < 40_000  # the record that used to crash the memory agent
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + 10_000)  # a parser allowed to recurse would now parse it instead of refusing it
    try:
        assert _refusal(deep)[0] == "too_deep"
    finally:
        sys.setrecursionlimit(old)


def test_brackets_and_escaped_quotes_inside_strings_do_not_count_as_nesting() -> None:
    text = '{"x": "\\" ' + "[{" * 500 + '", "[": ["]]]\\\\", "{"]}'
    assert decode_json(text.encode(), 65_536) == json.loads(text)


def test_a_parser_that_runs_out_of_stack_refuses_as_too_deep() -> None:
    """The backstop: a record within the limit, decoded where little stack is left, is refused, not raised."""
    frames = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        frames, frame = frames + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(frames + 30)
    try:
        with pytest.raises(WireDecodeError) as caught:
            decode_json(_nested(MAX_DEPTH, objects=False), 65_536)
    finally:
        sys.setrecursionlimit(old)
    assert caught.value.reason == "too_deep"


@pytest.mark.parametrize(("value", "reason"), [
    (None, "invalid_json"), (b"", "invalid_json"), (b"[]", "invalid_json"), (b"null", "invalid_json"),
    (b'{"a": NaN}', "invalid_json"), (b'{"a": Infinity}', "invalid_json"), (b'{"a": -Infinity}', "invalid_json"),
    (b'{"a": 1e400}', "invalid_json"), (b'{"a": -1e400}', "invalid_json"),
    (b'{"a": 9007199254740992}', "invalid_json"), (b'{"a": -9007199254740992}', "invalid_json"),
    (b'{"a": ' + b"1" * 5000 + b"}", "invalid_json"), (b'{"a": 1, "a": 1}', "invalid_json"),
    (b'{"a": {"b": 1, "b": 2}}', "invalid_json"),
    (b'{"a": "\\ud800"}', "invalid_utf8"), (b'{"a": "\\udc00\\ud800"}', "invalid_utf8"),
    (b'{"\\ud83d": 1}', "invalid_utf8"), (b'{"a": ["ok", {"b": "x\\udfffy"}]}', "invalid_utf8"),
    (b'{"a": "\xed\xa0\x80"}', "invalid_utf8"), (b"\xef\xbb\xbf{}", "invalid_json"),
    (b"[" * 60_000, "too_deep"), (b'{"a": "' + b"x" * 70_000 + b'"}', "oversize"),
], ids=lambda v: repr(v)[:40] if isinstance(v, bytes) else str(v))
def test_what_i_json_excludes_is_refused(value: bytes | None, reason: str) -> None:
    assert _refusal(value)[0] == reason


def test_the_edges_i_json_allows_are_read() -> None:
    text = ('{"max": 9007199254740991, "min": -9007199254740991, "big": 1.7976931348623157e308, "tiny": 5e-324, '
            '"e21": 1E21, "pair": "\\ud834\\udd1e", "text": "\\\\ud800 is text, not an escape", "zero": -0.0}')
    assert decode_json(text.encode(), 65_536) == json.loads(text)
    assert decode_json(text.encode(), 65_536)["pair"] == "𝄞"


@pytest.mark.parametrize(("created_at", "accepted"), [
    ("0001-01-02T00:00:00Z", True), ("0001-01-01T23:59:59Z", False), ("0001-01-02T00:00:00+01:00", False),
    ("9999-12-30T23:59:59.999999Z", True), ("9999-12-31T00:00:00Z", False), ("9999-12-30T23:00:00-01:00", False),
])
def test_a_message_time_must_be_one_every_time_zone_can_show(created_at: str, accepted: bool) -> None:
    record = {"schema": "om.message/v1", "message_id": "m", "thread_id": "t", "resource_id": "r", "role": "user",
              "created_at": created_at, "parts": []}
    if accepted:
        decode_message(b"t", json.dumps(record).encode(), max_bytes=4096).to_message().created_at.astimezone(
            timezone(timedelta(hours=-23, minutes=-59)))
        return
    with pytest.raises(WireDecodeError) as caught:
        decode_message(b"t", json.dumps(record).encode(), max_bytes=4096)
    assert caught.value.reason == "invalid_fields" and "created_at" in caught.value.detail


def test_every_decoder_reads_through_the_same_bounds() -> None:
    deep = b'{"type": "timer", "schema": "om.message/v1", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    for decode in (lambda v: decode_message(b"t", v, max_bytes=65_536),
                   lambda v: decode_command(b"t", v, max_bytes=65_536),
                   lambda v: decode_recall_request(v, 65_536), decode_internal):
        with pytest.raises(WireDecodeError) as caught:
            decode(deep)
        assert caught.value.reason == "too_deep"


def test_too_deep_is_a_dead_letter_reason() -> None:
    assert "too_deep" in DLQ_REASONS
