"""Paging arithmetic of the recall tool's ``messages`` mode, and what to do with a range given as a cursor.

Pages are windows of ``limit`` visible messages counted away from an anchor:

* from a **cursor**: page ``1`` starts at the cursor message and reads forward, page ``-1`` ends at it and reads
  backward (the cursor is shown on both, so taking either end of a group's range shows that end); ``±2``... move
  further away. ``0`` means ``1``.
* without a cursor: from the thread's **start** (page 1 = the oldest messages) or its **end** (page 1 = the newest,
  page 2 the ones before them).

Messages are always listed oldest first within a page. ``hasNextPage`` / ``hasPrevPage`` say whether any visible
message exists after / before the page (in time), so they mean the same thing in every direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

__all__ = ["PagePlan", "PageSlice", "RangeCandidates", "looks_like_range", "page_flags", "plan_page",
           "range_candidates", "range_hint", "slice_page"]

T = TypeVar("T")


@dataclass(frozen=True)
class PagePlan:
    page: int  # the page as reported back (messages: signed, never 0)
    forward: bool  # the window is read toward newer messages
    skip: int  # visible messages of the window before this page
    need: int  # visible messages to collect: this page, the ones skipped, and one more to know if more exist
    limit: int


def plan_page(page: int, limit: int, *, from_cursor: bool, anchor: Literal["start", "end"] = "start") -> PagePlan:
    normalised = page or 1
    distance = abs(normalised) - 1
    forward = normalised > 0 if from_cursor else anchor == "start"
    if not from_cursor:
        normalised = distance + 1  # without a cursor pages only count away from the anchor
    skip = distance * limit
    return PagePlan(page=normalised, forward=forward, skip=skip, need=skip + limit + 1, limit=limit)


@dataclass(frozen=True)
class PageSlice(Generic[T]):
    items: list[T]  # oldest first
    more_away: bool  # visible messages exist beyond the page, further from the anchor
    before_page_in_window: bool  # the window holds visible messages between the anchor and the page


def slice_page(plan: PagePlan, window: Sequence[T]) -> PageSlice[T]:
    """``window``: visible messages in reading order from the anchor (ascending when forward, else descending)."""
    chosen = list(window[plan.skip:plan.skip + plan.limit])
    if not plan.forward:
        chosen.reverse()
    return PageSlice(items=chosen, more_away=len(window) > plan.skip + plan.limit,
                     before_page_in_window=min(plan.skip, len(window)) > 0)


def page_flags(plan: PagePlan, page: PageSlice[T], *, beyond_anchor: bool) -> tuple[bool, bool]:
    """``(hasNextPage, hasPrevPage)``. ``beyond_anchor``: visible messages exist on the other side of the anchor
    (before a forward window's start, after a backward window's start)."""
    toward_anchor = page.before_page_in_window or beyond_anchor
    if plan.forward:
        return page.more_away, toward_anchor
    return toward_anchor, page.more_away



# -- ranges given where one message id is expected ----------------------------------------------------------------


@dataclass(frozen=True)
class RangeCandidates:
    """Ways to read a ``start:end`` range (or a comma list of them). Message ids may contain ``:`` themselves, so
    every split is a candidate; the caller keeps the ones naming messages that exist."""

    starts: tuple[str, ...]
    ends: tuple[str, ...]


def looks_like_range(text: str) -> bool:
    value = text.strip()
    return "," in value or (":" in value and not value.startswith(":") and not value.endswith(":"))


def _splits(piece: str) -> list[tuple[str, str]]:
    return [(piece[:i], piece[i + 1:]) for i, ch in enumerate(piece) if ch == ":" and 0 < i < len(piece) - 1]


def range_candidates(text: str) -> RangeCandidates:
    pieces = [p.strip() for p in text.split(",") if p.strip()]
    if not pieces:
        return RangeCandidates((), ())
    first, last = pieces[0], pieces[-1]
    starts = [a for a, _ in _splits(first)] or [first]
    ends = [b for _, b in _splits(last)] or [last]
    return RangeCandidates(tuple(starts), tuple(ends))  # first-colon readings first


def range_hint(cursor: str, start: str, end: str) -> str:
    return (f'"{cursor}" is a range of message ids, not a single id. Use one end of it as the cursor: '
            f'cursor="{start}" with page=1 reads forward from the start of the range, cursor="{end}" with '
            f"page=-1 reads back from its end.")
