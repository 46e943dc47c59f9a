"""Decoding records from the input topics, with a machine-readable reason for everything refused.

Every failure raises ``WireDecodeError(reason, detail)``; the runtime sends the original bytes to the dead-letter
topic with that reason. Encoding is compact JSON of the models' wire (alias) form.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from om_stream.errors import WireDecodeError
from om_stream.wire.commands import COMMAND_SCHEMA, CommandRecord
from om_stream.wire.messages import MESSAGE_SCHEMA, MessageRecord

__all__ = ["decode_command", "decode_json", "decode_message", "encode"]

M = TypeVar("M", bound=BaseModel)


def encode(model: BaseModel) -> bytes:
    return model.model_dump_json(by_alias=True, exclude_none=True).encode()


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
