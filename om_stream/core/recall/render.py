"""Rendering messages for the recall tool: part indexes, low/high detail, and the 2,000-token budget.

A message renders as a header and one line per part::

    **user (2026-03-10 09:15:02Z)** [msg-41]:
      [p0] Can you check the retry settings?
      [p1] [Image: dashboard.png]

``[pN]`` is the part's position in the message as stored (filters never renumber), so ``partIndex=N`` always
fetches what the model saw. At ``low`` detail each part is cut to a small budget (text 100 tokens, tool calls and
results 20, other parts 30) with a hint naming the call that shows it whole; leftover budget then re-expands cut
parts, user text first (up to 200 tokens), everything else up to 50. The whole output never exceeds
:data:`RESULT_BUDGET_TOKENS`; when it would, it is cut and the result says ``truncated`` with the number of
tokens left out (``tokenOffset``).

Token counts come from the caller (the runtime's tokenizer): this module does no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from om_stream.core.messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    author_mark,
)
from om_stream.core.recall.params import PartType

__all__ = [
    "EXPAND_OTHER_TOKENS",
    "EXPAND_USER_TEXT_TOKENS",
    "LOW_OTHER_TOKENS",
    "LOW_TEXT_TOKENS",
    "LOW_TOOL_TOKENS",
    "RESULT_BUDGET_TOKENS",
    "Budgeted",
    "PartView",
    "TokenCount",
    "fit_budget",
    "format_timestamp",
    "high_detail_hint",
    "indent_part",
    "message_header",
    "part_kind",
    "part_text",
    "render_parts",
    "truncate_tokens",
    "visible_parts",
]

TokenCount = Callable[[str], int]

RESULT_BUDGET_TOKENS = 2_000
LOW_TEXT_TOKENS = 100
LOW_TOOL_TOKENS = 20
LOW_OTHER_TOKENS = 30
EXPAND_USER_TEXT_TOKENS = 200
EXPAND_OTHER_TOKENS = 50
_CUT_NOTE = ("[output cut at the {budget}-token budget: ask for fewer messages (limit), page on, or fetch one "
             "part with partIndex]")


def format_timestamp(ms: int) -> str:
    """``2026-03-10 09:15:02Z``: second precision, UTC."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def truncate_tokens(text: str, max_tokens: int, count: TokenCount) -> str:
    """The longest prefix of ``text`` that counts at most ``max_tokens`` tokens."""
    if max_tokens <= 0:
        return ""
    if count(text) <= max_tokens:
        return text
    low, high = 0, min(len(text), max_tokens * 32)  # no tokenizer packs more than ~32 characters in a token
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def part_kind(part: Part) -> PartType:
    if isinstance(part, TextPart):
        return "text"
    if isinstance(part, ReasoningPart):
        return "reasoning"
    if isinstance(part, ToolCallPart):
        return "tool-call"
    if isinstance(part, ToolResultPart):
        return "tool-result"
    if isinstance(part, ImagePart):
        return "image"
    return "file"


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)


def _attachment_label(part: ImagePart | FilePart, detail: bool) -> str:
    kind = "Image" if isinstance(part, ImagePart) else "File"
    name = part.filename or (part.url if part.url and not part.url.startswith("data:") else None)
    label = f"[{kind}: {name}]" if name else f"[{kind}]"
    if not detail:
        return label
    facts = [part.mime_type]
    if isinstance(part, ImagePart) and part.width and part.height:
        facts.append(f"{part.width}x{part.height}")
    if part.size_bytes is not None:
        facts.append(f"{part.size_bytes} bytes")
    return f"{label} ({', '.join(facts)})"


def part_text(part: Part, *, detail: bool = True) -> str:
    """A part's full text as recall shows it (before any truncation). Inline file data is never shown."""
    if isinstance(part, TextPart | ReasoningPart):
        return part.text
    if isinstance(part, ToolCallPart):
        args = "" if part.args is None else "\n" + _json(part.args)
        return f"[Tool Call: {part.tool_name}]{args}"
    if isinstance(part, ToolResultPart):
        label = "Tool Error" if part.is_error else "Tool Result"
        result = "" if part.result is None else "\n" + _json(part.result)
        return f"[{label}: {part.tool_name}]{result}"
    return _attachment_label(part, detail)


def visible_parts(message: Message, part_type: PartType | None = None,
                  tool_name: str | None = None) -> list[tuple[int, Part]]:
    """``(index, part)`` of the parts a recall with these filters shows. A message with none is skipped."""
    shown: list[tuple[int, Part]] = []
    for index, part in enumerate(message.parts):
        if part_type is not None and part_kind(part) != part_type:
            continue
        if tool_name is not None and not (isinstance(part, ToolCallPart | ToolResultPart)
                                          and part.tool_name == tool_name):
            continue
        if isinstance(part, TextPart | ReasoningPart) and not part.text.strip():
            continue
        shown.append((index, part))
    return shown


