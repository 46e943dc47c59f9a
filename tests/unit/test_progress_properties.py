"""``settled`` and ``data-om-progress`` as guarantees, over random conversations, configurations and model outcomes
(failures, empty answers, lost results, slow results out of order) and over the conversation shapes of
``om_stream.replay.shapes``, through the real host (``tests.support.sim``). After every decision
(``tests.support.progress_checks``): the cursor says what is observed, a quiescent record does no observation work
until new input, and the latest progress event of each thread says exactly what ``settled`` says. At the end, with
nothing new coming: everything settles, the answers to progress questions agree, and a forced observe leaves every
message observed."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.core.engine import record_key
from om_stream.core.inputs import ObserveNow
from om_stream.core.progress import place, quiescent, settled
from om_stream.replay.shapes import SHAPES, generate
from tests.support.progress_checks import ProgressChecks, ask, feed
from tests.support.sim import Outcome, Sim, Turn, always_ok, configurations, outcome_plan, turns

DAY_MS = 24 * 3_600_000


def play(sim: Sim, checks: ProgressChecks, conversation: list[Turn], rng: random.Random) -> None:
    """The conversation, with a progress question now and then about a message already sent (or the newest); each
    answer must agree with the record as it stands."""
    call = 0
    for user_words, rounds, reply_words, gap in conversation:
        sim.say("t1", "user", " ".join(["u"] * user_words), advance_ms=gap, model="openai/gpt-5-mini")
        for call_words, result_words in rounds:
            call += 1
            sim.say("t1", "assistant", " ".join(["c"] * call_words), tool_calls=(f"call{call}",), advance_ms=500)
            sim.say("t1", "tool", " ".join(["r"] * result_words), tool_results=(f"call{call}",), advance_ms=500)
        sim.say("t1", "assistant", " ".join(["a"] * reply_words), advance_ms=2_000, model="openai/gpt-5-mini")
        if rng.random() < 0.3:
            check_answer(sim, checks, "t1", rng.choice([None, *sim.messages]))


def check_answer(sim: Sim, checks: ProgressChecks, thread_id: str, message_id: str | None,
                 resource: str = "r1") -> None:
    """A question about a message, answered as the record stands (the seq the store holds for a message of the
    thread placing one the record no longer names)."""
    answer = ask(sim, thread_id, message_id, resource=resource)
    state = sim.states[record_key(sim.config.scope, thread_id, resource)]
    owner, seq = checks.seqs.get(message_id or "", (None, None))
    stored = seq if owner == thread_id else None
    assert answer.through is not None
    assert answer.through.status == place(state, thread_id, message_id, stored_seq=stored).status
    assert answer.through.settled == settled(state, thread_id, message_id, stored_seq=stored)


def drain(sim: Sim, checks: ProgressChecks) -> None:
    """No new input: every result and timer delivered, the models working again at the end."""
    sim.settle(DAY_MS)
    sim.outcome = always_ok
    sim.settle(DAY_MS)
    for key, state in sim.states.items():
        assert quiescent(state), (key, state.cycles, state.timers)
        for message_id, (thread_id, seq) in checks.seqs.items():
            if thread_id in state.threads:
                assert settled(state, thread_id, message_id, stored_seq=seq), message_id


def finish(sim: Sim, checks: ProgressChecks, resource: str = "r1") -> None:
    drain(sim, checks)
    for thread_id in {t for t, _ in checks.seqs.values()}:
        answer = ask(sim, thread_id, None, resource=resource)
        assert answer.through is not None and answer.through.settled and not answer.pending
    for key, state in list(sim.states.items()):
        checks.new_input()
        sim.apply(key, state.resource_id, ObserveNow(force=True))
    drain(sim, checks)
    for message_id, (thread_id, _) in checks.seqs.items():
        state = sim.states[record_key(sim.config.scope, thread_id, resource)]
        assert place(state, thread_id, message_id, stored_seq=checks.seqs[message_id][1]).status == "observed"
    assert checks.violations == []


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=configurations(), conversation=turns, seed=st.integers(0, 2**32 - 1))
def test_progress_holds_for_random_conversations_and_model_outcomes(options: dict[str, Any],
                                                                     conversation: list[Turn], seed: int) -> None:
    sim = Sim(options, outcome=outcome_plan(seed))
    checks = ProgressChecks()
    sim.checks.append(checks)
    play(sim, checks, conversation, random.Random(seed))
    assert checks.violations == []
    finish(sim, checks)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=turns, seed=st.integers(0, 2**32 - 1))
def test_progress_holds_when_results_are_slow_and_arrive_out_of_order(conversation: list[Turn], seed: int) -> None:
    rng = random.Random(seed)
    sim = Sim({"observation": {"messageTokens": 120, "bufferTokens": 0.2, "blockAfter": 1.2},
               "reflection": {"observationTokens": 150, "bufferActivation": 0.5}, "activateAfterIdle": "1m"},
              outcome=lambda r: Outcome(delay_ms=rng.choice([50, 90_000, 170_000, 200_000])))
    checks = ProgressChecks()
    sim.checks.append(checks)
    play(sim, checks, conversation, random.Random(seed))
    assert checks.violations == []
    finish(sim, checks)


SHAPE_OPTIONS: list[dict[str, Any]] = [
    {"observation": {"messageTokens": 400, "bufferTokens": 0.25, "blockAfter": 1.5},
     "reflection": {"observationTokens": 300, "bufferActivation": 0.5}, "activateAfterIdle": "5m"},
    {"observation": {"messageTokens": 300, "bufferTokens": False}, "reflection": {"observationTokens": 250}},
    {"observation": {"messageTokens": 300}, "reflection": {"observationTokens": 300}, "scope": "resource"},
]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_progress_holds_on_every_conversation_shape(shape: str, seed: int) -> None:
    options = SHAPE_OPTIONS[seed % len(SHAPE_OPTIONS)]
    conversation = generate(shape, 24, seed=seed, scale=0.15)
    rng = random.Random(seed)
    sim = Sim({k: v for k, v in options.items() if k != "scope"}, scope=options.get("scope", "thread"),
              outcome=outcome_plan(seed))
    checks = ProgressChecks()
    sim.checks.append(checks)
    resource = conversation.lines[0].resource_id
    for turn in conversation.turns():
        for message in turn.messages:
            feed(sim, message)
        if rng.random() < 0.3:
            check_answer(sim, checks, turn.thread_id, rng.choice([None, *checks.seqs]), resource=resource)
    assert checks.violations == []
    finish(sim, checks, resource=resource)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["user", "assistant"]),
                                st.integers(1, 60), st.integers(200, 10 * 60_000)), min_size=6, max_size=40),
       message_tokens=st.integers(60, 300), seed=st.integers(0, 2**32 - 1))
def test_progress_holds_per_thread_in_resource_scope(steps: list[tuple[str, str, int, int]], message_tokens: int,
                                                     seed: int) -> None:
    """One record for several threads: a cycle for one thread keeps another's new messages pending, and each
    thread hears of it."""
    sim = Sim({"observation": {"messageTokens": message_tokens}, "reflection": {"observationTokens": 400}},
              scope="resource", outcome=outcome_plan(seed))
    checks = ProgressChecks()
    sim.checks.append(checks)
    rng = random.Random(seed)
    for thread, role, words, gap in steps:
        sim.say(thread, role, " ".join(["w"] * words), advance_ms=gap)
        if rng.random() < 0.3:
            check_answer(sim, checks, rng.choice(["a", "b", "c"]), rng.choice([None, *checks.seqs]))
    assert checks.violations == []
    finish(sim, checks)
