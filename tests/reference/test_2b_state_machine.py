"""§2b of the reference: what a record holds, when it buffers, activates, observes and reflects.

Driven through the real host by ``tests.support.sim`` (one token per word plus one per message: a message of nine
words costs 10 tokens), and through the embedded ``Memory`` where the prompt a model reads is the behaviour.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from om_stream import Memory
from om_stream.core.commands import (
    ActivateChunks,
    PersistThreadMetadata,
    RequestObservation,
)
from om_stream.core.thresholds import select_chunks, should_trigger_buffer
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all
from tests.reference.state_machine import observations, reflections, words
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim

# -- 2b.1 what a record holds ---------------------------------------------------------------------------------------

def test_thread_scope_keeps_one_record_per_thread_and_resource_scope_one_per_resource() -> None:
    for scope, records in (("thread", 2), ("resource", 1)):
        sim = Sim({"scope": scope, "observation": {"messageTokens": 1_000}})
        sim.say("a", "user", TEN)
        sim.say("b", "user", TEN)
        assert len(sim.states) == records, scope


def test_a_reflection_starts_the_next_generation_of_the_log() -> None:
    sim = Sim(sync_only(20, 40))
    assert not sim.states
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    assert state.generation >= 1
    assert state.log[0].kind == "reflection"
    assert all(segment.kind == "observation" for segment in state.log[1:])


def test_a_buffered_chunk_records_what_it_covers() -> None:
    sim = Sim(buffered())
    for _ in range(3):
        sim.say("t1", "user", TEN)
        sim.settle()
    (chunk, *_) = sim.state().buffered
    start = events(sim, "data-om-buffering-start")[0]
    covered = [sim.messages[f"m{i}"] for i in range(1, chunk.message_count + 1)]
    assert chunk.cycle_id == start.cycle_id
    assert (chunk.first_message_id, chunk.last_message_id) == (covered[0].message_id, covered[-1].message_id)
    assert chunk.message_tokens == sum(sim.message_tokens[m.message_id] for m in covered)
    assert chunk.tokens == sim.accountant.count_text(sim.segments[chunk.id])
    assert chunk.last_message_at == covered[-1].created_at_ms


def test_an_observation_records_the_threads_hints_and_its_newest_observed_message() -> None:
    sim = Sim(sync_only(30))
    for _ in range(3):
        sim.say("t1", "user", TEN)
    sim.settle()
    (written,) = [c for c in sim.commands if isinstance(c, PersistThreadMetadata)]
    assert written.current_task == "the current task"
    assert written.last_observed_message_id == "m3"


def test_the_observation_cursor_of_a_thread_only_moves_forwards() -> None:
    sim = Sim(buffered())
    cursors = []
    for _ in range(30):
        sim.say("t1", "user", TEN)
        sim.settle()
        cursors.append(sim.state().threads["t1"].observed_through_seq)
    assert cursors == sorted(cursors) and cursors[-1] > 0


# -- 2b.2 turns and steps -------------------------------------------------------------------------------------------

def test_a_user_message_starts_a_turn_and_each_later_message_is_a_step_of_it() -> None:
    sim = Sim(buffered())
    sim.say("t1", "user", "w")
    sim.say("t1", "assistant", "w", tool_calls=("c1",))
    sim.say("t1", "tool", "w", tool_results=("c1",))
    sim.say("t1", "user", "w")
    assert [s.step_number for s in events(sim, "data-om-status")] == [0, 1, 2, 0]


def test_no_synchronous_observation_while_the_turns_tool_call_waits_for_its_result() -> None:
    sim = Sim(sync_only(40))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", words(40), tool_calls=("c1",))  # past the threshold, the call still open
    sim.settle()
    assert not observations(sim)
    assert sim.last_context().through_message_id == "m2"  # the agent is not held back meanwhile
    sim.say("t1", "tool", TEN, tool_results=("c1",))
    sim.settle()
    (request,) = observations(sim)
    assert request.message_ids == ("m1", "m2", "m3")


def test_background_buffering_stops_before_a_tool_call_that_has_no_result_yet() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=60_000))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN, tool_calls=("c1",))  # 20 tokens: the first buffering trigger
    (request,) = observations(sim)
    assert request.kind == "buffer" and request.message_ids == ("m1",)


def test_the_turns_user_message_stays_in_the_context_once_observed() -> None:
    sim = Sim(sync_only(40))
    question = sim.say("t1", "user", words(45))
    sim.settle()
    assert sim.observed_count.get(question.message_id) == 1
    assert sim.last_context().message_ids == (question.message_id,)


def test_a_blocking_observation_leaves_the_newest_messages_raw_and_unobserved() -> None:
    sim = Sim(buffered(blockAfter=1.2), outcome=lambda r: Outcome(ok=r.kind != "buffer"))
    for _ in range(13):
        sim.say("t1", "user", TEN)
        sim.settle(10)
    sim.settle()
    sync = [r for r in observations(sim) if r.kind == "sync"]
    assert sync
    raw = sim.last_context().message_ids
    newest_raw = [m for m in raw if m != sim.state().threads["t1"].turn_message.id]  # type: ignore[union-attr]
    assert newest_raw, "the newest exchange stays verbatim"
    assert all(sim.observed_count.get(m, 0) == 0 for m in newest_raw)  # not also in the log


def test_between_the_threshold_and_block_after_only_activation_runs() -> None:
    sim = Sim(buffered(blockAfter=1.5))
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle()
    assert events(sim, "data-om-activation")
    assert all(r.kind == "buffer" for r in observations(sim))


def test_buffer_on_idle_buffers_the_end_of_a_short_turn() -> None:
    for on_idle in (False, True):
        sim = Sim(buffered(bufferOnIdle=on_idle))
        sim.say("t1", "user", "w w w")
        sim.say("t1", "assistant", "w w w")
        assert bool([r for r in observations(sim) if r.kind == "buffer"]) == on_idle


# -- 2b.3 triggers --------------------------------------------------------------------------------------------------

def test_default_buffering_triggers_every_6k_then_every_3k_near_the_threshold() -> None:
    boundary, fired = 0, []
    for pending in range(1_000, 30_000, 1_000):
        if should_trigger_buffer(pending, boundary, 6_000, 30_000):
            fired.append(pending)
            boundary = pending
    assert fired == [6_000, 12_000, 18_000, 24_000, 27_000]


def test_observation_is_due_once_pending_tokens_reach_the_threshold() -> None:
    sim = Sim(sync_only(30))
    sim.say("t1", "user", TEN)
    sim.say("t1", "user", words(18))  # 29
    assert not observations(sim)
    sim.say("t1", "user", "")  # one more token: exactly 30
    assert len(observations(sim)) == 1


def test_reflection_is_due_once_the_log_reaches_the_reflection_threshold() -> None:
    def long_observations(request: object) -> Outcome:
        return Outcome(text=words(30)) if isinstance(request, RequestObservation) else Outcome()

    sim = Sim(sync_only(10, 60), outcome=long_observations)
    sim.say("t1", "user", TEN)
    sim.settle()
    assert sim.state().log_tokens == 30 and not reflections(sim)
    sim.say("t1", "user", TEN)
    sim.settle(1_000)  # the second observation lands: 60 tokens of log
    assert reflections(sim)


def test_the_status_reports_the_buffered_window() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=5_000))
    sim.say("t1", "user", TEN)
    sim.say("t1", "user", TEN)
    assert events(sim, "data-om-status")[-1].windows.buffered.observations.status == "running"
    sim.settle(10_000)
    sim.say("t1", "user", "w")
    window = events(sim, "data-om-status")[-1].windows.buffered.observations
    assert (window.status, window.chunks, window.message_tokens) == ("complete", 1, 20)
    assert window.observation_tokens == sim.state().buffered[0].tokens
    assert 0 < window.projected_message_removal <= window.message_tokens


# -- 2b.4 background buffering --------------------------------------------------------------------------------------

def test_buffering_waits_until_half_an_interval_of_new_messages_is_there() -> None:
    sim = Sim(buffered(bufferTokens=40))
    sim.say("t1", "user", words(40))
    sim.settle()
    sim.say("t1", "user", words(10))  # 11 tokens since: less than half of 40
    sim.settle()
    assert len([r for r in observations(sim) if r.kind == "buffer"]) == 1


def test_each_message_is_buffered_into_at_most_one_chunk() -> None:
    sim = Sim(buffered())
    for _ in range(9):
        sim.say("t1", "user", TEN)
        sim.settle()
    covered = [m for r in observations(sim) if r.kind == "buffer" for m in r.message_ids]
    assert covered and len(covered) == len(set(covered))


def test_one_buffering_call_at_a_time_per_record() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=20_000))
    most = 0
    for _ in range(9):
        sim.say("t1", "user", TEN, advance_ms=3_000)
        most = max(most, len(sim.state().in_flight("observation", "buffer")))
    assert most == 1


async def test_the_buffering_observer_sees_the_log_and_the_chunks_not_yet_active() -> None:
    model = FunctionModel(observe_all)
    async with Memory({"observation": {"messageTokens": 300, "bufferTokens": 60}}, model=model,
                      clock=ManualClock(START_MS)) as om:
        for i in range(1, 9):
            await om.add_message(message(i, "word " * 20))
            await om.settle()
    prompts = [r.messages[1].content for r in model.calls("observer")]
    assert len(prompts) >= 2
    assert "Buffered observations" not in prompts[0]
    assert "Buffered observations" in prompts[1] and "saw m1" in prompts[1]


def test_an_empty_buffering_answer_ends_its_cycle_with_a_failed_event() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(text="   "))
    sim.say("t1", "user", words(25))
    sim.settle(30_000)
    (failed,) = events(sim, "data-om-buffering-failed")
    assert failed.cycle_id == events(sim, "data-om-buffering-start")[0].cycle_id
    assert not sim.state().buffered and [m.id for m in sim.state().unobserved] == ["m1"]


def test_a_title_found_while_buffering_applies_at_once_and_hints_wait_for_activation() -> None:
    sim = Sim({"observation": {"messageTokens": 100, "bufferTokens": 0.2, "threadTitle": True},
               "reflection": {"observationTokens": 10_000}})
    original = sim._result

    def titled(request: Any, outcome: Outcome) -> Any:
        return replace(original(request, outcome), thread_title="Lisbon trip", current_task="plan the trip")

    sim._result = titled  # type: ignore[method-assign]
    sim.say("t1", "user", words(25))
    sim.settle(10_000)
    assert sim.state().buffered and not events(sim, "data-om-activation")
    assert sim.last_context().thread_title == "Lisbon trip"
    assert sim.last_context().current_task is None  # the chunk's hint arrives with the chunk
    for _ in range(8):
        sim.say("t1", "user", TEN)
        sim.settle()
    assert events(sim, "data-om-activation")
    assert sim.last_context().current_task == "plan the trip"


def test_a_failed_buffering_cycle_leaves_its_messages_unobserved_and_never_fails_the_turn() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(ok=r.kind != "buffer", error="HTTP 503"))
    sim.say("t1", "user", words(25))
    sim.settle(10_000)
    assert events(sim, "data-om-buffering-failed")[0].error == "HTTP 503"
    assert [m.id for m in sim.state().unobserved] == ["m1"]
    assert sim.last_context().through_message_id == "m1"


# -- 2b.5 activation ------------------------------------------------------------------------------------------------

def test_activation_takes_the_chunks_that_bring_the_window_down_to_the_retention_floor() -> None:
    # defaults: 30k threshold, 6k floor, so 24k should go
    assert select_chunks([6_000] * 5, 30_000, 6_000, 36_000).count == 4


def test_activation_falls_back_to_fewer_chunks_when_the_next_would_overshoot_too_far() -> None:
    # three chunks remove 30k (6k past the target, more than 95 % of the floor): two are taken
    assert select_chunks([10_000] * 3, 30_000, 6_000, None).count == 2


def test_past_block_after_activation_prefers_the_larger_prefix() -> None:
    # 100k threshold, bufferActivation 0.7 (30k floor), pending 130k past blockAfter 120k
    chunks = [60_000, 69_000]
    assert select_chunks(chunks, 130_000, 30_000, None).count == 1
    assert select_chunks(chunks, 130_000, 30_000, 120_000).count == 2


def test_at_the_threshold_a_single_chunk_is_activated_even_if_little_stays_raw() -> None:
    assert select_chunks([29_500], 30_000, 6_000, 36_000).count == 1
    sim = Sim(buffered())
    sim.say("t1", "user", words(25))  # buffered alone
    sim.settle()
    sim.say("t1", "user", words(78))  # 105 tokens: past the 100 threshold, below blockAfter
    sim.settle()
    assert len(events(sim, "data-om-activation")) == 1


def test_activated_chunks_are_appended_to_the_log_with_their_own_token_counts() -> None:
    sim = Sim(buffered())
    for _ in range(10):
        sim.say("t1", "user", TEN)
        sim.settle()
    (activate,) = [c for c in sim.commands if isinstance(c, ActivateChunks)]
    state = sim.state()
    assert activate.position == 0 and tuple(s.id for s in state.log) == activate.chunk_ids
    assert state.log_tokens == sum(s.tokens for s in state.log)
    covered = {m for s in state.log for m in (s.first_message_id, s.last_message_id)}
    assert not covered & {m.id for m in state.unobserved}


def test_each_activated_chunk_is_reported_under_the_cycle_that_buffered_it() -> None:
    sim = Sim(buffered())
    for _ in range(10):
        sim.say("t1", "user", TEN)
        sim.settle()
    activations = events(sim, "data-om-activation")
    ends = {e.cycle_id for e in events(sim, "data-om-buffering-end")}
    assert len(activations) == len(sim.state().log) >= 2
    assert all(a.chunks_activated == 1 and a.cycle_id in ends for a in activations)


def test_a_changed_model_activates_chunks_but_a_provider_alias_does_not() -> None:
    for previous, current, changed in (("openai/gpt-5-mini", "openai/gpt-5", True),
                                       ("openai/gpt-5-mini", "anthropic/gpt-5-mini", True),
                                       ("openai/gpt-5-mini", "openai.responses/gpt-5-mini", False),
                                       ("openai/gpt-5-mini", "gpt-5-mini", False)):
        sim = Sim({"activateOnProviderChange": True, **buffered()})
        sim.say("t1", "user", words(14), model=previous)
        sim.say("t1", "assistant", words(14), model=previous)
        sim.settle(10_000)
        sim.say("t1", "user", TEN, model=current)
        assert bool(events(sim, "data-om-activation")) == changed, (previous, current)


def test_idle_activation_measures_from_the_newest_assistant_message() -> None:
    sim = Sim({"activateAfterIdle": "5m", **buffered()})
    sim.say("t1", "user", words(14))
    answer = sim.say("t1", "assistant", words(14))
    sim.settle(10_000)
    sim.say("t1", "user", TEN, advance_ms=301_000 - 10_000)
    (activation,) = events(sim, "data-om-activation")
    assert activation.triggered_by == "ttl"
    assert activation.last_activity_at == answer.created_at_ms
    activated_at = datetime.fromisoformat(activation.activated_at.replace("Z", "+00:00"))
    idle = int(activated_at.timestamp() * 1000) - answer.created_at_ms
    assert idle >= 300_000 and activation.ttl_expired_ms == idle  # the time since the activity, not the excess
    assert activation.config.activate_after_idle == 300_000


# -- 2b.6 synchronous observation -----------------------------------------------------------------------------------

def test_a_synchronous_observation_appends_to_the_log_after_what_is_there() -> None:
    sim = Sim(sync_only(30))
    for _ in range(6):
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    assert len(state.log) == 2
    first, second = state.log
    assert first.boundary_at < second.boundary_at
    assert sim.last_context().segment_boundaries == (first.boundary_at, second.boundary_at)
    assert second.boundary_at == sim.messages[second.last_message_id].created_at_ms


def test_the_observed_messages_leave_the_pending_count() -> None:
    sim = Sim(sync_only(30))
    for _ in range(3):
        sim.say("t1", "user", TEN)
    sim.settle()
    assert sim.state().unobserved_tokens == 0
    assert events(sim, "data-om-status")[-1].windows.active.messages.tokens == 0


def test_an_observation_that_fills_the_log_is_followed_by_a_reflection() -> None:
    sim = Sim(sync_only(10, 25), outcome=lambda r: Outcome(text=words(30))
              if isinstance(r, RequestObservation) else Outcome())
    sim.say("t1", "user", TEN)
    sim.settle(1_000)
    assert [e.event_type for e in (x.event for x in sim.events)
            if e.event_type.startswith("data-om-observation")][-2:] == ["data-om-observation-end",
                                                                       "data-om-observation-start"]
    assert reflections(sim)