def indent_part(text: str) -> str:
    """A part's later lines are indented under its ``[pN]`` tag, so a multi-line part reads as one block."""
    return text.replace("\n", "\n    ")


def message_header(message: Message) -> str:
    return (f"**{message.role}{author_mark(message)} ({format_timestamp(message.created_at_ms)})** "
            f"[{message.message_id}]:")


def high_detail_hint(message_id: str, part_index: int) -> str:
    return f'recall cursor="{message_id}" partIndex={part_index} detail="high"'


@dataclass(frozen=True)
class PartView:
    message: Message
    index: int
    kind: PartType
    full: str
    shown: str

    @property
    def cut(self) -> bool:
        return self.shown != self.full

    @property
    def role(self) -> str:
        return self.message.role


@dataclass(frozen=True)
class Budgeted:
    text: str
    truncated: bool
    token_offset: int


def _low_limit(kind: PartType) -> int:
    if kind == "text":
        return LOW_TEXT_TOKENS
    if kind in ("tool-call", "tool-result"):
        return LOW_TOOL_TOKENS
    return LOW_OTHER_TOKENS


def _expand_limit(view: PartView) -> int:
    return EXPAND_USER_TEXT_TOKENS if view.role == "user" and view.kind == "text" else EXPAND_OTHER_TOKENS


def _expand_priority(view: PartView) -> int:
    if view.role == "user" and view.kind == "text":
        return 0
    return {"text": 1, "reasoning": 1, "tool-result": 2, "tool-call": 3}.get(view.kind, 4)


def _shorten(view: PartView, max_tokens: int, count: TokenCount) -> str:
    prefix = truncate_tokens(view.full, max_tokens, count)
    if prefix == view.full:
        return prefix
    return f"{prefix.rstrip()}… [{high_detail_hint(view.message.message_id, view.index)} for the whole part]"


def _layout(views: Sequence[PartView]) -> str:
    lines: list[str] = []
    current: str | None = None
    for view in views:
        if view.message.message_id != current:
            current = view.message.message_id
            if lines:
                lines.append("")
            lines.append(message_header(view.message))
        lines.append(f"  [p{view.index}] {indent_part(view.shown)}")
    return "\n".join(lines)


def fit_budget(text: str, count: TokenCount, budget: int = RESULT_BUDGET_TOKENS) -> Budgeted:
    """Cut ``text`` to ``budget`` tokens; the note saying so is added outside the budget."""
    total = count(text)
    if total <= budget:
        return Budgeted(text, False, 0)
    cut = truncate_tokens(text, budget, count).rstrip()
    return Budgeted(f"{cut}\n{_CUT_NOTE.format(budget=budget)}", True, total - budget)


def render_parts(messages: Sequence[Message], count: TokenCount, *, detail: str = "low",
                 part_type: PartType | None = None, tool_name: str | None = None,
                 budget: int = RESULT_BUDGET_TOKENS) -> Budgeted:
    """Every visible part of ``messages`` (in order), at ``detail``, within ``budget`` tokens."""
    views: list[PartView] = []
    for message in messages:
        for index, part in visible_parts(message, part_type, tool_name):
            full = part_text(part, detail=detail == "high")
            view = PartView(message, index, part_kind(part), full, full)
            if detail == "low":
                view = replace(view, shown=_shorten(view, _low_limit(view.kind), count))
            views.append(view)
    text = _layout(views)
    total = count(text)
    if total > budget or detail != "low":
        return fit_budget(text, count, budget)
    remaining = budget - total
    order = sorted((i for i, v in enumerate(views) if v.cut), key=lambda i: (_expand_priority(views[i]), i))
    for i in order:
        if remaining <= 0:
            break
        view = views[i]
        limit = _expand_limit(view)
        shown_tokens = count(view.shown)
        full_tokens = count(view.full)
        if full_tokens <= limit and full_tokens - shown_tokens <= remaining:
            views[i] = replace(view, shown=view.full)
            remaining -= full_tokens - shown_tokens
            continue
        target = min(limit, shown_tokens + remaining)
        if target <= shown_tokens:
            continue
        longer = _shorten(view, target, count)
        grown = count(longer) - shown_tokens
        if grown > remaining:  # the hint's own tokens pushed it over: give them back from the prefix
            longer = _shorten(view, target - (grown - remaining), count)
            grown = count(longer) - shown_tokens
        if grown <= 0 or grown > remaining:
            continue
        views[i] = replace(view, shown=longer)
        remaining -= grown
    return fit_budget(_layout(views), count, budget)
