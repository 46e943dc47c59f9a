"""The public LongMemEval format, read one question at a time.

A dataset file (LongMemEval_S, LongMemEval_M or the oracle set) is one JSON array of questions::

    {"question_id": "e47becba", "question_type": "single-session-user", "question": "...", "answer": "...",
     "question_date": "2023/05/30 (Tue) 23:40",
     "haystack_session_ids": ["s1", ...], "haystack_dates": ["2023/05/20 (Sat) 02:21", ...],
     "haystack_sessions": [[{"role": "user", "content": "...", "has_answer": true}, ...], ...],
     "answer_session_ids": ["s1"]}

A question whose id ends in ``_abs`` is an abstention question: the haystack does not hold its answer, and the
``answer`` field explains why. Dates carry no time zone: they are read as UTC, which keeps their day and hour.

LongMemEval_M is 2.7 GB: :func:`iter_questions` decodes the array item by item, so one question at a time sits in
memory. Every item is validated here, at the edge; an invalid one is reported with its position in the array.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from om_stream.errors import WireDecodeError

__all__ = [
    "QUESTION_TYPES",
    "HaystackSession",
    "HaystackTurn",
    "Question",
    "format_date",
    "iter_questions",
    "parse_date",
]

# the six question types of the benchmark; abstention questions (ids ending in "_abs") are spread over them
QUESTION_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
                  "multi-session", "temporal-reasoning", "knowledge-update")
ABSTENTION_SUFFIX = "_abs"

_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\(\w+\))?\s*(\d{1,2}):(\d{2})\s*$")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def parse_date(value: str) -> datetime:
    """A LongMemEval date (``2023/05/20 (Sat) 02:21``; ISO 8601 is accepted too), as an aware UTC datetime."""
    match = _DATE.match(value)
    if match:
        year, month, day, hour, minute = (int(g) for g in match.groups())
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"not a LongMemEval date: {value!r} (expected e.g. '2023/05/20 (Sat) 02:21')") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_date(when: datetime) -> str:
    """The dataset's own date format, weekday included, whatever the process locale."""
    return f"{when:%Y/%m/%d} ({_WEEKDAYS[when.weekday()]}) {when:%H:%M}"


class HaystackTurn(BaseModel):
    """One message of a haystack session. ``has_answer`` marks the turns that hold the evidence."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Literal["user", "assistant"]
    content: str
    has_answer: bool = False


@dataclass(frozen=True)
class HaystackSession:
    session_id: str
    date: datetime
    turns: tuple[HaystackTurn, ...]


class Question(BaseModel):
    """One item of the dataset."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    question_id: str = Field(min_length=1, max_length=200)
    question_type: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: str
    question_date: datetime
    haystack_session_ids: tuple[str, ...] = ()
    haystack_dates: tuple[datetime, ...]
    haystack_sessions: tuple[tuple[HaystackTurn, ...], ...]
    answer_session_ids: tuple[str, ...] = ()

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_text(cls, value: Any) -> Any:
        # some answers are numbers in the published files (a count of days, of items)
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("question_date", mode="before")
    @classmethod
    def _question_date(cls, value: Any) -> Any:
        return parse_date(value) if isinstance(value, str) else value

    @field_validator("haystack_dates", mode="before")
    @classmethod
    def _haystack_dates(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [parse_date(v) if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _aligned(self) -> Question:
        sessions = len(self.haystack_sessions)
        if len(self.haystack_dates) != sessions:
            raise ValueError(f"{len(self.haystack_dates)} haystack_dates for {sessions} haystack_sessions")
        if self.haystack_session_ids and len(self.haystack_session_ids) != sessions:
            raise ValueError(f"{len(self.haystack_session_ids)} haystack_session_ids for {sessions} "
                             f"haystack_sessions")
        return self

    @property
    def abstention(self) -> bool:
        """The haystack does not hold the answer; a correct reply says it cannot answer."""
        return self.question_id.endswith(ABSTENTION_SUFFIX)

    def sessions(self) -> list[HaystackSession]:
        """The haystack in the order it happened (by date; sessions of the same date keep the file's order)."""
        ids = self.haystack_session_ids or tuple(f"session-{i}" for i in range(len(self.haystack_sessions)))
        ordered = sorted(range(len(self.haystack_sessions)), key=lambda i: self.haystack_dates[i])
        return [HaystackSession(ids[i], self.haystack_dates[i], self.haystack_sessions[i]) for i in ordered]


class _ArrayReader:
    """Decodes the items of one top-level JSON array from a text stream, reading only as far as the next item."""

    def __init__(self, handle: TextIO, chunk_chars: int) -> None:
        self.handle = handle
        self.chunk = chunk_chars
        self.buffer = ""
        self.pos = 0
        self.eof = False
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        """Read more text (as much again as is buffered, so a huge item costs few re-parses); False at the end."""
        if self.eof:
            return False
        self.buffer = self.buffer[self.pos:]
        self.pos = 0
        text = self.handle.read(max(self.chunk, len(self.buffer)))
        if not text:
            self.eof = True
            return False
        self.buffer += text
        return True

    def _next_char(self) -> str:
        """The next character that is not whitespace ('' at the end), without consuming it."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self._more():
                return ""

    def items(self) -> Iterator[Any]:
        if self._next_char() != "[":
            raise ValueError("a LongMemEval file is one JSON array of questions")
        self.pos += 1
        first = True
        while True:
            char = self._next_char()
            if char == "]":
                self.pos += 1
                if self._next_char():
                    raise ValueError("text after the closing bracket of the array")
                return
            if not first:
                if char != ",":
                    raise ValueError(f"expected ',' or ']' at character {self.pos} of the current window")
                self.pos += 1
                self._next_char()
            first = False
            yield self._decode()

    def _decode(self) -> Any:
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue  # the item goes on past what is buffered
                raise ValueError(f"invalid JSON: {exc.msg}") from None
            self.pos = end
            return value


def iter_questions(path: Path, *, chunk_chars: int = 1 << 20) -> Iterator[Question]:
    """The questions of a dataset file, in file order. Raises ``WireDecodeError`` (``invalid_longmemeval``) naming
    the item that is not valid JSON or not a LongMemEval question."""
    with path.open(encoding="utf-8") as handle:
        index = -1
        try:
            for index, raw in enumerate(_ArrayReader(handle, chunk_chars).items()):
                try:
                    yield Question.model_validate(raw)
                except ValidationError as exc:
                    where = f"question {raw.get('question_id')!r}" if isinstance(raw, dict) else "item"
                    raise WireDecodeError("invalid_longmemeval",
                                          f"{path}: {where} (item {index}): {_summary(exc)}") from None
        except ValueError as exc:
            if isinstance(exc, WireDecodeError):
                raise
            raise WireDecodeError("invalid_longmemeval", f"{path}: after item {index}: {exc}") from None


def _summary(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in error['loc']) or 'item'}: {error['msg']}"
                     for error in exc.errors()[:5])
