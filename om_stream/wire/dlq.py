"""``om.dlq/v1``: a record om-stream could not process, kept whole with the reason, on the dead-letter topic."""

from __future__ import annotations

import base64
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DLQ_REASONS", "DLQ_SCHEMA", "DeadLetterRecord"]

DLQ_SCHEMA: Literal["om.dlq/v1"] = "om.dlq/v1"
DLQ_REASONS = ("invalid_utf8", "invalid_json", "unknown_schema", "invalid_fields", "key_mismatch", "oversize",
               "too_deep", "missing_key", "rejected_command", "resource_mismatch", "unknown_thread", "processing_error",
               "store_refused")


class DeadLetterRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.dlq/v1")

    schema_: Literal["om.dlq/v1"] = Field(DLQ_SCHEMA, alias="schema")
    reason: str = Field(description="machine-readable: one of DLQ_REASONS")
    detail: str = Field(max_length=4000)
    source_topic: str
    source_partition: int
    source_offset: int
    key_b64: str | None = Field(None, description="the original key bytes, base64")
    value_b64: str = Field(description="the original value bytes, base64")
    headers: list[tuple[str, str]] = Field(default_factory=list, description="original headers (value base64)")
    failed_at: str

    @classmethod
    def build(cls, *, reason: str, detail: str, topic: str, partition: int, offset: int, key: bytes | None,
              value: bytes, headers: list[tuple[str, bytes]], failed_at: str) -> DeadLetterRecord:
        return cls(reason=reason, detail=detail[:4000], source_topic=topic, source_partition=partition,
                   source_offset=offset, key_b64=base64.b64encode(key).decode() if key is not None else None,
                   value_b64=base64.b64encode(value).decode(),
                   headers=[(k, base64.b64encode(v).decode()) for k, v in headers], failed_at=failed_at)

    def original_value(self) -> bytes:
        return base64.b64decode(self.value_b64)
