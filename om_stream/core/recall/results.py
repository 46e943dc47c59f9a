"""What the recall tool returns, per mode, with the seeds' field names.

``truncated`` and ``tokenOffset`` are present only when the 2,000-token budget cut the output (the seeds: "present
and true when"); ``note``, ``nextCharOffset``, ``partIndex`` and ``threadId`` are om-stream additions that help a
model continue (all optional, so a client that ignores them loses nothing).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = ["MessagesResult", "RecallResult", "SearchResult", "ThreadsResult"]


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel,
                              serialize_by_alias=True)


class MessagesResult(_Result):
    model_config = ConfigDict(title="recall messages result")

    mode: Literal["messages"] = "messages"
    messages: str
    count: int = Field(ge=0)
    cursor: str
    page: int
    limit: int = Field(ge=1)
    detail: Literal["low", "high"]
    has_next_page: bool
    has_prev_page: bool
    truncated: Literal[True] | None = None
    token_offset: int | None = Field(None, ge=0)
    thread_id: str | None = None  # the thread these messages belong to
    part_index: int | None = Field(None, ge=0)  # the part shown (partIndex calls)
    next_char_offset: int | None = Field(None, ge=0)  # the part continues: call again with this charOffset
    note: str | None = None


class ThreadsResult(_Result):
    model_config = ConfigDict(title="recall threads result")

    mode: Literal["threads"] = "threads"
    threads: str
    count: int = Field(ge=0)
    page: int = Field(ge=0)
    has_more: bool
    truncated: Literal[True] | None = None
    token_offset: int | None = Field(None, ge=0)


class SearchResult(_Result):
    model_config = ConfigDict(title="recall search result")

    mode: Literal["search"] = "search"
    results: str
    count: int = Field(ge=0)
    truncated: Literal[True] | None = None
    token_offset: int | None = Field(None, ge=0)


RecallResult = Annotated[MessagesResult | ThreadsResult | SearchResult, Field(discriminator="mode")]
