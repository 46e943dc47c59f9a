"""``om.message/v1``: the record agents publish to the messages topic (key = thread id)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from om_stream.core.messages import Message

__all__ = ["MESSAGE_SCHEMA", "MessageRecord"]

MESSAGE_SCHEMA: Literal["om.message/v1"] = "om.message/v1"


class MessageRecord(Message):
    """A chat message with its schema tag. Unknown fields are refused (closed content model)."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="om.message/v1", populate_by_name=True,
                              serialize_by_alias=True)

    schema_: Literal["om.message/v1"] = Field(MESSAGE_SCHEMA, alias="schema")

    @field_validator("created_at", mode="before")
    @classmethod
    def _iso_8601(cls, value: object) -> object:
        if not isinstance(value, (str, datetime)):  # a tuple: a union here is built on every message
            raise ValueError("created_at must be an ISO-8601 date-time string")
        return value

    def to_message(self) -> Message:
        """The core's message: the same fields, already validated as this record was (a ``MessageRecord`` is a
        ``Message`` with its schema tag), so they are constructed into one, not dumped and validated again."""
        return Message.model_construct(**{name: getattr(self, name) for name in Message.model_fields})

    @classmethod
    def from_message(cls, message: Message) -> MessageRecord:
        return cls.model_validate(message.model_dump())
