"""Deterministic condensation: the observation log made to fit a token budget without a model.

The Reflector is asked to compress; this is what holds the bound when it does not (an answer too long, unchanged,
degenerate, failing, or a context rendered while a reflection is still running). Rules:

* the log is read as entries: a top-level observation line with the lines indented under it; ``Date:`` headers and
  tag lines (``<observation-group …>``) are structure, kept while anything under them is;
* the newest entries worth a quarter of the budget are protected; the others are folded first, lowest priority
  first (🟢, then 🟡 and unmarked, then 🔴), oldest first within a priority; protected entries go last, oldest
  first;
* folded entries are replaced by one marker line at the top saying how many were folded and from which days; a
  marker from an earlier condensation is merged into it, so the count covers everything folded so far;
* the result is counted with the caller's tokenizer and is at most the budget: the last entry left, if still too
  long, is cut (and with a budget smaller than the marker, so is the marker).

Nothing is lost for good: the observed messages stay in the content store (the recall tool pages through them), and
the segments a condensed reflection replaces stay stored under their generation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Condensed", "condense"]

PROTECTED_SHARE = 0.25
_HEADER = re.compile(r"^\s*Date:\s*(.+?)\s*$")
_TAG = re.compile(r"^\s*</?[A-Za-z][\w-]*(\s[^<>]*)?>\s*$")
_CLOSE_TAG = re.compile(r"^\s*</")
_ITEM = re.compile(r"^(\s*)(?:[-*•]|\d+[.)])\s+\S")
_MARKER = re.compile(r"^\s*\* \[(\d+) earlier observations? folded(?: \((.+?)(?: to (.+?))?\))?")
_PRIORITY = (("🔴", 2), ("🟢", 0))


@dataclass(frozen=True)
class Condensed:
    text: str
    tokens: int
    folded: int  # entries folded by this condensation
    total_folded: int  # folded so far, earlier markers included


@dataclass
class _Line:
    text: str
    kind: str  # "entry" | "header" | "tag"
    tokens: int
    priority: int = 1
    day: str | None = None
    entry: int = -1  # index among entries
    folded: bool = False


def _priority(line: str) -> int:
    return next((rank for mark, rank in _PRIORITY if mark in line[:12]), 1)


@dataclass
class _Earlier:
    """What earlier condensations folded (read back from their markers)."""

    folded: int = 0
    days: tuple[str, ...] = ()


def _parse(text: str, count: Callable[[str], int]) -> tuple[list[_Line], _Earlier]:
    lines: list[_Line] = []
    earlier = _Earlier()
    day: str | None = None
    indent: int | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        marker = _MARKER.match(raw)
        if marker:
            earlier.folded += int(marker.group(1))
            earlier.days += tuple(d for d in (marker.group(2), marker.group(3) or marker.group(2)) if d)
            continue
        header = _HEADER.match(raw)
        if header:
            day = header.group(1)
            lines.append(_Line(raw, "header", count(raw), day=day))
            indent = None
            continue
        if _TAG.match(raw):
            lines.append(_Line(raw, "tag", count(raw), day=day))
            continue
        item = _ITEM.match(raw)
        depth = len(item.group(1)) if item else None
        current = lines[-1] if lines and lines[-1].kind == "entry" else None
        if current is not None and (depth is None or (indent is not None and depth > indent)):
            current.text += "\n" + raw  # a detail under the entry above
            continue
        if depth is not None:
            indent = depth if indent is None else min(indent, depth)
        lines.append(_Line(raw, "entry", 0, priority=_priority(raw), day=day))
    for position, line in enumerate(x for x in lines if x.kind == "entry"):
        line.entry = position
        line.tokens = count(line.text)
    return lines, earlier


def _marker(folded: int, days: list[str]) -> str:
    span = "" if not days else f" ({days[0]})" if days[0] == days[-1] else f" ({days[0]} to {days[-1]})"
    noun = "observation" if folded == 1 else "observations"
    return f"* [{folded} earlier {noun} folded{span} to stay within budget; their messages can still be recalled]"


def _render(lines: list[_Line], earlier: _Earlier) -> tuple[str, int]:
    """The kept lines (empty days and empty tag pairs dropped) under the marker; and how many were folded."""
    kept: list[_Line] = []
    for line in lines:
        if line.kind == "entry" and line.folded:
            continue
        kept.append(line)
    # structure with nothing left under it goes too: a header followed by another header (or the end), a tag
    # opening directly onto its closing
    pruned: list[_Line] = []
    for index, line in enumerate(kept):
        following = kept[index + 1] if index + 1 < len(kept) else None
        if line.kind == "header" and (following is None or following.kind == "header"
                                      or (following.kind == "tag" and _CLOSE_TAG.match(following.text))):
            continue
        if line.kind == "tag" and not _CLOSE_TAG.match(line.text) and following is not None \
                and following.kind == "tag" and _CLOSE_TAG.match(following.text):
            continue
        if line.kind == "tag" and _CLOSE_TAG.match(line.text) and pruned and pruned[-1].kind == "tag" \
                and not _CLOSE_TAG.match(pruned[-1].text):
            pruned.pop()
            continue
        pruned.append(line)
    folded_now = [x for x in lines if x.kind == "entry" and x.folded]
    total = earlier.folded + len(folded_now)
    body = [x.text for x in pruned]
    if total:
        now = [x.day for x in folded_now if x.day]
        days = [(earlier.days or now)[0], (now or earlier.days)[-1]] if earlier.days or now else []
        body.insert(0, _marker(total, days))
    return "\n".join(body), total


def _fold_order(entries: list[_Line], budget: int) -> list[_Line]:
    protected: set[int] = set()
    spent = 0
    for line in reversed(entries):
        if spent + line.tokens > budget * PROTECTED_SHARE:
            break
        spent += line.tokens
        protected.add(line.entry)
    older = sorted((x for x in entries if x.entry not in protected), key=lambda x: (x.priority, x.entry))
    newest = [x for x in entries if x.entry in protected]  # oldest first
    return older + newest


def _cut(text: str, budget: int, count: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` (whole lines first, then characters) within ``budget`` tokens."""
    if count(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle] + " […]") <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + " […]" if low else ""


def condense(text: str, budget: int, count: Callable[[str], int]) -> Condensed:
    """``text`` made to fit ``budget`` tokens (see the module's rules). Unchanged when it already fits."""
    tokens = count(text)
    if tokens <= budget:
        return Condensed(text, tokens, 0, 0)
    lines, earlier = _parse(text, count)
    entries = [x for x in lines if x.kind == "entry"]
    structure = sum(x.tokens for x in lines if x.kind != "entry")
    remaining = sum(x.tokens for x in entries) + structure
    order = _fold_order(entries, budget)
    folded = 0
    # fold by estimate first (sums of parts), then check the joined text and go on one entry at a time
    reserve = count(_marker(earlier.folded + len(entries), ["Jan 01, 2000", "Dec 31, 2099"]))
    last = len(order) - 1  # the last entry left is cut rather than folded
    while folded < last and remaining + reserve > budget:
        order[folded].folded = True
        remaining -= order[folded].tokens
        folded += 1
    rendered, total = _render(lines, earlier)
    while count(rendered) > budget and folded < last:
        order[folded].folded = True
        folded += 1
        rendered, total = _render(lines, earlier)
    if count(rendered) > budget:
        rendered = _cut(rendered, budget, count)
    return Condensed(rendered, count(rendered), folded, total)
