"""The engine's guarantees on every conversation shape, through the embedded runner and the offline model: on
every published context the observation log is within ``reflection.observationTokens × blockAfter`` and the
current user message is there; every message is observed exactly once; the facts the user asked to keep are still
in the final context; Reflector calls stay within a budget proportional to the new observations (see
``tests/support/shape_invariants.py`` for each check and why that budget). Seeds, lengths and configurations are
drawn anew on each run; a failure prints what to replay.

Thresholds are a fifth of ``make bench-engine``'s, and the shapes' long contents are scaled to match.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.commands import ContextSpec, PublishContext
from om_stream.core.config import OMConfig
from om_stream.core.engine import new_record
from om_stream.core.inputs import ObserveNow
from om_stream.replay.shapes import SHAPES, generate
from om_stream.runtime.host_ports import Arrival, Decided
from tests.support.reflectors import BEHAVIOURS, MisbehavingReflector
from tests.support.shape_invariants import (
    ContextWatch,
    reflection_call_budget,
    repeated_date_headers,
    run_shape,
    shape_violations,
)

SCALE = 0.2
BUFFERED: dict[str, Any] = {
    "observation": {"messageTokens": 400, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.2},
    "reflection": {"observationTokens": 800, "bufferActivation": 0.5, "blockAfter": 1.2}}
SYNC: dict[str, Any] = {"observation": {"messageTokens": 400, "bufferTokens": False},
                        "reflection": {"observationTokens": 600}}
IDLE: dict[str, Any] = {**BUFFERED, "activateAfterIdle": "30m", "temporalMarkers": True}
CONFIGURATIONS = {"buffered": BUFFERED, "sync": SYNC, "idle": IDLE}
COUNTER = TiktokenCounter()
# a replay takes a second or two: no shrinking (a smaller seed is not a simpler case), the failing draw is printed
NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]


def _describe(shape: str, seed: int, turns: int, configuration: str) -> str:
    return (f"replay: generate({shape!r}, {turns}, seed={seed}, scale={SCALE}) with the {configuration!r} "
            f"configuration")


@pytest.mark.parametrize("shape", list(SHAPES))
@settings(max_examples=6, deadline=None, phases=NO_SHRINK, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), turns=st.integers(40, 75), configuration=st.sampled_from(list(CONFIGURATIONS)))
def test_every_shape_keeps_the_engine_invariants(shape: str, seed: int, turns: int, configuration: str) -> None:
    run = run_shape(generate(shape, turns, seed=seed, scale=SCALE), CONFIGURATIONS[configuration])
    assert shape_violations(run) == [], _describe(shape, seed, turns, configuration)
    assert run.watch.contexts >= turns  # the watch saw every message's context, at least


def test_a_request_to_remember_outlives_a_later_one_with_a_pasted_table() -> None:
    """Found by the property above (documents, seed 295, 49 turns, buffered): the turn-10 request "my cousin Oskar
    lands on May 15" was dropped by the eighth reflection, whose budget the turn-24 request and the CSV pasted with
    it filled alone."""
    run = run_shape(generate("documents", 49, seed=295, scale=SCALE), BUFFERED)
    assert shape_violations(run) == []
    assert [f.statement for f in run.lost_facts] == []


@settings(max_examples=20, deadline=None, phases=NO_SHRINK, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(list(SHAPES)), behaviour=st.sampled_from([b for b in BEHAVIOURS if b != "offline"]),
       seed=st.integers(0, 2**31 - 1), turns=st.integers(40, 70))
def test_the_bound_and_the_reflection_budget_hold_whatever_the_reflector_returns(shape: str, behaviour: str,
                                                                                 seed: int, turns: int) -> None:
    reflector = MisbehavingReflector(behaviour, COUNTER.count)  # type: ignore[arg-type]
    run = run_shape(generate(shape, turns, seed=seed, scale=SCALE), BUFFERED, reflector=reflector)
    assert shape_violations(run) == [], f"{_describe(shape, seed, turns, 'buffered')}, Reflector {behaviour!r}"


@settings(max_examples=4, deadline=None, phases=NO_SHRINK, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(["chatty", "multi-day", "mixed"]), seed=st.integers(0, 2**31 - 1))
def test_the_final_context_shows_one_date_header_per_day(shape: str, seed: int) -> None:
    """Observations grouped under one ``Date:`` header per day, however many chunks and reflections made them."""
    run = run_shape(generate(shape, 60, seed=seed, scale=SCALE), BUFFERED)
    assert repeated_date_headers(run.last_turn_context) == {}, _describe(shape, seed, 60, "buffered")


def test_the_reflection_budget_grows_with_new_observations_only() -> None:
    config = OMConfig.parse(BUFFERED).resolve()  # observationTokens 800: one call per 80 new tokens
    assert reflection_call_budget(0, config) == 1
    assert reflection_call_budget(79, config) == 1
    assert reflection_call_budget(800, config) == 11
    assert reflection_call_budget(8_000, config) == 101


def _published(spec: ContextSpec) -> Decided:
    state = new_record(spec.record_key, "thread", spec.resource_id)
    return Decided(Arrival(spec.record_key, spec.resource_id, ObserveNow(), None), state, state, [PublishContext(spec)],
                   0, 0.0)


def _spec(version: int, message_ids: tuple[str, ...], observation_tokens: int) -> ContextSpec:
    return ContextSpec(record_key="t1", thread_id="t1", resource_id="r1", version=version,
                       through_message_id=message_ids[-1] if message_ids else None, generation=0, segment_ids=(),
                       segment_boundaries=(), message_ids=message_ids, message_tokens=10,
                       observation_tokens=observation_tokens, current_task=None, suggested_response=None,
                       thread_title=None)


def test_the_watch_reports_a_context_over_the_bound_or_without_the_current_user_message() -> None:
    watch = ContextWatch(limit=100)
    watch.current_user["t1"] = "u2"
    watch(_published(_spec(1, ("u1", "u2"), 100)))
    assert watch.violations == []
    watch(_published(_spec(2, ("u1", "u2"), 101)))
    watch(_published(_spec(3, ("u1",), 50)))
    assert len(watch.violations) == 2
    assert "101 tokens, over the bound 100" in watch.violations[0]
    assert "lacks the current user message u2" in watch.violations[1]
    assert watch.largest is not None and watch.largest.version == 2


def test_a_run_that_breaks_the_bound_is_reported() -> None:
    """The checks can fail: the same replay held to a bound below what the engine keeps is a violation."""
    run = run_shape(generate("chatty", 40, seed=1, scale=SCALE), BUFFERED)
    assert shape_violations(run) == []
    assert run.watch.largest is not None and run.watch.largest.observation_tokens > 0
    run.watch.limit = run.watch.largest.observation_tokens - 1
    assert any("recounts to" in v for v in shape_violations(run))
