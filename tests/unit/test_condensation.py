"""The deterministic condensation that holds the observation log's bound without a model (``core.condensation``)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.condensation import condense

PRIORITIES = ("🔴", "🟡", "🟢", "")
COUNT = TiktokenCounter().count
_MARKER = re.compile(r"^\* \[(\d+) earlier observations? folded")


def words(text: str) -> int:
    return len(text.split())


@st.composite
def logs(draw: st.DrawFn) -> tuple[str, list[str]]:
    """An observation log as Observers write it: days, prioritised entries, details under some of them."""
    entries: list[str] = []
    lines: list[str] = []
    for day in range(1, draw(st.integers(1, 4)) + 1):
        lines.append(f"Date: Mar {day}, 2026")
        for _ in range(draw(st.integers(0, 12))):
            mark = draw(st.sampled_from(PRIORITIES))
            n = len(entries)
            entry = f"* {mark} (10:{n % 60:02d}) entry{n} " + " ".join(draw(st.lists(
                st.sampled_from(("deploy", "Cassandra", "4.1", "Berlin", "on-call", "v2", "budget", "€40")),
                max_size=15)))
            if draw(st.booleans()):
                entry += f"\n  * -> detail of entry{n}"
            entries.append(entry)
            lines.append(entry)
    return "\n".join(lines), entries


@settings(max_examples=60, deadline=None)
@given(logs(), st.integers(1, 400))
def test_the_result_is_never_over_the_budget(log: tuple[str, list[str]], budget: int) -> None:
    text, _ = log
    for count in (words, COUNT):
        result = condense(text, budget, count)
        assert result.tokens == count(result.text) <= budget


@settings(max_examples=60, deadline=None)
@given(logs(), st.integers(60, 400))
def test_folded_entries_are_counted_and_the_rest_is_kept_verbatim(log: tuple[str, list[str]], budget: int) -> None:
    text, entries = log
    result = condense(text, budget, COUNT)
    kept = [e for e in entries if e in result.text]
    if count_cut(result.text, entries) == 0:
        assert len(kept) + result.folded == len(entries)
    if result.folded:
        marker = _MARKER.match(result.text)
        assert marker and int(marker.group(1)) == result.total_folded == result.folded


def count_cut(text: str, entries: list[str]) -> int:
    return int(text.rstrip().endswith("[…]"))


@settings(max_examples=60, deadline=None)
@given(logs(), st.integers(120, 400))
def test_high_priority_entries_outlive_lower_ones_outside_the_newest(log: tuple[str, list[str]], budget: int) -> None:
    text, entries = log
    result = condense(text, budget, COUNT)
    if count_cut(result.text, entries):
        return
    folded_red = [i for i, e in enumerate(entries) if "🔴" in e and e not in result.text]
    if not folded_red:
        return
    # a high-priority entry was folded: then no lower-priority entry older than it may have been kept
    oldest_folded_red = folded_red[0]
    kept_lower_older = [i for i, e in enumerate(entries[:oldest_folded_red]) if "🔴" not in e and e in result.text]
    assert kept_lower_older == []


def test_a_log_that_fits_is_left_as_it_is() -> None:
    text = "Date: Mar 1, 2026\n* 🔴 (10:00) User runs Cassandra 4.1"
    result = condense(text, 100, COUNT)
    assert result.text == text and result.folded == 0


def test_the_newest_and_the_high_priority_lines_are_kept_and_the_old_low_ones_folded() -> None:
    lines = ["Date: Mar 1, 2026", "* 🔴 (09:00) User asked to remember: on-call rotation changes Mondays 09:00 Berlin"]
    lines += [f"* 🟢 (09:{i:02d}) Assistant listed file {i} of the repository" for i in range(1, 40)]
    lines += ["Date: Mar 2, 2026", "* 🟡 (10:00) User is now working on the billing agent"]
    result = condense("\n".join(lines), 120, COUNT)
    assert "on-call rotation changes Mondays" in result.text
    assert "billing agent" in result.text
    assert "file 1 of" not in result.text
    assert result.text.splitlines()[0].startswith(f"* [{result.folded} earlier observations folded (Mar 1, 2026)")
    assert result.tokens <= 120


def test_a_second_condensation_adds_to_the_count_of_the_first() -> None:
    lines = ["Date: Mar 1, 2026", *(f"* 🟢 (09:{i:02d}) old detail number {i}" for i in range(30))]
    first = condense("\n".join(lines), 80, COUNT)
    later = "\n".join([first.text, "Date: Mar 5, 2026", *(f"* 🟢 (11:{i:02d}) newer detail {i}" for i in range(30))])
    second = condense(later, 80, COUNT)
    assert second.total_folded == first.folded + second.folded
    assert f"* [{second.total_folded} earlier observations folded (Mar 1, 2026 to Mar 5, 2026)" in second.text
    assert second.text.count("earlier observations folded") == 1


def test_a_single_entry_too_long_for_the_budget_is_cut() -> None:
    result = condense("* 🟡 " + "word " * 500, 30, COUNT)
    assert result.tokens <= 30 and result.text.startswith("* 🟡 word") and result.text.endswith("[…]")


def test_an_observation_group_whose_entries_are_all_folded_leaves_no_empty_tags() -> None:
    text = "\n".join(['<observation-group id="g1" range="m1:m9">', "Date: Mar 1, 2026",
                      *(f"* 🟢 (09:{i:02d}) a long low-priority line about step {i} of the build" for i in range(20)),
                      "</observation-group>", '<observation-group id="g2" range="m10:m12">', "Date: Mar 2, 2026",
                      "* 🔴 (10:00) User decided to ship on Friday", "</observation-group>"])
    result = condense(text, 80, COUNT)
    assert 'id="g1"' not in result.text and 'id="g2"' in result.text and "ship on Friday" in result.text
