"""Decoding records from the input topics, with a machine-readable reason for everything refused.

Every failure raises ``WireDecodeError(reason, detail)``; the runtime sends the original bytes to the dead-letter
topic with that reason. Encoding is compact JSON of the models' wire (alias) form.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from om_stream.errors import WireDecodeError
from om_stream.wire.commands import COMMAND_SCHEMA, CommandRecord
from om_stream.wire.context import ContextRecord
from om_stream.wire.messages import MESSAGE_SCHEMA, MessageRecord

__all__ = ["decode_command", "decode_json", "decode_message", "encode"]

M = TypeVar("M", bound=BaseModel)


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
    if value is None:
        raise WireDecodeError("invalid_json", "the record has no value")
    if len(value) > max_bytes:
        raise WireDecodeError("oversize", f"{len(value)} bytes is more than the {max_bytes} allowed")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireDecodeError("invalid_utf8", str(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WireDecodeError("invalid_json", str(exc)) from None
    if not isinstance(data, dict):
        raise WireDecodeError("invalid_json", f"expected a JSON object, got {type(data).__name__}")
    return data


def _validate(model: type[M], data: dict[str, Any], schema: str) -> M:
    if data.get("schema") != schema:
        raise WireDecodeError("unknown_schema", f"schema {data.get('schema')!r} is not {schema!r}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])
        raise WireDecodeError("invalid_fields", problems) from None


def _check_key(key: bytes | None, thread_id: str) -> None:
    if key is None:
        raise WireDecodeError("missing_key", "the record key must be the thread id")
    try:
        decoded = key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireDecodeError("invalid_utf8", f"key: {exc}") from None
    if decoded != thread_id:
        raise WireDecodeError("key_mismatch", f"key {decoded!r} is not the thread id {thread_id!r}")


def decode_message(key: bytes | None, value: bytes | None, *, max_bytes: int) -> MessageRecord:
    record = _validate(MessageRecord, decode_json(value, max_bytes), MESSAGE_SCHEMA)
    _check_key(key, record.thread_id)
    return record


def decode_command(key: bytes | None, value: bytes | None, *, max_bytes: int) -> CommandRecord:
    record = _validate(CommandRecord, decode_json(value, max_bytes), COMMAND_SCHEMA)
    _check_key(key, record.thread_id)
    return record
