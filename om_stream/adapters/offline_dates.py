"""Relative dates the offline Observer resolves against the message's own date, as the Observer's rules ask:
"(meaning Feb 9, 2026)" for a day it can work out ("tomorrow", "next Monday", "in 3 days", "March 10"), and
"(estimated …)" when only approximate ("next week", "in 2 months", "in March").

Vague references ("recently", "soon") and recurring ones ("every Monday") are left alone, and so are full dates,
which need no resolving. Matching runs on lower-cased text with one pattern compiled once.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

__all__ = ["resolve_dates"]

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_ABBR = tuple(m[:3].capitalize() for m in _MONTHS)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3}  # "a couple of" and "a few" lose their "a"
_MONTH_NAME = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
               r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_COUNT = r"(?:\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a couple of|a few)"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_TOKEN = re.compile(r"[a-z]+")
# a text without any of these words has no relative date to resolve: most texts are not searched
_TRIGGERS = frozenset(
    ["tomorrow", "yesterday", "week", "weekend", "month", "year", "day", "days", "weeks", "months", "years", *_WEEKDAYS,
     *_MONTHS, *(m[:3] for m in _MONTHS), "sept"])
_PAST = frozenset(["was", "were", "did", "had", "went", "came", "got", "born", "happened", "ago", "last",
                   "yesterday", "already"])
_PATTERN = re.compile(
    rf"\b(?:(?P<after>the day after tomorrow)|(?P<before>the day before yesterday)|(?P<near>tomorrow|yesterday)"
    rf"|(?P<wdir>next|last|this|coming|on|by|until|till|before)\s+(?P<weekday>{_WEEKDAY})\b(?!s)"
    rf"|(?P<pdir>next|last|this)\s+(?P<period>week|weekend|month|year)"
    rf"|in\s+(?P<ahead>{_COUNT})\s+(?P<ahead_unit>days?|weeks?|months?|years?)"
    rf"|(?P<ago>{_COUNT})\s+(?P<ago_unit>days?|weeks?|months?|years?)\s+ago"
    rf"|(?P<month>{_MONTH_NAME})\.?\s+(?P<mday>\d{{1,2}})(?:st|nd|rd|th)?\b(?!\s*,?\s*\d{{4}})(?![:/.]\d)"
    rf"|(?P<mday2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month2>{_MONTH_NAME})\b(?!\s*,?\s*\d{{4}})"
    rf"|(?:in|during|by|until)\s+(?:early\s+|mid\s+|late\s+)?(?P<month3>{_MONTH_NAME})\b(?!\s*\d)"
    rf")")


def _day(moment: date) -> str:
    return f"{_ABBR[moment.month - 1]} {moment.day}, {moment.year}"


def _month(year: int, month: int) -> str:
    return f"{_ABBR[month - 1]} {year}"


def _month_index(name: str) -> int:
    return next(i for i, full in enumerate(_MONTHS, start=1) if full.startswith(name[:3]))


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _COUNTS.get(word.removeprefix("a ").strip(), 1)


def _shift_months(today: date, months: int) -> tuple[int, int]:
    index = today.year * 12 + today.month - 1 + months
    return index // 12, index % 12 + 1


def _weekday(today: date, direction: str, weekday: str) -> str:
    target = _WEEKDAYS.index(weekday)
    if direction == "last":
        back = (today.weekday() - target) % 7 or 7
        return f"meaning {_day(today - timedelta(days=back))}"
    ahead = (target - today.weekday()) % 7
    if direction != "this" and ahead == 0:
        ahead = 7  # "next Monday", said on a Monday, is a week away
    return f"meaning {_day(today + timedelta(days=ahead))}"


def _period(today: date, direction: str, period: str) -> str | None:
    step = {"next": 1, "last": -1, "this": 0}[direction]
    if period == "week":
        if step == 0:
            return None  # the message's own week: nothing to add to its date
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return f"estimated week of {_day(monday)}"
    if period == "weekend":
        monday = today - timedelta(days=today.weekday())
        saturday = monday + timedelta(days=5) + timedelta(weeks=step)
        return f"meaning {_day(saturday)}"
    if step == 0:
        return None
    if period == "month":
        return f"estimated {_month(*_shift_months(today, step))}"
    return f"estimated {today.year + step}"


def _span(today: date, amount: int, unit: str, sign: int) -> str:
    unit = unit.rstrip("s")
    if unit == "day":
        return f"meaning {_day(today + timedelta(days=sign * amount))}"
    if unit == "week":
        return f"estimated {_day(today + timedelta(weeks=sign * amount))}"
    if unit == "month":
        return f"estimated {_month(*_shift_months(today, sign * amount))}"
    return f"estimated {today.year + sign * amount}"


def _calendar_day(today: date, month: int, mday: int, past: bool) -> str | None:
    """A day and month without a year: the next one on or after the message's date, or the last one before it
    when the message speaks in the past tense."""
    candidates = []
    for year in (today.year - 1, today.year, today.year + 1):
        try:
            candidates.append(date(year, month, mday))
        except ValueError:
            continue
    chosen = max((d for d in candidates if d < today), default=None) if past else \
        min((d for d in candidates if d >= today), default=None)
    return f"meaning {_day(chosen)}" if chosen else None


def _month_ahead(today: date, month: int) -> str:
    year = today.year if month >= today.month else today.year + 1
    return f"estimated {_month(year, month)}"


def resolve_dates(lowered: str, today: date, *, limit: int = 2) -> list[str]:
    """The resolutions of the first ``limit`` relative dates in ``lowered`` (lower-cased text), in order, each
    once: ``["meaning Feb 9, 2026", "estimated Mar 2026"]``."""
    found: list[str] = []
    words = _TOKEN.findall(lowered)
    if _TRIGGERS.isdisjoint(words):
        return found
    past = not _PAST.isdisjoint(words)
    for match in _PATTERN.finditer(lowered):
        groups = match.groupdict()
        note: str | None
        if groups["after"]:
            note = f"meaning {_day(today + timedelta(days=2))}"
        elif groups["before"]:
            note = f"meaning {_day(today - timedelta(days=2))}"
        elif groups["near"]:
            note = f"meaning {_day(today + timedelta(days=1 if groups['near'] == 'tomorrow' else -1))}"
        elif groups["weekday"]:
            note = _weekday(today, groups["wdir"], groups["weekday"])
        elif groups["period"]:
            note = _period(today, groups["pdir"], groups["period"])
        elif groups["ahead"]:
            note = _span(today, _count(groups["ahead"]), groups["ahead_unit"], 1)
        elif groups["ago"]:
            note = _span(today, _count(groups["ago"]), groups["ago_unit"], -1)
        elif groups["month"]:
            note = _calendar_day(today, _month_index(groups["month"]), int(groups["mday"]), past)
        elif groups["month2"]:
            note = _calendar_day(today, _month_index(groups["month2"]), int(groups["mday2"]), past)
        else:
            note = _month_ahead(today, _month_index(groups["month3"]))
        if note and note not in found:
            found.append(note)
            if len(found) >= limit:
                break
    return found
