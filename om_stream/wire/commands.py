"""``om.command/v1``: manual operations on a thread's memory, published to the commands topic (key = thread id)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from om_stream.core.messages import MAX_SAFE_INTEGER

__all__ = ["COMMAND_SCHEMA", "CommandRecord"]

COMMAND_SCHEMA: Literal["om.command/v1"] = "om.command/v1"


class CommandRecord(BaseModel):
    """``observe`` (``force``: whatever the message threshold) / ``reflect`` (optional ``guidance``) / ``override``
    (threshold overrides, merged into the thread's; ``replace``: exactly these) / ``clear`` / ``progress`` (a
    question: answered on the events topic with a ``data-om-progress`` event carrying ``requestId`` = this
    ``command_id``, and where ``through_message_id``, or the thread's newest message, stands).

    ``observe`` observes only once the thread's unobserved messages reach the message threshold, as the
    reference's ``observe()``; below it nothing happens. An ``override`` for a thread no message reached is
    dead-lettered (``unknown_thread``). ``clear`` forgets the observations, not the conversation: the thread's
    stored messages are unobserved again."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.command/v1")

    schema_: Literal["om.command/v1"] = Field(COMMAND_SCHEMA, alias="schema")
    command_id: str = Field(min_length=1, max_length=256)
    thread_id: str = Field(min_length=1, max_length=256)
    resource_id: str | None = Field(None, min_length=1, max_length=256)
    command: Literal["observe", "reflect", "override", "clear", "progress"]
    guidance: str | None = Field(None, max_length=10_000)
    message_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    observation_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    force: bool | None = Field(None, strict=True, description="observe: observe now, whatever the message threshold")
    replace: bool | None = Field(None, strict=True,
                                 description="override: the thread's overrides become exactly these (a threshold "
                                             "left out loses its override) instead of merging")
    through_message_id: str | None = Field(None, min_length=1, max_length=256,
                                           description="progress: the message asked about (default: the thread's "
                                                       "newest)")

    @model_validator(mode="after")
    def _fields_fit_the_command(self) -> CommandRecord:
        if self.command != "reflect" and self.guidance is not None:
            raise ValueError("guidance is only for the reflect command")
        if self.command != "override" and (self.message_tokens or self.observation_tokens):
            raise ValueError("message_tokens / observation_tokens are only for the override command")
        if self.command != "observe" and self.force is not None:
            raise ValueError("force is only for the observe command")
        if self.command != "override" and self.replace is not None:
            raise ValueError("replace is only for the override command")
        if self.command != "progress" and self.through_message_id is not None:
            raise ValueError("through_message_id is only for the progress command")
        return self
