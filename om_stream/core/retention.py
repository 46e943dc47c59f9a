"""Retention as pure rules: the window, the cutoff, and how an observation text is dated and cut at the cutoff.

A deployment may keep personal data for a bounded time (``OM_LIFECYCLE_RETENTION_DAYS``; a record may shorten it
with an override). Once the window has passed, a message whose ``created_at`` is older than ``now - window`` (the
**cutoff**), and an observation entry dated before it, must not appear anywhere: not in a context, a recall result
or an event, whether or not the purge (``core.expiry``) has removed them from the stores yet. Everything here is a
function of its arguments (time included), so the renderer, the recall tool and the purge cut the same texts at the
same place, and a text cut once and cut again later is the text cut once at the later cutoff.

How an observation text is dated (the Observer's format, ``core.prompts.observer``)::

    Date: Jun 6, 2026                       <- a header: the day of every entry under it (UTC, as the Observer's
    * 🔴 (09:14) User stated ...               transcript shows times)
      * -> detail                           <- details belong to the entry above them
    * 🟡 (09:20) ...                        <- an entry with a time starts at that minute; without one, at 00:00

* An entry is the unit: a top-level line and the lines under it (indented, or not list items). It is **expired**
  when its start is before the cutoff. Starting an entry at the first minute it may describe is the cautious side:
  it goes when its oldest possible message goes (at most a minute early with a time, a day early without one),
  never after.
* An entry above every header is dated by the text's first dated header that has entries (the Observer writes
  the header first: a line before it is the same batch). An entry under a header without a date, or in a text
  without any dated header, is dated by ``undated_at``: the caller passes the time of the newest message the
  segment covers, so such an entry goes with its segment (``segment_expired``).
* Structure (headers, tag lines such as ``<thread id="…">``) is kept while something under it is; blank lines are
  kept between kept lines (one where there were several). A text with nothing expired is returned unchanged, so a
  rendered context changes only when something in it expires (providers' prompt caches keep hitting).

A segment as a whole also expires with the messages it covers: once its newest message (``boundary_at``) is older
than the cutoff, every message it describes is gone, whatever dates its model wrote (``segment_expired``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache

__all__ = ["DAY_MS", "MAX_RETENTION_DAYS", "Cut", "ExpiryCounts", "SegmentText", "cut_text", "cutoff",
           "oldest_entry", "parse_day", "segment_expired", "window_ms"]

DAY_MS = 86_400_000
MAX_RETENTION_DAYS = 36_500

_HEADER = re.compile(r"^\s*Date:\s*(.+?)\s*$")
_TAG = re.compile(r"^\s*</?[A-Za-z][\w-]*(\s[^<>]*)?>\s*$")
_CLOSE_TAG = re.compile(r"^\s*</")
_ITEM = re.compile(r"^(\s*)(?:[-*•]|\d+[.)])\s+\S")
_TIME = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(?:\S{1,3}\s+)?\((\d{1,2}):(\d{2})\)")
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                        "nov", "dec"), start=1)}
_NAMED_DATE = re.compile(r"([A-Za-z]{3,9})\.?\s+(\d{1,2}),?\s+(\d{4})")
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def window_ms(days: int | None) -> int | None:
    """A window of ``days`` days in milliseconds (None: keep forever)."""
    return None if days is None else days * DAY_MS


def cutoff(now_ms: int, window: int | None) -> int | None:
    """What is older than this (epoch ms) is past the window at ``now_ms``; None without a window."""
    return None if window is None else now_ms - window


def segment_expired(boundary_at: int, before: int | None) -> bool:
    """Every message a segment covers is past the window: the segment goes whole."""
    return before is not None and boundary_at < before


def parse_day(text: str) -> date | None:
    """The day a header names: ``Jun 6, 2026``, ``June 6 2026`` or ``2026-06-06`` (None: no date in it)."""
    match = _NAMED_DATE.search(text)
    if match:
        month = _MONTHS.get(match.group(1)[:3].lower())
        if month:
            try:
                return date(int(match.group(3)), month, int(match.group(2)))
            except ValueError:
                return None
    iso = _ISO_DATE.search(text)
    if iso:
        try:
            return date(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
        except ValueError:
            return None
    return None


def _day_start(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True)
class SegmentText:
    """A stored observation segment as the purge reads it: its text and the time of the newest message it covers."""

    segment_id: str
    text: str
    boundary_at: int


@dataclass(frozen=True)
class ExpiryCounts:
    """What a store's purge removed (``ports.ExpiringStore.expire``): message rows, segments removed whole,
    segments written again without their expired entries, threads whose derived metadata went, cached model
    results."""

    messages: int = 0
    observations: int = 0
    rewritten: int = 0
    threads: int = 0
    cycle_results: int = 0

    def __add__(self, other: ExpiryCounts) -> ExpiryCounts:
        return ExpiryCounts(self.messages + other.messages, self.observations + other.observations,
                            self.rewritten + other.rewritten, self.threads + other.threads,
                            self.cycle_results + other.cycle_results)


@dataclass(frozen=True)
class _Line:
    text: str
    kind: str  # "entry" | "detail" | "header" | "tag" | "blank"
    entry: int = -1  # the entry a detail or an entry line belongs to


@dataclass(frozen=True)
class _Parsed:
    lines: tuple[_Line, ...]
    starts: tuple[int, ...]  # each entry's start (epoch ms), by entry index


@lru_cache(maxsize=1024)
def _parse(text: str, undated_at: int) -> _Parsed:
    """The text as lines, each entry dated. Memoised: stored segment texts never change, and a context renders the
    same segments again and again (only those with something expired are cut: ``context.visible_texts``). Bounded
    lower than the renderer's caches: a parsed text holds its lines apart."""
    lines: list[_Line] = []
    heads: list[int | None] = []  # per entry: the index of the header above it (None: above every header)
    days: dict[int, int | None] = {}  # header line index -> its day's start (None: no date in it)
    indent: int | None = None
    current = -1  # the entry later lines may belong to
    header: int | None = None
    for raw in text.split("\n"):
        if not raw.strip():
            lines.append(_Line(raw, "blank"))
            continue
        dated = _HEADER.match(raw)
        if dated:
            day = parse_day(dated.group(1))
            header = len(lines)
            days[header] = _day_start(day) if day is not None else None
            lines.append(_Line(raw, "header"))
            indent, current = None, -1
            continue
        if _TAG.match(raw):
            lines.append(_Line(raw, "tag"))
            current = -1
            continue
        item = _ITEM.match(raw)
        depth = len(item.group(1)) if item else None
        if current >= 0 and (depth is None or (indent is not None and depth > indent)):
            lines.append(_Line(raw, "detail", current))
            continue
        if depth is not None:
            indent = depth if indent is None else min(indent, depth)
        current = len(heads)
        heads.append(header)
        lines.append(_Line(raw, "entry", current))
    # entries above every header: dated by the first dated header that has an entry (an empty header is dropped
    # by the first cut, and a cut must not change how the entries it keeps are dated)
    first = next((days[h] for h in heads if h is not None and days[h] is not None), None)
    starts = tuple(_entry_start(line.text, first if head is None else days[head], undated_at)
                   for line, head in zip((x for x in lines if x.kind == "entry"), heads, strict=True))
    return _Parsed(tuple(lines), starts)


