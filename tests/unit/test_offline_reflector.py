"""The offline Reflector: at every level of the compression ladder its answer is within that level's budget
(under the task's target and under the input), measured with the project's token counter; it keeps requests to
remember, 🔴 lines and the newest entry before anything else, merges duplicates and writes one header per day.

Logs are drawn at random (days, marks, details, duplicates, long lines, thread sections, repeated day headers);
every 🔴 line carries a unique code so that keeping it can be checked exactly.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.adapters.offline_model import OfflineModel
from om_stream.adapters.offline_observer import date_header
from om_stream.adapters.offline_reflector import LEVEL_SHARES, MIN_BUDGET, level_budget, reflect
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.prompts.ladder import MAX_LEVEL
from om_stream.core.prompts.parsing import parse_reflector_output
from om_stream.core.prompts.tasks import ReflectorTask
from om_stream.replay import prose

TIKTOKEN = TiktokenCounter().count
COUNTERS: dict[str, Callable[[str], int]] = {"tiktoken": TIKTOKEN, "chars": lambda text: max(1, len(text) // 4)}


@dataclass
class Log:
    text: str
    remember: list[str] = field(default_factory=list)  # the codes of requests to remember
    high: list[str] = field(default_factory=list)  # the codes of 🔴 lines
    high_lines: list[str] = field(default_factory=list)  # those lines (requests to remember included)
    newest: str = ""


def random_log(rng: random.Random) -> Log:
    log = Log(text="")
    lines: list[str] = []
    sections = [None] if rng.random() < 0.7 else [f'<thread id="t{i}">' for i in range(rng.randint(2, 3))]
    codes = iter(range(10_000, 99_999))
    day = date(2026, 1, 5) + timedelta(days=rng.randint(0, 300))
    written: list[str] = []
    for section in sections:
        if section:
            lines.append(section)
        for _ in range(rng.randint(1, 5)):
            day += timedelta(days=rng.choice([0, 1, 1, 2, 9]))
            minute = rng.randint(0, 600)
            for _segment in range(rng.randint(1, 3)):  # segments of one day each repeat its header
                lines.append(date_header(day))
                for _ in range(rng.randint(1, 12)):
                    minute += rng.randint(1, 20)
                    clock = f"({min(23, minute // 60):02d}:{minute % 60:02d})"
                    roll = rng.random()
                    if written and roll < 0.05:
                        line = rng.choice(written)  # said again
                    elif roll < 0.15:
                        code = f"R{next(codes)}"
                        line = f"* 🔴 {clock} User asked the assistant to remember: the gate code is {code}."
                        log.remember.append(code)
                    elif roll < 0.35:
                        code = f"H{next(codes)}"
                        line = f"* {rng.choice(['🔴', '✅'])} {clock} User stated: my locker code is {code}."
                        log.high.append(code)
                    elif roll < 0.45:
                        line = f"* 🟢 {clock} {prose.sentence(rng).capitalize()}."
                    elif roll < 0.5:
                        line = f"* 🟡 {clock} Assistant called search_docs(query={prose.sentence(rng)})"
                    else:
                        length = rng.choice([1, 2, 2, 3, 12])
                        line = f"* 🟡 {clock} User stated: {prose.paragraph(rng, length)}"
                    if line.startswith(("* 🔴", "* ✅")) and line not in log.high_lines:
                        log.high_lines.append(line)
                    lines.append(line)
                    written.append(line)
                    for _ in range(rng.choice([0, 0, 1, 3])):
                        lines.append(f"  * -> {prose.sentence(rng, rng.randint(1, 3))}")
                lines.append("")
        if section:
            lines.append("</thread>")
    log.text = "\n".join(lines).strip()
    log.newest = written[-1]
    return log


def reflected(log: str, level: int, target: int, count: Callable[[str], int]) -> str:
    text = reflect(ReflectorTask(observations=log, level=level, target_tokens=target, input_tokens=count(log)),
                   count)
    parsed = parse_reflector_output(text)
    assert not parsed.empty and not parsed.degenerate, text
    return parsed.observations


def test_each_level_has_its_share_of_the_input_under_the_target() -> None:
    assert LEVEL_SHARES == (0.75, 0.6, 0.45, 0.3, 0.2)
    assert level_budget(1, 10_000, 4_000) == 2_400
    assert level_budget(2, 10_000, 4_000) == 1_800
    assert level_budget(4, 10_000, 4_000) == 800
    assert level_budget(2, 1_000, 4_000) == 999  # the target is the ceiling
    assert level_budget(4, 10_000, 500) == MIN_BUDGET  # a small log keeps a floor
    assert level_budget(0, 10_000, 150) == 149  # never the input's size
    assert level_budget(9, 10_000, 4_000) == level_budget(MAX_LEVEL, 10_000, 4_000)


@pytest.mark.parametrize("counter", list(COUNTERS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), target_share=st.floats(0.05, 1.3))
def test_every_level_meets_its_budget(counter: str, seed: int, target_share: float) -> None:
    count = COUNTERS[counter]
    log = random_log(random.Random(seed))
    tokens = count(log.text)
    target = max(2, int(tokens * target_share))
    for level in range(MAX_LEVEL + 1):
        budget = level_budget(level, target, tokens)
        out = reflected(log.text, level, target, count)
        assert count(out) <= budget, (level, count(out), budget)
        assert count(out) < target and count(out) < tokens
        for section in re.split(r"^</?thread\b.*$", out, flags=re.MULTILINE):
            headers = re.findall(r"^Date: .+$", section, re.MULTILINE)
            assert len(headers) == len(set(headers)), f"a day header repeated at level {level}:\n{out}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), level=st.integers(0, MAX_LEVEL))
def test_what_matters_goes_last(seed: int, level: int) -> None:
    log = random_log(random.Random(seed))
    tokens = TIKTOKEN(log.text)
    budget = level_budget(level, tokens, tokens)
    out = reflected(log.text, level, tokens, TIKTOKEN)
    high_cost = sum(TIKTOKEN(line) + 12 for line in log.high_lines)  # each with room for its own day header
    if high_cost <= budget / 2:
        for code in [*log.remember, *log.high]:
            assert code in out, f"{code} dropped at level {level} (🔴 lines {high_cost} of budget {budget})"
    elif sum(TIKTOKEN(line) + 12 for line in log.high_lines if "remember" in line) <= budget / 2:
        for code in log.remember:
            assert code in out, f"request to remember {code} dropped at level {level}"
    if high_cost + 2 * TIKTOKEN(log.newest) <= budget / 2 and TIKTOKEN(log.newest) <= budget * 0.1:
        newest = re.sub(r"^\* \S+ \(\d\d:\d\d\) ", "", log.newest)
        assert newest.split()[0] in out, f"the newest entry went at level {level}: {log.newest}"


def test_duplicates_merge_and_details_go_before_lines() -> None:
    repeated = "* 🟡 (10:00) User stated: the billing export duplicates every second request."
    log = "\n".join(["Date: Mar 2, 2026", repeated, "  * -> detail one about the export", "* 🔴 (10:05) User "
                     "stated: my locker code is 5521.", "Date: Mar 2, 2026", repeated.replace("10:00", "11:00"),
                     "  * -> detail two about the export"])
    out = reflected(log, 0, 1_000, TIKTOKEN)
    assert out.count("the billing export duplicates") == 1
    assert out.count("Date: Mar 2, 2026") == 1
    assert "(11:00) User stated: the billing export" in out  # the newest occurrence stays
    tight = reflected(log, 4, TIKTOKEN(log), TIKTOKEN)
    assert "5521" in tight and "detail" not in tight


def _pasted_table(rng: random.Random, rows: int) -> str:
    """A CSV table as the offline Observer writes it after a request it came with: its lines run on, uncapitalised
    (the message had it on lines of its own)."""
    names = ("billing", "auth", "search", "ingest", "notifier", "gateway")
    body = [f"{rng.choice(names)},{rng.randint(1_000, 999_999)},{rng.randint(0, 999)},{rng.choice(names)}"
            for _ in range(rows)]
    return " ".join(["component,requests,errors,owner_team", *body])


def test_a_request_loses_the_table_pasted_with_it_before_an_older_request_goes() -> None:
    """Seen in the shape replay documents/49/seed 295: a later request carrying a pasted table kept its 130 tokens
    of rows while the older request ("my cousin Oskar lands on May 15") was dropped to fit."""
    table = _pasted_table(random.Random(7), 14)
    log = "\n".join([
        "Date: Jan 5, 2026",
        "* 🔴 (12:46) User asked the assistant to remember: Don't forget that my cousin Oskar lands on May 15 and "
        "I'm picking them up. (meaning May 15, 2026)",
        f"* 🔴 (14:39) User asked the assistant to remember: Please note this for later: my locker code is 7555. "
        f"{table}",
        "* 🔴 (15:02) User stated: The lease on our office ends on 2027-02-10. The reading list improves most of "
        "the backlog.",
        "* 🟡 (15:18) Assistant: The lease agreement postpones the kitchen renovation while the retry policy "
        "anticipates the cleanup task."])
    tokens = TIKTOKEN(log)
    out = reflected(log, 2, int(tokens * 0.75), TIKTOKEN)
    assert level_budget(2, int(tokens * 0.75), tokens) == MIN_BUDGET  # the pressure the replay had
    for needle in ("Oskar", "May 15", "7555", "2027-02-10"):
        assert needle in out, f"{needle} dropped:\n{out}"
    assert "component,requests" not in out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), level=st.integers(0, MAX_LEVEL))
def test_a_pasted_table_never_outlives_another_request_to_remember(seed: int, level: int) -> None:
    rng = random.Random(seed)
    log = random_log(rng)
    asked = [line for line in log.text.splitlines() if "User asked the assistant to remember" in line]
    if not asked:
        return
    lines = [f"{line} {_pasted_table(rng, rng.randint(3, 20))}" if "remember" in line and rng.random() < 0.5
             else line for line in log.text.splitlines()]
    text = "\n".join(lines)
    tokens = TIKTOKEN(text)
    out = reflected(text, level, tokens, TIKTOKEN)
    if sum(TIKTOKEN(line) + 12 for line in asked) <= level_budget(level, tokens, tokens) / 2:
        for code in log.remember:
            assert code in out, f"request to remember {code} dropped at level {level}"


def test_a_correction_outlives_the_fact_it_replaces() -> None:
    rng = random.Random(2)
    filler = [f"* 🟡 (09:{i:02d}) User stated: {prose.paragraph(rng, 2)}" for i in range(30)]
    log = "\n".join(["Date: Mar 2, 2026", "* 🔴 (08:00) User stated: I live in Dublin these days.", *filler,
                     "* 🔴 (10:00) User stated: I moved from Dublin to Marseille last month, so I live in "
                     "Marseille now."])
    out = reflected(log, 4, TIKTOKEN(log), TIKTOKEN)
    assert "Marseille" in out
    assert "I live in Dublin these days" not in out


def test_older_low_priority_lines_fold_into_their_topics_at_level_3() -> None:
    lines = ["Date: Mar 2, 2026"] + [f"* 🟡 (09:{i:02d}) Kafka partitions rebalanced, run {i}." for i in range(20)] \
        + ["* 🔴 (10:00) User stated: I prefer tea."]
    out = reflected("\n".join(lines), 3, 10_000, TIKTOKEN)
    assert re.search(r"^\* 🟢 \(09:00\) Also discussed: Kafka, partitions, rebalanced", out, re.MULTILINE), out
    assert "I prefer tea." in out


def test_thread_sections_are_kept_apart() -> None:
    chatter = [f"* 🟡 (10:{i:02d}) User asked: {prose.question(random.Random(i))}" for i in range(6)]
    log = "\n".join(['<thread id="a1">', "Date: Mar 2, 2026", "* 🔴 (09:00) User stated: my locker code is 1111.",
                     *chatter, "</thread>", '<thread id="b2">', "Date: Mar 2, 2026",
                     "* 🔴 (09:05) User stated: my locker code is 2222.", *chatter, "</thread>"])
    out = reflected(log, 1, 1_000, TIKTOKEN)
    first, second = out.index('<thread id="a1">'), out.index('<thread id="b2">')
    assert first < out.index("1111") < second < out.index("2222")
    assert out.count("Date: Mar 2, 2026") == 2


@pytest.mark.parametrize("log", ["x", "Date: Mar 2, 2026", "* 🔴 (09:00) User stated: my name is Ada."])
def test_a_tiny_log_never_grows(log: str) -> None:
    text = OfflineModel(TIKTOKEN).reflect(ReflectorTask(observations=log, level=2, target_tokens=5,
                                                        input_tokens=TIKTOKEN(log)))
    assert TIKTOKEN(parse_reflector_output(text).observations) <= TIKTOKEN(log)
