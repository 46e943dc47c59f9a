"""JSON form of the records on the internal topics: model requests, model results, timers, and the recall index's
work (index an observation group; forget a cleared record).

These never leave om-stream (no public schema); they only need to survive a round trip between a memory agent
and a model worker, possibly across a restart or a version of the same deployment.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from om_stream.core.commands import IndexForRecall, RequestObservation, RequestReflection
from om_stream.core.inputs import ModelResultArrived, TimerFired
from om_stream.errors import WireDecodeError

__all__ = ["ForgetIndexed", "InternalRecord", "decode_internal", "encode_internal"]


@dataclass(frozen=True)
class ForgetIndexed:
    """A record was cleared: drop its points from the recall index."""

    resource_id: str
    record_key: str


InternalRecord = (RequestObservation | RequestReflection | ModelResultArrived | TimerFired | IndexForRecall
                  | ForgetIndexed)
_TYPES: dict[str, type[Any]] = {"request-observation": RequestObservation, "request-reflection": RequestReflection,
                                "result": ModelResultArrived, "timer": TimerFired, "index": IndexForRecall,
                                "forget-index": ForgetIndexed}
_NAMES = {cls: name for name, cls in _TYPES.items()}


def encode_internal(record: InternalRecord) -> bytes:
    payload = {"type": _NAMES[type(record)], **dataclasses.asdict(record)}
    return json.dumps(payload, separators=(",", ":"), default=str).encode()


def _tuples(cls: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    """JSON has lists; the frozen dataclasses keep tuples (hashable, immutable)."""
    fixed = dict(data)
    for field in dataclasses.fields(cls):
        value = fixed.get(field.name)
        if isinstance(value, list) and "tuple" in str(field.type):
            fixed[field.name] = tuple(tuple(v) if isinstance(v, list) else v for v in value)
    return fixed


def decode_internal(value: bytes) -> InternalRecord:
    try:
        data = json.loads(value)
        cls = _TYPES[data.pop("type")]
        known = {f.name for f in dataclasses.fields(cls)}
        record: InternalRecord = cls(**_tuples(cls, {k: v for k, v in data.items() if k in known}))
    except (ValueError, KeyError, TypeError) as exc:
        raise WireDecodeError("invalid_fields", f"internal record: {exc}") from None
    return record
