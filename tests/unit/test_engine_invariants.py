"""Invariants the reference implementation breaks, checked after every decide() on random conversations, random
configurations and random model outcomes (success, failure, empty/degenerate output, lost results, slow results
arriving out of order)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.core.commands import Command, CommitGeneration, PublishContext
from om_stream.core.events import ActivationEvent, ObservationEndEvent
from om_stream.core.inputs import ObserveNow
from om_stream.core.messages import ToolCallPart, ToolResultPart
from om_stream.core.observation import awaiting_tool_results
from om_stream.core.state import RecordState
from tests.support.sim import Outcome, Sim, Turn, always_ok, configurations, outcome_plan, turns


class Invariants:
    """Checked after every decision; violations are collected with a description."""

    def __init__(self) -> None:
        self.violations: list[str] = []

    def __call__(self, sim: Sim, before: RecordState, after: RecordState, commands: list[Command]) -> None:
        limit = sim.config.message_limit if sim.config.async_buffering else None
        new_ids = {m.id for m in after.unobserved if m.seq > before.msg_seq}
        for command in commands:
            if isinstance(command, PublishContext):
                self._context(sim, after, command, limit, new_ids)
            if isinstance(command, CommitGeneration):
                text = sim.segments.get(command.reflection_id, "") if command.reflection_id in sim.segments else None
                replaced = sum(s.tokens for s in before.log if s.id in command.replaced_segment_ids)
                reflection = next(s for s in after.log if s.id == command.reflection_id)
                if text is not None and not text.strip():
                    self.violations.append("an empty reflection was committed")
                if reflection.tokens >= replaced:
                    self.violations.append(f"a reflection of {reflection.tokens} tokens replaced only {replaced}")
                kept = {c.id for c in after.buffered} | {s.id for s in after.log}
                if any(c.id not in kept for c in before.buffered):
                    self.violations.append("a buffered chunk was lost by a reflection")
        for thread_id, thread in after.threads.items():
            old = before.threads.get(thread_id)
            if old is not None and thread.observed_through_seq < old.observed_through_seq:
                self.violations.append(f"the cursor of {thread_id} moved backwards")
            activated = any(isinstance(c.event, ActivationEvent) and c.event.operation_type == "observation"
                            for c in commands if hasattr(c, "event"))
            observed = any(isinstance(c.event, ObservationEndEvent) for c in commands if hasattr(c, "event"))
            if old is not None and activated and not observed and old.current_task \
                    and thread.current_task != old.current_task:
                self.violations.append("activation changed the continuation hints")
        if any(count > 1 for count in sim.observed_count.values()):
            self.violations.append(f"a message was observed twice: {sim.observed_count}")

    def _context(self, sim: Sim, state: RecordState, command: PublishContext, limit: int | None,
                 new_ids: set[str]) -> None:
        spec = command.spec
        thread = state.threads[spec.thread_id]
        threshold = limit if limit is not None else sim.config.message_threshold(state.log_tokens)
        unobserved = [m for m in state.unobserved if m.thread_id == spec.thread_id]
        # "plus the one message that just arrived": the thread's newest message (and the temporal marker that
        # precedes it), or anything this very input added
        newest = {thread.last_message_id, f"__temporal_gap_{thread.last_message_id}"} | new_ids
        arrived = sum(m.tokens for m in unobserved if m.id in newest)
        held = sum(m.tokens for m in unobserved) - arrived
        # while the turn waits for a tool result the agent's model is not called: the bound holds once it is in
        if held > threshold and not awaiting_tool_results(thread):
            self.violations.append(f"context holds {held} unobserved tokens (+{arrived} new) over {threshold}")
        open_turn = thread.turn_message if not thread.turn_answered else None
        if open_turn is not None and open_turn.id not in spec.message_ids:
            self.violations.append("the current turn's user message is missing from the context")
        # an observed message is in the log; only the open turn's question is also raw (its model is answering it)
        observed_raw = set(spec.message_ids) - {m.id for m in unobserved} - ({open_turn.id} if open_turn else set())
        if observed_raw:
            self.violations.append(f"observed messages are raw in the context too: {sorted(observed_raw)}")
        ids = set(spec.message_ids)
        for mid in spec.message_ids:
            message = sim.messages[mid]
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    call = next(m for m in sim.messages.values()
                                if any(isinstance(p, ToolCallPart) and p.tool_call_id == part.tool_call_id
                                       for p in m.parts))
                    if call.message_id not in ids:
                        self.violations.append("a tool result reached the context without its call")


def play(sim: Sim, conversation: list[Turn]) -> None:
    call = 0
    for user_words, rounds, reply_words, gap in conversation:
        sim.say("t1", "user", " ".join(["u"] * user_words), advance_ms=gap, model="openai/gpt-5-mini")
        for call_words, result_words in rounds:
            call += 1
            sim.say("t1", "assistant", " ".join(["c"] * call_words), tool_calls=(f"call{call}",), advance_ms=500)
            sim.say("t1", "tool", " ".join(["r"] * result_words), tool_results=(f"call{call}",), advance_ms=500)
        sim.say("t1", "assistant", " ".join(["a"] * reply_words), advance_ms=2_000, model="openai/gpt-5-mini")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=configurations(), conversation=turns, seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_for_random_conversations_and_model_outcomes(options: dict[str, Any],
                                                                      conversation: list[Turn], seed: int) -> None:
    invariants = Invariants()
    sim = Sim(options, outcome=outcome_plan(seed))
    sim.checks.append(invariants)
    play(sim, conversation)
    sim.settle(24 * 3_600_000)
    sim.outcome = always_ok  # once the models work again, a forced observe() leaves nothing behind
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    sim.settle(24 * 3_600_000)
    assert invariants.violations == []
    # every message ends up observed exactly once, whatever the model did
    assert sim.state().unobserved == []
    assert set(sim.observed_count) == set(sim.messages)
    assert set(sim.observed_count.values()) == {1}
    # every cycle that started ended or failed exactly once
    started = [e.event.cycle_id for e in sim.events if e.event.event_type.endswith("-start")]  # type: ignore[attr-defined]
    finished = [e.event.cycle_id for e in sim.events  # type: ignore[attr-defined]
                if e.event.event_type.endswith(("-end", "-failed"))]
    assert sorted(started) == sorted(finished)
    assert sim.state().cycles == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation=turns, seed=st.integers(0, 2**32 - 1))
def test_invariants_hold_when_results_are_slow_and_arrive_out_of_order(conversation: list[Turn], seed: int) -> None:
    rng = random.Random(seed)
    invariants = Invariants()
    sim = Sim({"observation": {"messageTokens": 120, "bufferTokens": 0.2, "blockAfter": 1.2},
               "reflection": {"observationTokens": 150, "bufferActivation": 0.5}},
              outcome=lambda r: Outcome(delay_ms=rng.choice([50, 90_000, 170_000, 200_000])))
    sim.checks.append(invariants)
    play(sim, conversation)
    sim.settle(24 * 3_600_000)
    assert invariants.violations == []
    assert set(sim.observed_count.values()) <= {1}
