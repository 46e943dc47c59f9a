"""The soak's judge (``bench/soak_judge.py``): it must see a lost, a duplicated and a regressed message when there
is one, and its fake Reflector must neither hide one nor fail to compress."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from om_stream.testing.fake_openai import RecordedRequest, Reply
from tests.support.bench import load_bench

judge = load_bench("soak_judge")


def _request(*contents: str) -> RecordedRequest:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": c} for c in contents]}
    return RecordedRequest(0, "/v1/chat/completions", {}, body, 0.0)


def _context(thread: str, version: int, through: int, observations: str = "", raw: tuple[str, ...] = ()) -> bytes:
    return json.dumps({"version": version, "through_message_id": f"{thread}-m{through}",
                       "observations": observations,
                       "messages": [{"parts": [{"type": "text", "text": text}]} for text in raw]}).encode()


def test_markers_name_single_messages_and_even_ranges() -> None:
    assert judge.markers("a [t1#4] b [t2#0-6] c [t1#8-8] [x#1] [t3#]") == [
        ("t1", 4), ("t2", 0), ("t2", 2), ("t2", 4), ("t2", 6), ("t1", 8)]


def test_the_observer_copies_each_user_marker_of_the_history_only() -> None:
    reply = judge.answer(_request("## Previous observations\n\n* [t1#0]", "## New message history to observe\n\n"
                                  "User (09:00): [t1#2] my budget\nAssistant: t1 3: noted\nUser: [t1#4] again"))
    assert isinstance(reply, Reply)
    assert judge.markers(reply.content) == [("t1", 2), ("t1", 4)]
    assert reply.content.startswith("<observations>\nDate: ") and reply.content.endswith("</observations>")


def test_the_reflector_folds_markers_into_ranges_keeping_gaps_and_repeats() -> None:
    log = "\n".join([f"* 🔴 (09:00) User set the budget and the review date [t1#{i}]" for i in (0, 2, 4, 8, 10)]
                    + ["* 🔴 (09:00) User set budgets [t1#12-20]", "* 🔴 (09:00) again [t1#4]"])
    reply = judge.answer(_request(f"## Observations to reflect on\n\n{log}\n\n## Your task\n\nRewrite these."))
    assert isinstance(reply, Reply)
    found = judge.markers(reply.content)
    assert sorted(found) == sorted([("t1", i) for i in (0, 2, 4, 8, 10, 12, 14, 16, 18, 20)] + [("t1", 4)])
    assert "[t1#0-4]" in reply.content and "[t1#8-20]" in reply.content  # 6 was never there: a gap stays one
    assert len(reply.content) < len(log)


async def test_the_verdict_counts_lost_duplicated_regressed_and_two_contents() -> None:
    verdict = judge.ContextJudge()
    verdict.seen("t1", _context("t1", 1, 1, raw=("[t1#0] budget", "t1 1: noted")))
    verdict.seen("t1", _context("t1", 2, 3, "* [t1#0]", ("[t1#2] budget", "t1 3: noted")))
    verdict.seen("t1", _context("t1", 1, 1, raw=("[t1#0] budget", "t1 1: noted")))  # sent again as it was: fine
    assert verdict.verdict({"t1": 4}) == {"lost": 0, "duplicated": 0, "regressed_threads": 0,
                                          "two_contents_threads": 0}
    verdict.seen("t2", _context("t2", 3, 5, "* [t2#0-2]\n* [t2#2]", ("[t2#6]",)))  # 4 lost, 2 twice
    verdict.seen("t2", _context("t2", 2, 3, "* [t2#0]"))  # an older version with a new content: a regression
    assert verdict.verdict({"t1": 4, "t2": 8}) == {"lost": 1, "duplicated": 1, "regressed_threads": 1,
                                                   "two_contents_threads": 0}
    verdict.seen("t2", _context("t2", 3, 5, "* [t2#0-6]"))
    assert verdict.verdict({"t2": 8})["two_contents_threads"] == 1
    assert verdict.verdict({"t2": 8})["lost"] == 0  # the newest version's last context is the one kept


async def test_an_agent_waits_until_a_context_covers_its_message() -> None:
    verdict = judge.ContextJudge()
    waiting = asyncio.ensure_future(verdict.wait("t1", 3, timeout=5))
    await asyncio.sleep(0)
    verdict.seen("t1", _context("t1", 1, 1))
    await asyncio.sleep(0)
    assert not waiting.done()
    verdict.seen("t1", _context("t1", 2, 5))
    await asyncio.wait_for(waiting, 1)
    await verdict.wait("t1", 4, timeout=0.01)  # covered already
    with pytest.raises(TimeoutError):
        await verdict.wait("t1", 6, timeout=0.05)


def test_the_ledger_counts_a_request_answered_twice_and_tells_a_late_first_answer_apart() -> None:
    ledger = judge.ProviderLedger()
    first, other = _request("## New message history to observe\n\nUser: [t1#2] x"), _request("y")
    ledger.heard(first, Reply("a", delay=15.0), True)  # the gateway had given up waiting
    ledger.heard(first, Reply("a"), True)
    ledger.heard(other, Reply("b"), True)
    ledger.heard(other, Reply("b"), False)
    summary: dict[str, Any] = ledger.summary()
    assert summary == {"model_answers": 4, "paid_twice": 2, "paid_twice_after_timeout": 1, "paid_twice_other": 1}
    assert ledger.duplicates[0].thread == "t1"
    # the usual order: the retry is answered at once, the request it replaced later, once its delay ran out
    late_last = judge.ProviderLedger()
    late_last.heard(first, Reply("a"), True)
    late_last.heard(first, Reply("a", delay=15.0), False)
    assert late_last.summary()["paid_twice_after_timeout"] == 1


def test_percentiles_and_slopes() -> None:
    assert judge.percentile([], 0.99) == 0.0
    assert judge.percentile([float(v) for v in range(1, 101)], 0.99) == 99.0
    assert judge.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert judge.slope([(0.0, 10.0), (1.0, 12.0), (2.0, 14.0)]) == pytest.approx(2.0)
    assert judge.slope([(1.0, 5.0), (1.0, 9.0)]) == 0.0


def test_the_soak_reads_durations_and_slopes_the_second_half_only() -> None:
    soak = load_bench("soak")
    assert [soak.seconds(t) for t in ("600", "600s", "10m", "1h")] == [600.0, 600.0, 600.0, 3600.0]
    # the first half climbs (warm-up), the second is flat: a leak is judged on the second half alone
    rows = [{"t_s": t, "w0_rss_mb": min(t, 300.0), "lag": 5.0, "p99_ms": 100.0 + t, "p50_ms": 50.0}
            for t in range(0, 601, 30)]
    found = soak.slopes(rows, 600.0)
    assert found["w0_rss_mb"] == pytest.approx(0.0) and found["lag"] == pytest.approx(0.0)
    assert found["p99_ms"] == pytest.approx(3600.0)  # +1 ms per second of the run
    assert found["w0_fds"] == 0.0  # never sampled: no slope


def test_the_memory_split_adds_up_to_the_rss_and_puts_a_large_allocation_in_anonymous_memory() -> None:
    import os

    probe = load_bench("soak_probe")
    before = probe.memory_split(os.getpid())
    # what the split leaves out (the stack, vdso, vvar) is a few hundred KB
    assert abs(sum(before.values()) - probe.rss_mb(os.getpid())) < 4
    block = bytearray(64 * 2**20)  # above glibc's mmap threshold: an anonymous mapping of its own
    block[::4096] = b"x" * len(block[::4096])  # touched, so resident
    after = probe.memory_split(os.getpid())
    assert after["anon_mb"] - before["anon_mb"] >= 60
    assert abs(after["file_mb"] - before["file_mb"]) < 4 and abs(after["brk_mb"] - before["brk_mb"]) < 4
    del block
