"""``make bench-engine`` reads a shape's drift pooled over several conversations (bench/engine.py,
``measure_drift``): one conversation's halves differ by chance in how much text they bring, and that difference is
the input's, not the log's. These check the arithmetic on series whose answer is known."""

from __future__ import annotations

import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tests.support.bench import load_bench


def bench_engine() -> ModuleType:
    return load_bench("engine")


ENGINE = bench_engine()


def conversations(seed: int, overhead: Callable[[int, int], float]) -> list[Any]:
    """Three conversations of 200 turns of random lengths, each turn costing ``overhead(turn, tokens)``."""
    rng = random.Random(seed)
    samples = []
    for conversation in range(3):
        tokens = [rng.choice((20, 80, 400, 3000)) for _ in range(200)]
        samples.append(ENGINE.DriftSample(conversation, tokens, [overhead(turn, t) for turn, t in enumerate(tokens)],
                                          []))
    return samples


def test_halves_are_pooled_by_their_totals_not_by_averaging_each_seeds_drift() -> None:
    # seed 1: 10 -> 20 (+100 %); seed 2: 30 -> 15 (-50 %). Pooled: 40 -> 35 = -12.5 %; their mean would be +25 %
    assert ENGINE.pooled_halves_drift([[4.0, 6.0, 8.0, 12.0], [10.0, 20.0, 5.0, 10.0]]) == pytest.approx(-12.5)
    assert ENGINE.halves_drift([1.0, 1.0, 2.0, 2.0]) == pytest.approx(100.0)
    assert ENGINE.pooled_halves_drift([[0.0, 0.0, 1.0, 1.0]]) == 0.0  # no first half to compare with


@pytest.mark.parametrize("seed", range(8))
def test_work_that_only_follows_the_text_drifts_with_the_input_and_not_beyond_it(seed: int) -> None:
    samples = conversations(seed, lambda turn, tokens: 0.5 + 0.001 * tokens)  # a fixed cost and a cost per token
    assert ENGINE.beyond_input_drift(samples) == pytest.approx(0.0, abs=1e-9)
    drift, text = ENGINE.pooled_halves_drift([s.overheads for s in samples]), ENGINE.input_drift(samples)
    assert (drift > 0) == (text > 0) or drift == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_work_that_grows_with_the_turns_shows_beyond_the_input(seed: int) -> None:
    samples = conversations(seed, lambda turn, tokens: 0.5 + 0.001 * tokens + 0.002 * turn)  # and a growing cost
    first = sum(sum(s.overheads[:100]) for s in samples) / 300
    expected = 0.002 * 100 / first * 100  # the growth's share: 100 turns later, 0.2 ms more per turn
    assert ENGINE.beyond_input_drift(samples) == pytest.approx(expected, rel=0.25)
