"""The Observer prompt's previous-observations cut (``previousObserverTokens``) against the plain version it
replaced: the same text and the same count of left-out lines, for any log and budget.

The cut runs on every Observer call whose log changed, so it was rewritten to do less work per call (each line's
role worked out once and memoised, each kept line counted once, the text's size taken from the kept lines' costs
plus its headers and markers). ``_plain_cut`` below is the version before that rewrite, kept here as the oracle."""

from __future__ import annotations

import re
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.prompts.observer import truncate_previous

COUNT = TiktokenCounter().count

_GAP_MARKER = "[{} observations truncated here]"
_PRIORITY = ("🔴", "✅")
_DATE = re.compile(r"^\s*Date:")
_THREAD_OPEN = re.compile(r"^\s*<thread\b")
_THREAD_CLOSE = re.compile(r"^\s*</thread>\s*$")
_OTHER_TAG = re.compile(r"^\s*</?[a-z][a-z-]*(\s[^>]*)?>\s*$")


def _content(line: str) -> bool:
    stripped = line.lstrip()
    if not stripped:
        return False
    if not stripped.startswith(("Date:", "<")):
        return True
    return not (_DATE.match(line) or _THREAD_OPEN.match(line) or _OTHER_TAG.match(line))


def _kind(line: str) -> int:
    if not _content(line):
        return 0
    return 2 if line.strip().lstrip("*-• ").startswith(_PRIORITY) else 1


def _plain_render(lines: list[str], kept: set[int]) -> str:
    out: list[str] = []
    dropped = before_thread = 0
    thread: str | None = None
    thread_shown = False
    day: str | None = None
    day_shown = False

    def gap(count: int) -> None:
        if count:
            out.append(_GAP_MARKER.format(count))

    def keep(line: str) -> None:
        nonlocal thread_shown, before_thread, dropped, day_shown
        if thread and not thread_shown:
            gap(before_thread)
            out.append(thread)
            thread_shown, before_thread = True, 0
        gap(dropped)
        dropped = 0
        if day and not day_shown:
            out.append(day)
            day_shown = True
        out.append(line)

    for index, line in enumerate(lines):
        if index in kept:
            keep(line)
        elif _content(line):
            dropped += 1
        elif _THREAD_OPEN.match(line):
            thread, thread_shown, day = line, False, None
            before_thread, dropped = dropped, 0
        elif _THREAD_CLOSE.match(line):
            if thread_shown:
                gap(dropped)
                dropped = 0
                out.append(line)
            else:
                dropped += before_thread
            thread, thread_shown, before_thread = None, False, 0
        elif _DATE.match(line):
            day, day_shown = line, False
    if out:
        gap(dropped + before_thread)
    return "\n".join(out)


def _plain_cut(observations: str, budget: int | None, count_text: Callable[[str], int]) -> tuple[str, int]:
    if budget is None:
        return observations, 0
    lines = observations.split("\n")
    kinds = [_kind(line) for line in lines]
    content = [i for i, kind in enumerate(kinds) if kind]
    if budget <= 0:
        return "", len(content)

    def cost(i: int) -> int:
        return count_text(lines[i]) + 1

    def size(text: str) -> int:
        return sum(count_text(line) + 1 for line in text.split("\n"))

    if sum(cost(i) for i in content) <= budget and size(observations) <= budget:
        return observations, 0
    tail: list[int] = []
    spent = 0
    for i in reversed(content):
        if spent + cost(i) > budget:
            break
        tail.append(i)
        spent += cost(i)
    oldest_tail = tail[-1] if tail else len(lines)
    head: list[int] = []
    ordinary = [t for t in tail if kinds[t] != 2]
    for i in reversed(content):
        if i >= oldest_tail or kinds[i] != 2:
            continue
        if len(head) + 1 > len(tail):
            break
        while spent + cost(i) > budget and ordinary and len(head) + 1 <= len(tail) - 1:
            victim = ordinary.pop()
            tail.remove(victim)
            spent -= cost(victim)
        if spent + cost(i) <= budget and len(head) + 1 <= len(tail):
            head.append(i)
            spent += cost(i)
    ordinary_left = [t for t in tail if kinds[t] != 2]
    tail_set, head_left = set(tail), list(head)

    def drop_one() -> int:
        if head_left and (len(head_left) >= len(tail_set) or not ordinary_left):
            victim = head_left.pop()
        elif ordinary_left:
            victim = ordinary_left.pop()
            tail_set.discard(victim)
        else:
            victim = min(tail_set)
            tail_set.discard(victim)
        return cost(victim)

    text = _plain_render(lines, tail_set | set(head_left))
    while (tail_set or head_left) and (excess := size(text) - budget) > 0:
        while excess > 0 and (tail_set or head_left):
            excess -= drop_one()
        text = _plain_render(lines, tail_set | set(head_left))
    kept = tail_set | set(head_left)
    if not kept:
        return "", len(content)
    return text, len(content) - len(kept)


_WORDS = ("deploy", "Cassandra", "4.1", "Berlin", "on-call", "v2", "budget", "€40", "the", "staging", "walrus")


@st.composite
def observation_logs(draw: st.DrawFn) -> str:
    """Logs as Observers and reflections write them, and some they should not: thread sections (closed or not),
    date headers, prioritised entries with details, blank lines, stray tags, lines that only look like headers."""
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        threaded = draw(st.booleans())
        if threaded:
            lines.append(draw(st.sampled_from(('<thread id="a">', '<thread id="b">', '  <thread id="c" x="1">',
                                                '<thread id="d"> with words'))))
        for day in range(draw(st.integers(0, 3))):
            lines.append(draw(st.sampled_from((f"Date: Mar {day + 1}, 2026", f"  Date: Apr {day + 1}, 2026"))))
            for n in range(draw(st.integers(0, 14))):
                mark = draw(st.sampled_from(("🔴", "🟡", "🟢", "✅", "")))
                body = " ".join(draw(st.lists(st.sampled_from(_WORDS), max_size=30)))
                lines.append(draw(st.sampled_from((f"* {mark} (10:{n:02d}) {body}", f"  * -> {mark} {body}",
                                                   f"- {mark} {body}", f"{mark}{body}"))))
                if draw(st.integers(0, 9)) == 0:
                    lines.append(draw(st.sampled_from(("", "   ", "<observations>", "</observations>",
                                                       "<notes about x", "Date:", "<current-task>"))))
        if threaded and draw(st.integers(0, 4)):
            lines.append(draw(st.sampled_from(("</thread>", "  </thread>  "))))
    return "\n".join(lines)


@settings(max_examples=200, deadline=None)
@given(observation_logs(), st.one_of(st.none(), st.integers(-5, 1200)))
def test_the_cut_equals_the_plain_version(log: str, budget: int | None) -> None:
    truncate_previous.cache_clear()  # computed, not remembered from another example
    assert truncate_previous(log, budget, COUNT) == _plain_cut(log, budget, COUNT)


@settings(max_examples=100, deadline=None)
@given(observation_logs(), st.integers(0, 600))
def test_the_cut_fits_its_budget(log: str, budget: int) -> None:
    text, dropped = truncate_previous(log, budget, COUNT)
    assert text == "" or COUNT(text) <= budget or sum(COUNT(line) + 1 for line in text.split("\n")) <= budget
    assert 0 <= dropped <= sum(1 for line in log.split("\n") if line.strip())
