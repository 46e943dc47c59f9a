"""``om.command/v1``: manual operations on a thread's memory, published to the commands topic (key = thread id)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from om_stream.core.messages import MAX_SAFE_INTEGER

__all__ = ["COMMAND_SCHEMA", "CommandRecord"]

COMMAND_SCHEMA: Literal["om.command/v1"] = "om.command/v1"


class CommandRecord(BaseModel):
    """``observe`` / ``reflect`` (optional ``guidance``) / ``override`` (threshold overrides) / ``clear``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.command/v1")

    schema_: Literal["om.command/v1"] = Field(COMMAND_SCHEMA, alias="schema")
    command_id: str = Field(min_length=1, max_length=256)
    thread_id: str = Field(min_length=1, max_length=256)
    resource_id: str | None = Field(None, min_length=1, max_length=256)
    command: Literal["observe", "reflect", "override", "clear"]
    guidance: str | None = Field(None, max_length=10_000)
    message_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    observation_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)

    @model_validator(mode="after")
    def _fields_fit_the_command(self) -> CommandRecord:
        if self.command != "reflect" and self.guidance is not None:
            raise ValueError("guidance is only for the reflect command")
        if self.command != "override" and (self.message_tokens or self.observation_tokens):
            raise ValueError("message_tokens / observation_tokens are only for the override command")
        return self
