"""``om.command/v1``: manual operations on a thread's memory, published to the commands topic (key = thread id)."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from om_stream.core.messages import MAX_SAFE_INTEGER
from om_stream.core.retention import MAX_RETENTION_DAYS

__all__ = ["COMMAND_SCHEMA", "CommandRecord", "record_key_of"]

COMMAND_SCHEMA: Literal["om.command/v1"] = "om.command/v1"


class CommandRecord(BaseModel):
    """``observe`` (``force``: whatever the message threshold) / ``reflect`` (optional ``guidance``) / ``override``
    (threshold overrides and a retention window, merged into the thread's; ``replace``: exactly these) / ``clear``
    / ``erase`` / ``progress`` (a question: answered on the events topic with a ``data-om-progress`` event carrying
    ``requestId`` = this ``command_id``, and where ``through_message_id``, or the thread's newest message, stands).

    ``observe`` observes only once the thread's unobserved messages reach the message threshold, as the
    reference's ``observe()``; below it nothing happens. An ``override`` for a thread no message reached is
    dead-lettered (``unknown_thread``). ``clear`` forgets the observations, not the conversation: the thread's
    stored messages are unobserved again. ``erase`` removes a thread (``scope: thread``, keyed by the thread id)
    or a resource with every thread of it (``scope: resource``, keyed by the resource id, ``thread_id`` left out)
    from every store, for good; its receipt is a ``data-om-erased`` event. ``command_id`` is the erase's id."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.command/v1")

    schema_: Literal["om.command/v1"] = Field(COMMAND_SCHEMA, alias="schema")
    command_id: str = Field(min_length=1, max_length=256)
    thread_id: str | None = Field(None, min_length=1, max_length=256,
                                  description="the thread; left out only by an erase of a whole resource")
    resource_id: str | None = Field(None, min_length=1, max_length=256)
    command: Literal["observe", "reflect", "override", "clear", "erase", "progress"]
    scope: Literal["thread", "resource"] | None = Field(None, description="erase: a thread, or a whole resource")
    requested_at: AwareDatetime | None = Field(None, description="erase: when it was requested (the receipt says "
                                                                 "so); the record's time when left out")
    guidance: str | None = Field(None, max_length=10_000)
    message_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    observation_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    retention_days: int | None = Field(None, ge=1, le=MAX_RETENTION_DAYS,
                                       description="override: the thread's retention window in days, no longer than "
                                                   "the deployment's (messages and observations older are removed)")
    force: bool | None = Field(None, strict=True, description="observe: observe now, whatever the message threshold")
    replace: bool | None = Field(None, strict=True,
                                 description="override: the thread's overrides become exactly these (a threshold "
                                             "or window left out loses its override) instead of merging")
    through_message_id: str | None = Field(None, min_length=1, max_length=256,
                                           description="progress: the message asked about (default: the thread's "
                                                       "newest)")

    @model_validator(mode="after")
    def _fields_fit_the_command(self) -> CommandRecord:
        if self.command == "erase":
            if self.scope is None:
                raise ValueError("erase needs a scope: thread or resource")
            if self.scope == "resource" and (self.resource_id is None or self.thread_id is not None):
                raise ValueError("erase of a resource names resource_id, and no thread_id")
        elif self.scope is not None or self.requested_at is not None:
            raise ValueError("scope and requested_at are only for the erase command")
        if self.thread_id is None and not (self.command == "erase" and self.scope == "resource"):
            raise ValueError("thread_id is required (only an erase of a whole resource leaves it out)")
        if self.command != "reflect" and self.guidance is not None:
            raise ValueError("guidance is only for the reflect command")
        if self.command != "override" and (self.message_tokens or self.observation_tokens
                                           or self.retention_days is not None):
            raise ValueError("message_tokens / observation_tokens / retention_days are only for the override command")
        if self.command != "observe" and self.force is not None:
            raise ValueError("force is only for the observe command")
        if self.command != "override" and self.replace is not None:
            raise ValueError("replace is only for the override command")
        if self.command != "progress" and self.through_message_id is not None:
            raise ValueError("through_message_id is only for the progress command")
        return self


def record_key_of(command: CommandRecord) -> str:
    """The Kafka key a command is published under: its thread, or its resource for an erase of a resource."""
    if command.thread_id is not None:
        return command.thread_id
    assert command.resource_id is not None  # the model's validator: only a resource erase leaves the thread out
    return command.resource_id
