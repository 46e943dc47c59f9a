"""``make bench-engine`` times drift in lockstep (bench/engine.py, ``Lockstep``): two replays of one conversation
take turns, the first half's process turn k, then the whole run's turn half + k. Here two threads stand for the two
processes (the semaphores have the same interface), and the order in which their turns ran is checked."""

from __future__ import annotations

import threading
from types import ModuleType

import pytest

from tests.support.bench import load_bench


def bench_engine() -> ModuleType:
    return load_bench("engine")


@pytest.mark.parametrize("turns", [2, 3, 10, 11])
def test_the_halves_take_turns_and_nobody_waits_forever(turns: int) -> None:
    engine = bench_engine()
    half = turns // 2
    first_go, whole_go = threading.Semaphore(0), threading.Semaphore(0)
    ran: list[tuple[str, int]] = []

    def first_half() -> None:  # replays turns 1..half
        pace = engine.Lockstep(first_go, whole_go, half=half, first_half=True)
        pace.start()
        for turn in range(1, half + 1):
            ran.append(("first", turn))
            pace()

    def whole() -> None:  # replays turns 1..turns
        pace = engine.Lockstep(whole_go, first_go, half=half, first_half=False)
        for turn in range(1, turns + 1):
            ran.append(("whole", turn))
            pace()

    threads = [threading.Thread(target=first_half), threading.Thread(target=whole)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(thread.is_alive() for thread in threads)
    interleaved = [step for k in range(1, half + 1) for step in (("first", k), ("whole", half + k))]
    expected = [("whole", t) for t in range(1, half + 1)] + interleaved
    expected += [("whole", t) for t in range(2 * half + 1, turns + 1)]  # an odd conversation's last turn
    assert ran == expected


def test_a_partner_that_never_hands_the_turn_back_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = bench_engine()
    monkeypatch.setattr(engine, "LOCKSTEP_TIMEOUT_S", 0.05)
    pace = engine.Lockstep(threading.Semaphore(0), threading.Semaphore(0), half=2, first_half=True)
    with pytest.raises(RuntimeError, match="did not hand the turn back"):
        pace.start()