def _entry_start(line: str, day_start: int | None, undated_at: int) -> int:
    if day_start is None:
        return undated_at
    timed = _TIME.match(line)
    if timed:
        hours, minutes = int(timed.group(1)), int(timed.group(2))
        if hours < 24 and minutes < 60:
            return day_start + hours * 3_600_000 + minutes * 60_000
    return day_start


def oldest_entry(text: str, undated_at: int) -> int | None:
    """When the text's oldest entry starts (None: it has no entry): when the first cut of it is due."""
    starts = _parse(text, undated_at).starts
    return min(starts) if starts else None


@dataclass(frozen=True)
class Cut:
    text: str  # the text without its expired entries (the text itself when nothing expired)
    removed: int  # entries removed
    kept: int  # entries kept

    @property
    def changed(self) -> bool:
        return self.removed > 0


def cut_text(text: str, before: int | None, undated_at: int) -> Cut:
    """``text`` without the entries that start before ``before`` (see the module's rules)."""
    parsed = _parse(text, undated_at)
    if before is None or not parsed.starts or min(parsed.starts) >= before:
        return Cut(text, 0, len(parsed.starts))
    expired = {i for i, start in enumerate(parsed.starts) if start < before}
    kept = [line for line in parsed.lines if line.kind in ("header", "tag", "blank") or line.entry not in expired]
    return Cut(_tidy(kept), len(expired), len(parsed.starts) - len(expired))


def _tidy(lines: list[_Line]) -> str:
    """Kept lines without the structure left empty: a header with no entry before the next header (or the end), an
    opening tag directly followed by its closing tag, and blank lines at the ends or after another blank line."""
    changed = True
    while changed:
        changed = False
        solid = [i for i, line in enumerate(lines) if line.kind != "blank"]
        drop: set[int] = set()
        for position, index in enumerate(solid):
            line = lines[index]
            following = lines[solid[position + 1]] if position + 1 < len(solid) else None
            if line.kind == "header" and not _has_entry_before_header(lines, index):
                drop.add(index)
            elif (line.kind == "tag" and not _CLOSE_TAG.match(line.text) and following is not None
                  and following.kind == "tag" and _CLOSE_TAG.match(following.text)):
                drop.update((index, solid[position + 1]))
        if drop:
            lines = [line for i, line in enumerate(lines) if i not in drop]
            changed = True
    out: list[str] = []
    for line in lines:
        if line.kind == "blank" and (not out or not out[-1].strip()):
            continue
        out.append(line.text)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def _has_entry_before_header(lines: list[_Line], header: int) -> bool:
    for line in lines[header + 1:]:
        if line.kind == "header":
            return False
        if line.kind in ("entry", "detail"):
            return True
    return False
