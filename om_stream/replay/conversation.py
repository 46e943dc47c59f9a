"""The replay input format: one JSON message per line, grouped into turns.

``{"thread_id","resource_id","role":"user|assistant|tool","text","created_at":ISO-8601,"turn":int}``; tool lines
also carry ``"tool_name","tool_args","tool_call_id"`` and their text is the tool's result. A tool line becomes two
messages, as an agent publishes them: the assistant's tool call, then the tool's result. In a shared thread a line
may say who wrote it (``"author": {"id","name","kind"}``, as ``om.message/v1``); a tool line's author is the agent
that called the tool, and both of its messages carry it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from om_stream.core.messages import Author, Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.errors import WireDecodeError

__all__ = ["ReplayLine", "Turn", "load_turns", "turns_from_lines"]


class ReplayLine(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    thread_id: str = Field(min_length=1)
    resource_id: str = Field(min_length=1)
    role: Literal["user", "assistant", "tool"]
    text: str
    created_at: datetime
    turn: int = Field(ge=0)
    tool_name: str | None = None
    tool_args: Any = None
    tool_call_id: str | None = None
    author: Author | None = None


@dataclass(frozen=True)
class Turn:
    number: int
    thread_id: str
    messages: tuple[Message, ...]


def _messages(line: ReplayLine, index: int) -> list[Message]:
    base = {"thread_id": line.thread_id, "resource_id": line.resource_id, "author": line.author}
    prefix = f"{line.thread_id}:{line.turn}:{index}"
    if line.role != "tool":
        return [Message(message_id=prefix, role=line.role, created_at=line.created_at,
                        parts=(TextPart(text=line.text),), **base)]
    call_id = line.tool_call_id or f"{prefix}:call"
    name = line.tool_name or "tool"
    return [
        Message(message_id=f"{prefix}:call", role="assistant", created_at=line.created_at - timedelta(milliseconds=1),
                parts=(ToolCallPart(tool_call_id=call_id, tool_name=name, args=line.tool_args),), **base),
        Message(message_id=f"{prefix}:result", role="tool", created_at=line.created_at,
                parts=(ToolResultPart(tool_call_id=call_id, tool_name=name, result=line.text),), **base),
    ]


def turns_from_lines(lines: Iterable[ReplayLine]) -> Iterator[Turn]:
    current: list[Message] = []
    key: tuple[str, int] | None = None
    for index, line in enumerate(lines):
        if key is not None and (line.thread_id, line.turn) != key:
            yield Turn(key[1], key[0], tuple(current))
            current = []
        key = (line.thread_id, line.turn)
        current.extend(_messages(line, index))
    if key is not None and current:
        yield Turn(key[1], key[0], tuple(current))


def load_turns(path: Path) -> list[Turn]:
    """Read a replay file; a bad line is reported with its number."""
    lines: list[ReplayLine] = []
    with path.open() as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                lines.append(ReplayLine.model_validate(json.loads(raw)))
            except (json.JSONDecodeError, ValidationError) as exc:
                raise WireDecodeError("invalid_replay_line", f"{path}:{number}: {exc}") from None
    return list(turns_from_lines(lines))
