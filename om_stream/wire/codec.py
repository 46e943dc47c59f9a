"""Decoding records from the input topics, with a machine-readable reason for everything refused.

Every failure raises ``WireDecodeError(reason, detail)``; the runtime sends the original bytes to the dead-letter
topic with that reason. No input makes a decoder raise anything else: a record is untrusted bytes, and an exception
that escapes a decoder stops the agent that reads the partition. Encoding is compact JSON of the models' wire
(alias) form.

What is read is I-JSON (RFC 7493), bounded: at most ``max_bytes`` of UTF-8 (``oversize``, ``invalid_utf8``), at
most ``MAX_DEPTH`` levels of nesting (``too_deep``), then ``invalid_json`` for anything that is not one JSON object
or that I-JSON excludes: ``NaN``/``Infinity``, a number beyond a double, an integer beyond ±(2^53−1), a name twice
in one object. A string with a lone surrogate (an unpaired ``\\ud800`` escape) is ``invalid_utf8``: it has no UTF-8
form, so every later encoding of it would fail. A message's ``created_at`` must also be a time every time zone can
show (``invalid_fields``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import accumulate
from typing import Any, NoReturn, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from om_stream.core.messages import MAX_SAFE_INTEGER
from om_stream.errors import WireDecodeError
from om_stream.wire.commands import COMMAND_SCHEMA, CommandRecord, record_key_of
from om_stream.wire.context import ContextRecord
from om_stream.wire.messages import MESSAGE_SCHEMA, MessageRecord

__all__ = ["MAX_DEPTH", "MAX_SAFE_INTEGER", "decode_command", "decode_json", "decode_message", "encode", "read_command",
           "read_message"]

M = TypeVar("M", bound=BaseModel)

# Ten times the deepest valid vector (a message with nested tool args, 6 levels), and shallow enough that neither
# the parser nor pydantic nor a later encoder recurses anywhere near Python's limit.
MAX_DEPTH = 64


def encode(model: BaseModel) -> bytes:
    """Compact JSON of the wire form: optional fields left out when null, required nullable ones written as null.

    A context's messages are spliced in from each message's own cached JSON (``Message.compact_json``): a thread's
    unobserved messages appear in every context published until they are observed, so they are encoded once."""
    if isinstance(model, ContextRecord):
        head = model.model_dump_json(by_alias=True, exclude_none=True, exclude={"messages"})
        messages = ",".join(message.compact_json for message in model.messages)
        return f'{_with_required_nulls(model, head)[:-1]},"messages":[{messages}]}}'.encode()
    return _with_required_nulls(model, model.model_dump_json(by_alias=True, exclude_none=True)).encode()


def _with_required_nulls(model: BaseModel, dumped: str) -> str:
    nulls = [name for name in _required_nullable(type(model)) if getattr(model, name) is None]
    if not nulls:
        return dumped
    fields = type(model).model_fields
    extra = ",".join(f'"{fields[name].alias or name}":null' for name in nulls)
    return f"{dumped[:-1]},{extra}}}" if dumped != "{}" else f"{{{extra}}}"


@cache
def _required_nullable(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(name for name, field in model.model_fields.items()
                 if field.is_required() and _admits_none(field.annotation))


def _admits_none(annotation: Any) -> bool:
    return annotation is None or type(None) in get_args(annotation)


def decode_json(value: bytes | None, max_bytes: int) -> dict[str, Any]:
    """One bounded I-JSON object from untrusted bytes (see the module docstring for what is refused, and why)."""
    if value is None:
        raise WireDecodeError("invalid_json", "the record has no value")
    if len(value) > max_bytes:
        raise WireDecodeError("oversize", f"{len(value)} bytes is more than the {max_bytes} allowed")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireDecodeError("invalid_utf8", str(exc)) from None
    # no deeper than its count of opening brackets: most records need no scan at all
    if value.count(b"[") + value.count(b"{") > MAX_DEPTH and (depth := _nesting_depth(value)) > MAX_DEPTH:
        raise WireDecodeError("too_deep", f"nested {depth} levels deep; at most {MAX_DEPTH} are allowed")
    try:
        data = _I_JSON.decode(text)
    except json.JSONDecodeError as exc:
        raise WireDecodeError("invalid_json", str(exc)) from None
    except RecursionError:
        # the scan keeps the parser within MAX_DEPTH levels: this is for a caller whose own stack is nearly full
        raise WireDecodeError("too_deep", "nested too deep for the parser") from None
    if not isinstance(data, dict):
        raise WireDecodeError("invalid_json", f"expected a JSON object, got {type(data).__name__}")
    if _SURROGATE_ESCAPE.search(value) and (where := _lone_surrogate(data)) is not None:
        raise WireDecodeError("invalid_utf8", f"a lone surrogate in {where}: it has no UTF-8 form")
    return data


# A JSON string (escapes included), then everything but brackets: what is left of valid JSON is its bracket
# structure. On invalid JSON the scan may miscount, which only changes the reason it is refused for.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET = re.compile(rb"[^\[\]{}]+")
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a parsed str, a paired surrogate is already one code point


def _nesting_depth(value: bytes) -> int:
    """The deepest nesting of the JSON text, counted without recursion (in C, over its brackets only)."""
    brackets = _NOT_A_BRACKET.sub(b"", _STRING.sub(b"", value))
    return max(accumulate(memoryview(brackets.translate(_DEPTH_STEP)).cast("b")), default=0)


def _object_with_unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # a parser that keeps the first of two thread_id or resource_id names would see another record than we do
    data = dict(pairs)
    if len(data) != len(pairs):
        twice = next(name for name, count in Counter(name for name, _ in pairs).items() if count > 1)
        raise WireDecodeError("invalid_json", f"the name {twice[:80]!r} appears twice in one object")
    return data


def _safe_integer(digits: str) -> int:
    # the length test comes first: int() itself refuses more than 4,300 digits with a ValueError
    if len(digits.lstrip("-")) > len(str(MAX_SAFE_INTEGER)) or abs(number := int(digits)) > MAX_SAFE_INTEGER:
        raise WireDecodeError("invalid_json", f"the integer {digits[:24]}{'…' if len(digits) > 24 else ''} "
                                              "is beyond ±(2^53−1)")
    return number


def _finite_number(digits: str) -> float:
    number = float(digits)
    if math.isinf(number):  # a pydantic encoder would write it as null: the value would change on the way through
        raise WireDecodeError("invalid_json", f"the number {digits[:24]}{'…' if len(digits) > 24 else ''} "
                                              "is beyond a double")
    return number


def _refuse_constant(name: str) -> NoReturn:
    raise WireDecodeError("invalid_json", f"{name} is not a JSON number")


_I_JSON = json.JSONDecoder(object_pairs_hook=_object_with_unique_names, parse_int=_safe_integer,
                           parse_float=_finite_number, parse_constant=_refuse_constant)


def _lone_surrogate(node: Any, path: str = "the record") -> str | None:
    """Where a string holds an unpaired surrogate, or None. Recursion is bounded: the depth was checked."""
    if isinstance(node, str):
        return path if _SURROGATE.search(node) else None
    if isinstance(node, dict):
        for name, item in node.items():
            if _SURROGATE.search(name):
                return f"a name in {path}"
            if (found := _lone_surrogate(item, name[:80])) is not None:
                return found
    elif isinstance(node, list):
        for item in node:
            if (found := _lone_surrogate(item, path)) is not None:
                return found
    return None


def _validate(model: type[M], data: dict[str, Any], schema: str) -> M:
    if data.get("schema") != schema:
        raise WireDecodeError("unknown_schema", f"schema {data.get('schema')!r} is not {schema!r}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])
        raise WireDecodeError("invalid_fields", problems) from None


def _check_key(key: bytes | None, thread_id: str, what: str = "thread id") -> None:
    if key is None:
        raise WireDecodeError("missing_key", f"the record key must be the {what}")
    try:
        decoded = key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireDecodeError("invalid_utf8", f"key: {exc}") from None
    if decoded != thread_id:
        raise WireDecodeError("key_mismatch", f"key {decoded!r} is not the {what} {thread_id!r}")


def decode_message(key: bytes | None, value: bytes | None, *, max_bytes: int) -> MessageRecord:
    return read_message(key, decode_json(value, max_bytes))


def read_message(key: bytes | None, data: dict[str, Any]) -> MessageRecord:
    """A message record from its JSON already read (``decode_json``): for a caller that read it for something
    else first (a re-keyed record's thread id), so that its bytes are parsed once."""
    record = _validate(MessageRecord, data, MESSAGE_SCHEMA)
    _check_key(key, record.thread_id)
    _check_shown_anywhere(record.created_at)
    return record


# A UTC offset is less than a day, so an instant a day inside datetime's range can be shown in every time zone.
_EARLIEST = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
_LATEST = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)


def _check_shown_anywhere(created_at: datetime) -> None:
    # the Observer's transcript shows each message's time in the configured zone: 0001-01-01T00:00+01:00 is a
    # valid RFC 3339 time that Python cannot convert, and it would fail every observation of its thread
    if not _EARLIEST <= created_at <= _LATEST:
        raise WireDecodeError("invalid_fields", f"created_at: {created_at.isoformat()} is not between "
                                                f"{_EARLIEST.date()} and {_LATEST.date()} (UTC)")


def decode_command(key: bytes | None, value: bytes | None, *, max_bytes: int) -> CommandRecord:
    return read_command(key, decode_json(value, max_bytes))


def read_command(key: bytes | None, data: dict[str, Any]) -> CommandRecord:
    """A command record from its JSON already read (see ``read_message``)."""
    record = _validate(CommandRecord, data, COMMAND_SCHEMA)
    _check_key(key, record_key_of(record), "thread id" if record.thread_id is not None else "resource id")
    return record
