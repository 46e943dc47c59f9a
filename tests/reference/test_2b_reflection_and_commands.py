"""§2b of the reference, second part: reflection, when idle and provider-change triggers are looked at, and the
manual commands (the first part, ``test_2b_state_machine.py``, holds records, turns, triggers, buffering,
activation and synchronous observation).

Driven through the real host by ``tests.support.sim`` (one token per word plus one per message: a message of nine
words costs 10 tokens), and through the embedded ``Memory`` where the prompt a model reads is the behaviour.
"""

from __future__ import annotations

from typing import Any

from om_stream import Memory
from om_stream.core.commands import (
    CommitGeneration,
    RequestReflection,
)
from om_stream.core.inputs import ObserveNow, OverrideThresholds, ReflectNow
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all
from tests.reference.state_machine import command, observations, reflections, words
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim

# -- 2b.7 reflection ------------------------------------------------------------------------------------------------

def test_background_reflection_starts_at_half_the_reflection_threshold() -> None:
    sim = Sim({"observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 40, "bufferActivation": 0.5}})
    started_at = None
    for _ in range(30):
        sim.say("t1", "user", TEN)
        sim.settle()
        if reflections(sim) and started_at is None:
            started_at = reflections(sim)[0].input_tokens
    assert started_at is not None and 20 <= started_at < 40
    assert reflections(sim)[0].kind == "buffer"


def test_a_buffered_reflection_replaces_what_it_covered_and_keeps_what_came_after() -> None:
    sim = Sim({"observation": {"messageTokens": 40, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 60, "bufferActivation": 0.5}})
    for _ in range(40):
        sim.say("t1", "user", TEN)
        sim.settle()
    commits = [c for c in sim.commands if isinstance(c, CommitGeneration)]
    assert commits
    for commit in commits:
        assert commit.segment_ids[0] == commit.reflection_id
        assert not set(commit.replaced_segment_ids) & set(commit.segment_ids[1:])


def test_without_background_reflection_the_log_is_reflected_synchronously_at_the_threshold() -> None:
    sim = Sim(sync_only(20, 40))
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle()
    assert reflections(sim) and all(r.kind == "sync" for r in reflections(sim))
    first = reflections(sim)[0]
    assert first.input_tokens >= 40


def test_reflection_past_block_after_with_nothing_buffered_blocks_the_context() -> None:
    slow = {"RequestReflection": 30_000}
    sim = Sim({"observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 40, "bufferActivation": 0.5, "blockAfter": 1.2}},
              outcome=lambda r: Outcome(ok=not isinstance(r, RequestReflection) or r.kind != "buffer",
                                        delay_ms=slow.get(type(r).__name__, 10)))
    for _ in range(40):
        sim.say("t1", "user", TEN)
        sim.settle(50)
    assert [r for r in reflections(sim) if r.kind == "sync"]
    assert all(p.spec.observation_tokens <= 48 for p in sim.contexts)


def test_a_reflector_that_keeps_failing_is_not_called_at_every_message() -> None:
    sim = Sim(sync_only(20, 40), outcome=lambda r: Outcome(ok=not isinstance(r, RequestReflection)))
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle(5)
    configured = [r for r in reflections(sim) if not r.use_offline_model]
    assert 1 <= len(configured) <= 4


def test_a_new_generation_keeps_the_cursor_and_the_buffered_chunks() -> None:
    sim = Sim({"observation": {"messageTokens": 60, "bufferTokens": 0.2},
               "reflection": {"observationTokens": 40, "bufferActivation": 0.5}})
    kept_chunks = 0
    for _ in range(60):
        before = sim.states.get("t1")
        chunks = list(before.buffered) if before else []
        cursor = before.threads["t1"].observed_through_seq if before else -1
        generation = before.generation if before else 0
        sim.say("t1", "user", TEN)
        sim.settle()
        after = sim.state()
        assert after.threads["t1"].observed_through_seq >= cursor
        if after.generation > generation:
            log_ids = {s.id for s in after.log}
            waiting = [c.id for c in chunks if c.id not in log_ids]
            assert all(any(b.id == c for b in after.buffered) for c in waiting)
            kept_chunks += len(waiting)
    assert sim.state().generation >= 1 and kept_chunks, "some reflections happened while chunks were waiting"


def test_a_manual_reflection_condenses_the_whole_log_with_its_guidance() -> None:
    sim = Sim(sync_only(20))
    for _ in range(6):
        sim.say("t1", "user", TEN)
        sim.settle()
    command(sim, ReflectNow(guidance="keep the dates"))
    request = reflections(sim)[-1]
    assert (request.kind, request.trigger, request.guidance) == ("manual", "manual", "keep the dates")
    assert request.compression_start_level == 0
    assert request.segment_ids == tuple(s.id for s in sim.state().log)


def test_an_idle_buffered_reflection_is_held_back_when_newer_observations_outweigh_what_it_replaces() -> None:
    def run(extra_turns: int) -> list[str]:
        sim = Sim({"observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
                   "reflection": {"observationTokens": 400, "bufferActivation": 0.05, "activateAfterIdle": "5m"}},
                  outcome=lambda r: Outcome(delay_ms=10))
        for _ in range(3):
            sim.say("t1", "user", TEN)
            sim.say("t1", "assistant", TEN)
            sim.settle(10_000)
        assert sim.state().buffered_reflection is not None or extra_turns < 0
        for _ in range(extra_turns):  # observations appended after the reflection was buffered
            sim.say("t1", "user", TEN, advance_ms=1_000)
            sim.say("t1", "assistant", TEN, advance_ms=1_000)
            sim.settle(1_000)
        sim.say("t1", "user", TEN, advance_ms=3_600_000)
        return [e.triggered_by for e in events(sim, "data-om-activation") if e.operation_type == "reflection"]

    assert run(0)[:1] == ["ttl"]
    assert run(12) == []


# -- 2b.8 when idle and provider-change triggers are looked at ------------------------------------------------------

def test_an_idle_thread_has_its_chunks_active_in_the_context_of_its_next_turn() -> None:
    sim = Sim({"activateAfterIdle": "5m", **buffered()})
    sim.say("t1", "user", words(14))
    sim.say("t1", "assistant", words(14))
    sim.settle(10_000)
    assert sim.state().buffered and not sim.last_context().segment_ids
    sim.say("t1", "user", TEN, advance_ms=6 * 60_000)
    assert sim.last_context().segment_ids and sim.last_context().through_message_id == "m3"


def test_reflection_idle_activation_needs_its_own_setting() -> None:
    def run(options: dict[str, Any]) -> list[str]:
        sim = Sim({**options, "observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
                   "reflection": {"observationTokens": 200, "bufferActivation": 0.1,
                                  **options.pop("reflection", {})}})
        for _ in range(6):
            sim.say("t1", "user", TEN)
            sim.say("t1", "assistant", TEN)
            sim.settle(10_000)
        sim.say("t1", "user", TEN, advance_ms=2 * 3_600_000)
        return [e.triggered_by for e in events(sim, "data-om-activation") if e.operation_type == "reflection"]

    assert run({"activateAfterIdle": "5m"}) == []
    triggers = run({"reflection": {"activateAfterIdle": "5m"}})
    assert triggers and set(triggers) == {"ttl"}


def test_idle_activation_happens_when_the_idle_time_passes_and_republishes_the_context() -> None:
    sim = Sim({"activateAfterIdle": "5m", **buffered()})
    sim.say("t1", "user", words(14))
    sim.say("t1", "assistant", words(14))
    sim.settle(10_000)
    published = len(sim.contexts)
    sim.settle(6 * 60_000)  # no new message: the idle timer fires
    assert [e.triggered_by for e in events(sim, "data-om-activation")][:1] == ["ttl"]
    assert len(sim.contexts) > published and sim.last_context().segment_ids


# -- 2b.9 manual commands -------------------------------------------------------------------------------------------

def test_a_manual_observe_below_the_threshold_calls_no_model_and_force_does() -> None:
    sim = Sim(sync_only(100))
    sim.say("t1", "user", TEN)
    assert command(sim, ObserveNow()) == [] and not observations(sim)
    command(sim, ObserveNow(force=True))
    (request,) = observations(sim)
    assert (request.kind, request.trigger) == ("manual", "manual")


def test_threshold_overrides_merge_and_a_thread_without_messages_is_refused() -> None:
    sim = Sim(buffered())
    sim.say("t1", "user", TEN)
    command(sim, OverrideThresholds(message_tokens=50))
    command(sim, OverrideThresholds(observation_tokens=700))
    status = events(sim, "data-om-status")[-1].windows.active
    assert (status.messages.threshold, status.observations.threshold) == (50, 700)
    refused = sim.apply("ghost", "ghost", OverrideThresholds(message_tokens=50, thread_id="ghost"))
    assert [c.reason for c in refused if c.__class__.__name__ == "RejectInput"] == ["unknown_thread"]
    assert "ghost" not in sim.states


async def test_settle_waits_for_the_background_calls_to_be_applied() -> None:
    model = FunctionModel(observe_all)
    async with Memory({"observation": {"messageTokens": 40, "bufferTokens": False}}, model=model,
                      clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "word " * 60), wait=False)
        await om.settle()
        context = await om.context("t1")
    assert context is not None and "saw m1" in context.observations
