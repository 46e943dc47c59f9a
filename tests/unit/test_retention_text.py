"""Retention's text rules (``core.retention``): how observation entries are dated and cut at a cutoff.

The property tests build random observation texts the way Observers and Reflectors write them (a ``Date:`` header
per day, entries with and without ``(HH:MM)`` times, details under them, blank lines, ``<thread>`` sections, a
header without a date, lines above the first header) and know, from how they built each entry, when it starts.
They check the cut against that knowledge, never against the cut's own parser."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import pytest

from om_stream.core.retention import DAY_MS, cut_text, cutoff, oldest_entry, parse_day, segment_expired, window_ms

BASE = date(2026, 3, 1)
UNDATED_AT = int(datetime(2026, 3, 20, tzinfo=UTC).timestamp() * 1000)


def ms(day: date, hours: int = 0, minutes: int = 0) -> int:
    return int(datetime(day.year, day.month, day.day, hours, minutes, tzinfo=UTC).timestamp() * 1000)


TEXT = """Date: Mar 6, 2026
* 🔴 (09:14) User stated they move to Lyon in September.
* 🟡 (09:20) Assistant compared three movers:
  * -> MoveFast: cheapest
  * ✅ User chose Lyon Express.

Date: Mar 7, 2026
* 🔴 (10:00) User asked about schools.
* 🟢 a line without a time"""


def test_an_entry_starts_at_its_minute_and_its_details_go_with_it() -> None:
    day = date(2026, 3, 6)
    assert oldest_entry(TEXT, UNDATED_AT) == ms(day, 9, 14)
    kept = cut_text(TEXT, ms(day, 9, 15), UNDATED_AT)
    assert (kept.removed, kept.kept) == (1, 3)
    assert "Lyon in September" not in kept.text and "MoveFast" in kept.text
    later = cut_text(TEXT, ms(day, 9, 21), UNDATED_AT)
    assert "Date: Mar 6" not in later.text and "MoveFast" not in later.text  # the day's header went with it
    assert later.text.startswith("Date: Mar 7, 2026\n* 🔴 (10:00)")


def test_an_entry_without_a_time_starts_with_its_day_so_it_goes_first() -> None:
    cut = cut_text(TEXT, ms(date(2026, 3, 7), 0, 1), UNDATED_AT)
    assert cut.text == "Date: Mar 7, 2026\n* 🔴 (10:00) User asked about schools."


def test_a_text_with_nothing_expired_is_given_back_as_it_is() -> None:
    text = TEXT + "\n\n\n"  # even its blank lines: a context changes only when something in it expires
    assert cut_text(text, ms(date(2026, 3, 6), 9, 14), UNDATED_AT).text is text
    assert cut_text(text, None, UNDATED_AT).text is text


def test_everything_expired_leaves_nothing_not_even_structure() -> None:
    text = '<thread id="a">\n' + TEXT + "\n</thread>"
    assert cut_text(text, ms(date(2026, 3, 8)), UNDATED_AT).text == ""


def test_lines_without_any_date_go_with_the_segment_they_are_in() -> None:
    text = "* 🔴 something the model wrote without a date\n  * -> its detail"
    assert cut_text(text, UNDATED_AT, UNDATED_AT).text is text  # the segment's newest message is not past it
    assert cut_text(text, UNDATED_AT + 1, UNDATED_AT).text == ""


def test_lines_above_the_first_header_take_its_date() -> None:
    text = "* 🔴 (23:59) a preamble\nDate: Mar 6, 2026\n* 🔴 (09:00) first"
    assert oldest_entry(text, UNDATED_AT) == ms(date(2026, 3, 6), 9, 0)
    assert cut_text(text, ms(date(2026, 3, 6), 9, 1), UNDATED_AT).text == "* 🔴 (23:59) a preamble"


def test_headers_in_the_forms_models_write_them() -> None:
    assert parse_day("Jun 6, 2026") == parse_day("June 6 2026") == parse_day("2026-06-06") == date(2026, 6, 6)
    assert parse_day("Jun 31, 2026") is None and parse_day("someday") is None


def test_the_window_and_its_cutoff() -> None:
    assert window_ms(None) is None and window_ms(30) == 30 * DAY_MS
    assert cutoff(10 * DAY_MS, window_ms(3)) == 7 * DAY_MS and cutoff(10, None) is None
    assert segment_expired(99, 100) and not segment_expired(100, 100) and not segment_expired(0, None)


# -- properties ------------------------------------------------------------------------------------------------------


@dataclass
class _Written:
    lines: list[str] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=dict)  # entry tag -> when it starts (what the test knows)
    details: dict[str, list[str]] = field(default_factory=dict)  # entry tag -> the tags of its details


def _random_text(rng: random.Random) -> _Written:
    """An observation text, each entry tagged ``E<n>`` and each detail ``D<n>``, with what each entry's start is
    by the rules: its header's day and its own time; above every header, the first dated header with an entry;
    under a header without a date, or with no dated header at all, ``UNDATED_AT``."""
    written = _Written()
    blocks: list[tuple[date | None, bool, list[tuple[int | None, int]]]] = []  # (day, header written, entries)
    top = rng.random() < 0.2  # entries above every header
    if top:
        blocks.append((None, False, [(rng.choice([None, rng.randrange(24 * 60)]), rng.randrange(3))
                                     for _ in range(rng.randint(1, 2))]))
    for _ in range(rng.randint(0, 5)):
        day = BASE + timedelta(days=rng.randrange(12)) if rng.random() > 0.1 else None  # None: no date in it
        entries = [(rng.choice([None, *[rng.randrange(24 * 60)] * 3]), rng.randrange(3))
                   for _ in range(rng.randint(0, 4))]
        blocks.append((day, True, entries))
    first_dated = next((d for d, header, entries in blocks if header and d is not None and entries), None)
    counter = 0
    sections = rng.random() < 0.3
    if sections:
        written.lines.append('<thread id="t1">')
    for day, header, entries in blocks:
        if header:
            written.lines.append(f"Date: {day.strftime('%b')} {day.day}, {day.year}" if day else "Date: someday")
        dated = day if header else first_dated
        for minute, details in entries:
            counter += 1
            tag = f"E{counter}"
            time = f"({minute // 60:02d}:{minute % 60:02d}) " if minute is not None else ""
            written.lines.append(f"* {rng.choice(['🔴', '🟡', '🟢', '✅'])} {time}{tag} something said")
            start = UNDATED_AT if dated is None else ms(dated) + (minute or 0) * 60_000
            written.starts[tag] = start
            written.details[tag] = []
            for index in range(details):
                detail = f"D{counter}x{index}"
                written.details[tag].append(detail)
                written.lines.append(f"  * -> {detail} a detail")
            if rng.random() < 0.2:
                written.lines.append("")
        if rng.random() < 0.3:
            written.lines.extend([""] * rng.randint(1, 2))
    if sections:
        written.lines.append("</thread>")
    return written


def _tags(text: str, prefix: str) -> set[str]:
    return {word for line in text.split("\n") for word in line.split()
            if word.startswith(prefix) and word[1:2].isdigit()}


def _subsequence(part: list[str], whole: list[str]) -> bool:
    lines = iter(whole)
    return all(any(line == other for other in lines) for line in part)


@pytest.mark.parametrize("seed", range(400))
def test_a_cut_keeps_exactly_the_entries_at_or_after_the_cutoff(seed: int) -> None:
    rng = random.Random(seed)
    written = _random_text(rng)
    text = "\n".join(written.lines)
    for _ in range(6):
        before = ms(BASE + timedelta(days=rng.randrange(-1, 14))) + rng.randrange(DAY_MS // 60_000) * 60_000
        if rng.random() < 0.2:
            before = UNDATED_AT + rng.choice([0, 1])
        cut = cut_text(text, before, UNDATED_AT)
        kept = {tag for tag, start in written.starts.items() if start >= before}
        assert _tags(cut.text, "E") == kept, (before, text, cut.text)
        assert _tags(cut.text, "D") == {d for tag in kept for d in written.details[tag]}
        assert (cut.kept, cut.removed) == (len(kept), len(written.starts) - len(kept))
        assert _subsequence(cut.text.split("\n") if cut.text else [], written.lines), "it only removes whole lines"
        if not cut.changed:
            assert cut.text is text
        else:
            assert "\n\n\n" not in cut.text and cut.text == cut.text.strip("\n")
            heads = [i for i, line in enumerate(cut.text.split("\n")) if line.startswith("Date:")]
            lines = cut.text.split("\n")
            for position, index in enumerate(heads):  # no header is left without an entry under it
                end = heads[position + 1] if position + 1 < len(heads) else len(lines)
                assert any(line.startswith("* ") for line in lines[index + 1:end]), cut.text
        oldest = oldest_entry(cut.text, UNDATED_AT)
        assert oldest is None or oldest >= before


@pytest.mark.parametrize("seed", range(400))
def test_a_text_cut_twice_is_the_text_cut_once_at_the_later_cutoff(seed: int) -> None:
    """What the purge stores (cut at its cutoff) renders later exactly as the original cut at the later cutoff: the
    contexts of a record do not depend on when its purges ran."""
    rng = random.Random(seed)
    text = "\n".join(_random_text(rng).lines)
    first = ms(BASE + timedelta(days=rng.randrange(14))) + rng.randrange(1440) * 60_000
    second = first + rng.choice([0, 60_000, DAY_MS, rng.randrange(5 * DAY_MS)])
    once = cut_text(text, first, UNDATED_AT).text
    assert cut_text(once, second, UNDATED_AT).text == cut_text(text, second, UNDATED_AT).text
    assert cut_text(once, first, UNDATED_AT).text == once
