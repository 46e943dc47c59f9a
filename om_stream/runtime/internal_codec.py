"""JSON form of the records on the internal topics: model requests, model results, timers, the recall index's
work (index an observation group; forget a cleared record; erase a subject's points; a retention purge's points),
the steps of an erase that spans partitions (``core.erasure``), and restores (``om-stream import``: a record's
state, in its table form, to its home partition of the results topic).

These never leave om-stream (no public schema); they only need to survive a round trip between a memory agent
and a model worker, possibly across a restart or a version of the same deployment.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from om_stream.core.commands import ExpireIndex, IndexForRecall, RequestObservation, RequestReflection
from om_stream.core.erasure import EraseIndexDone, ErasePart, ErasePartDone
from om_stream.core.inputs import ModelResultArrived, RestoreRecord, TimerFired
from om_stream.core.restore import checked_state
from om_stream.errors import WireDecodeError
from om_stream.wire.codec import MAX_SAFE_INTEGER, decode_json

__all__ = ["INTERNAL_MAX_BYTES", "EraseIndexed", "ForgetIndexed", "InternalRecord", "decode_internal",
           "encode_internal"]


@dataclass(frozen=True)
class ForgetIndexed:
    """A record was cleared: drop its points from the recall index."""

    resource_id: str
    record_key: str


@dataclass(frozen=True)
class EraseIndexed:
    """An erase: delete the subject's points from the recall index (a resource's, or one thread's of it) and
    answer ``EraseIndexDone`` to the same partition of the results topic (the erase's coordinator)."""

    erase_id: str
    resource_id: str
    thread_id: str | None = None


InternalRecord = (RequestObservation | RequestReflection | ModelResultArrived | TimerFired | IndexForRecall
                  | ForgetIndexed | EraseIndexed | ErasePart | ErasePartDone | EraseIndexDone | RestoreRecord
                  | ExpireIndex)
_TYPES: dict[str, type[Any]] = {"request-observation": RequestObservation, "request-reflection": RequestReflection,
                                "result": ModelResultArrived, "timer": TimerFired, "index": IndexForRecall,
                                "forget-index": ForgetIndexed, "erase-index": EraseIndexed, "erase-part": ErasePart,
                                "erase-part-done": ErasePartDone, "erase-index-done": EraseIndexDone,
                                "restore": RestoreRecord, "expire-index": ExpireIndex}
_NAMES = {cls: name for name, cls in _TYPES.items()}


def encode_internal(record: InternalRecord) -> bytes:
    # a state travels in the form its table holds (``RecordState.to_dict``), which is also the export's
    body = {"state": record.state.to_dict()} if isinstance(record, RestoreRecord) else dataclasses.asdict(record)
    payload = {"type": _NAMES[type(record)], **body}
    return json.dumps(payload, separators=(",", ":"), default=str).encode()


# Larger than any record a Kafka producer sends by default (1 MiB): the bound refuses only what om-stream never wrote.
INTERNAL_MAX_BYTES = 16 * 1024 * 1024


@cache
def _validator(name: str) -> TypeAdapter[Any]:
    return TypeAdapter(_TYPES[name])


def decode_internal(value: bytes | None, *, max_bytes: int = INTERNAL_MAX_BYTES) -> InternalRecord:
    """An internal record from bytes; raises ``WireDecodeError`` with the reason it cannot be read.

    The topics are internal, not trusted: anything with write access can put bytes there, and the agent that reads
    them must not stop. So the JSON is bounded like any input, and every field is checked against its type."""
    data = decode_json(value, max_bytes)
    name = data.pop("type", None)
    if not isinstance(name, str) or name not in _TYPES:
        raise WireDecodeError("unknown_schema", f"internal record type {str(name)[:80]!r} is not one of "
                                                f"{sorted(_TYPES)}")
    if name == "restore":
        try:
            return RestoreRecord(checked_state(data.get("state") or {}))
        except ValueError as exc:
            raise WireDecodeError("invalid_fields", f"internal restore record: {exc}") from None
    # fields this version does not know are left out: a newer version of the deployment may have added them
    known = {field.name for field in dataclasses.fields(_TYPES[name])}
    try:
        record: InternalRecord = _validator(name).validate_python({k: v for k, v in data.items() if k in known})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])
        raise WireDecodeError("invalid_fields", f"internal {name} record: {problems}") from None
    # the JSON reader bounds integers, but a field typed int also takes 9007199254740992.0, which the next reader
    # of the same record would refuse
    if (where := _int_beyond_safe(dataclasses.asdict(record))) is not None:
        raise WireDecodeError("invalid_fields", f"internal {name} record: {where} is beyond ±(2^53−1)")
    return record


def _int_beyond_safe(node: Any, path: str = "a number") -> str | None:
    """Where an int too large for a JSON reader sits, or None (recursion is bounded: the depth was checked)."""
    if isinstance(node, int) and not isinstance(node, bool):
        return path if abs(node) > MAX_SAFE_INTEGER else None
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list | tuple) else ()
    for name, item in items:
        if (found := _int_beyond_safe(item, str(name)[:80])) is not None:
            return found
    return None
