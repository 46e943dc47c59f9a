"""The recall tool's arguments as an agent's model writes them, and the scope a call runs in.

Argument names are the seeds' (``threadId``, ``partIndex``, ...); snake_case names are accepted too. Values a model
can get slightly wrong (a ``limit`` above the mode's maximum, ``page: 0``) are normalised, and the response says
which values were used; values that cannot mean anything (a negative ``partIndex``, an unparseable date) are
refused with a :class:`~om_stream.errors.RecallError` naming the argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from om_stream.core.config import RetrievalConfig
from om_stream.errors import RecallError

__all__ = [
    "CURRENT_THREAD",
    "DEFAULT_LIMIT",
    "DEFAULT_SEARCH_LIMIT",
    "MAX_LIMIT",
    "MAX_PAGE",
    "MAX_THREADS_LIMIT",
    "PartType",
    "RecallArguments",
    "RecallScope",
    "parse_arguments",
    "parse_instant",
]

CURRENT_THREAD = "current"
MAX_PAGE = 50
DEFAULT_LIMIT = 20
MAX_LIMIT = 20
MAX_THREADS_LIMIT = 50
DEFAULT_SEARCH_LIMIT = 10

PartType = Literal["text", "tool-call", "tool-result", "reasoning", "image", "file"]
_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_instant(value: str) -> int:
    """An ISO-8601 date or date-time as epoch ms (UTC when no offset is given). Raises ``ValueError``."""
    text = value.strip()
    if _DATE_ONLY.match(text):
        day = date.fromisoformat(text)
        return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


class RecallArguments(BaseModel):
    """One call of the recall tool. Unknown arguments are refused (a typo must not silently widen a query)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel,
                              serialize_by_alias=True, title="recall arguments")

    mode: Literal["messages", "threads", "search"] = "messages"
    query: str | None = Field(None, min_length=1, max_length=4_000)
    cursor: str | None = Field(None, min_length=1, max_length=4_096)
    thread_id: str | None = Field(None, min_length=1, max_length=256)
    anchor: Literal["start", "end"] = "start"
    page: int | None = Field(None, ge=-MAX_PAGE, le=MAX_PAGE)
    limit: int | None = Field(None, ge=1)
    detail: Literal["low", "high"] = "low"
    part_type: PartType | None = None
    tool_name: str | None = Field(None, min_length=1, max_length=256)
    part_index: int | None = Field(None, ge=0)
    char_offset: int | None = Field(None, ge=0)  # with partIndex: continue a long part where the last call stopped
    before: str | None = Field(None, min_length=1, max_length=64)
    after: str | None = Field(None, min_length=1, max_length=64)
    # shared threads: only the messages this author wrote (its id, or its name in any case)
    author: str | None = Field(None, min_length=1, max_length=256, pattern=r"\S")

    @model_validator(mode="after")
    def _consistent(self) -> RecallArguments:
        for name, value in (("before", self.before), ("after", self.after)):
            if value is not None:
                try:
                    parse_instant(value)
                except ValueError:
                    raise ValueError(f"{name}: {value!r} is not an ISO 8601 date such as 2026-03-15 or "
                                     "2026-03-10T00:00:00Z") from None
        if self.mode == "search" and not (self.query and self.query.strip()):
            raise ValueError('query: required for mode "search"')
        if self.char_offset is not None and self.part_index is None:
            raise ValueError("charOffset: only with partIndex")
        if self.author is not None and self.mode == "threads":
            raise ValueError('author: only in modes "messages" and "search" (threads are not written by one author)')
        if self.author is not None and self.part_index is not None:
            raise ValueError("author: not with partIndex (the cursor already names the one message to read)")
        return self

    # -- normalised values ---------------------------------------------------------------------------------------

    @property
    def before_ms(self) -> int | None:
        return parse_instant(self.before) if self.before else None

    @property
    def after_ms(self) -> int | None:
        return parse_instant(self.after) if self.after else None

    def effective_limit(self) -> int:
        if self.mode == "threads":
            return min(self.limit or DEFAULT_LIMIT, MAX_THREADS_LIMIT)
        if self.mode == "search":
            return min(self.limit or DEFAULT_SEARCH_LIMIT, MAX_LIMIT)
        return min(self.limit or DEFAULT_LIMIT, MAX_LIMIT)

    def effective_page(self) -> int:
        """Messages: 1-based, signed (0 means 1). Threads: 0-based, never negative."""
        if self.mode == "threads":
            return max(self.page or 0, 0)
        return 1 if not self.page else self.page


def parse_arguments(data: RecallArguments | dict[str, Any]) -> RecallArguments:
    """Validate a tool call's arguments; every problem is one :class:`RecallError` naming the arguments."""
    if isinstance(data, RecallArguments):
        return data
    try:
        return RecallArguments.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors())
        raise RecallError(f"invalid recall arguments: {problems}") from None


@dataclass(frozen=True)
class RecallScope:
    """Who is asking: the tenant (every answer is limited to it), the agent's current thread, and the retrieval
    options of its memory (``scope`` thread limits recall to the current thread; ``vector`` enables search)."""

    resource_id: str
    current_thread_id: str | None = None
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)

    @property
    def thread_only(self) -> bool:
        return self.retrieval.scope == "thread"
