"""The state machine's rules for resource scope, manual commands, tenancy and purity (driven through core.decide
by tests.support.sim).

Token counts in the simulator: one token per word plus one per message, no conversation overhead, so a message of
9 words costs 10 tokens.
"""

from __future__ import annotations

from om_stream.core.commands import PersistSegment, PublishContext, RequestObservation
from om_stream.core.engine import decide, new_record
from om_stream.core.inputs import ClearRecord, MessageAppended, ObserveNow, OverrideThresholds, ReflectNow, TimerFired
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim

# -- resource scope ----------------------------------------------------------------------------------------------

def test_resource_scope_observes_the_largest_threads_in_batches_of_max_tokens_per_batch() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 60, "maxTokensPerBatch": 25},
               "reflection": {"observationTokens": 10_000}})
    for thread in ("a", "b", "c"):
        sim.say(thread, "user", TEN)
        sim.say(thread, "assistant", TEN)
    requests = [r for r in sim.requests if isinstance(r, RequestObservation)]
    assert len(requests) == 3  # 20 tokens per thread, whole threads per batch of at most 25
    assert all(len(r.thread_ids) == 1 for r in requests)
    sim.settle()
    segments = [c for c in sim.commands if isinstance(c, PersistSegment)]
    assert all(s.text.startswith('<thread id="') for s in segments)
    assert not any(f'id="{t}"' in s.text for s in segments for t in "abc")  # ids are obscured


def test_resource_scope_context_shares_the_log_across_threads() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 40}, "reflection": {"observationTokens": 10_000}})
    for thread in ("a", "b"):
        sim.say(thread, "user", TEN)
        sim.say(thread, "assistant", TEN)
    sim.settle()
    sim.say("a", "user", TEN)
    context_a = sim.last_context("a")
    assert context_a.segment_ids
    sim.say("b", "user", TEN)
    assert sim.last_context("b").segment_ids == context_a.segment_ids


# -- commands ----------------------------------------------------------------------------------------------------

def test_a_forced_observe_activates_and_observes_whatever_the_thresholds() -> None:
    sim = Sim(buffered())
    for _ in range(3):
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    sim.settle()
    assert sim.state().unobserved == []
    assert sorted(sim.observed_count.values()) == [1, 1, 1]


def test_observe_below_the_message_threshold_does_nothing_and_calls_no_model() -> None:
    sim = Sim(sync_only(100))
    for _ in range(5):  # 50 of 100 tokens
        sim.say("t1", "user", TEN)
        state = sim.state()
        commands = sim.apply(state.key, state.resource_id, ObserveNow())  # an agent observing after every turn
        assert commands == []
    sim.settle()
    assert sim.requests == [] and sim.observed_count == {}
    assert [m.id for m in sim.state().unobserved] == ["m1", "m2", "m3", "m4", "m5"]


def test_observe_at_the_message_threshold_activates_and_observes_the_rest() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=120_000 if r.kind == "buffer" else 1_000))
    for _ in range(10):  # 100 tokens: the threshold, below blockAfter (120), so no observation runs by itself
        sim.say("t1", "user", TEN)
    assert sim.state().unobserved_tokens == 100 and not sim.state().in_flight("observation", "sync")
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow())
    sim.settle()
    assert sim.state().unobserved == []
    assert set(sim.observed_count.values()) == {1} and len(sim.observed_count) == 10
    assert any(r.kind == "manual" for r in sim.requests)


def test_manual_reflect_condenses_the_log_with_guidance() -> None:
    sim = Sim(sync_only(20))
    for _ in range(6):
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    sim.apply(state.key, state.resource_id, ReflectNow(guidance="keep dates"))
    request = sim.requests[-1]
    assert request.kind == "manual"
    assert request.guidance == "keep dates"  # type: ignore[union-attr]
    assert request.compression_start_level == 0  # type: ignore[union-attr]
    sim.settle()
    assert sim.state().generation == 1


def test_threshold_overrides_merge_field_by_field() -> None:
    sim = Sim(buffered(bufferTokens=20))
    sim.say("t1", "user", TEN)
    state = sim.state()
    sim.apply(state.key, state.resource_id, OverrideThresholds(message_tokens=40))
    sim.apply(state.key, state.resource_id, OverrideThresholds(observation_tokens=500))
    merged = sim.state()
    assert (merged.override_message_tokens, merged.override_observation_tokens) == (40, 500)
    assert events(sim, "data-om-status")[-1].windows.active.messages.threshold == 40
    assert events(sim, "data-om-status")[-1].windows.active.observations.threshold == 500
    # the merged pair is what is validated: 25 is above bufferTokens (20), so it is taken with the 500 kept
    sim.apply(state.key, state.resource_id, OverrideThresholds(message_tokens=25))
    assert (sim.state().override_message_tokens, sim.state().override_observation_tokens) == (25, 500)
    # replace: exactly the given ones, so the message threshold goes back to the configuration's
    sim.apply(state.key, state.resource_id, OverrideThresholds(observation_tokens=600, replace=True))
    assert (sim.state().override_message_tokens, sim.state().override_observation_tokens) == (None, 600)
    assert events(sim, "data-om-status")[-1].windows.active.messages.threshold == 100


def test_an_override_for_a_thread_no_message_reached_is_refused_and_makes_no_record() -> None:
    from om_stream.core.commands import RejectInput

    sim = Sim(buffered())
    sim.say("t1", "user", TEN)
    commands = sim.apply("nobody", "nobody", OverrideThresholds(message_tokens=40, thread_id="nobody"))
    refused = [c for c in commands if isinstance(c, RejectInput)]
    assert [c.reason for c in refused] == ["unknown_thread"] and "'nobody'" in refused[0].detail
    assert "nobody" not in sim.states
    assert not [c for c in commands if isinstance(c, PublishContext)]
    # the thread's first message then starts it with the configuration's thresholds
    sim.say("nobody", "user", TEN, resource="nobody")
    assert sim.state("nobody", "nobody").override_message_tokens is None


def test_per_record_threshold_override_applies_and_invalid_ones_are_rejected() -> None:
    sim = Sim(buffered(bufferTokens=20))
    sim.say("t1", "user", TEN)
    state = sim.state()
    commands = sim.apply(state.key, state.resource_id, OverrideThresholds(message_tokens=20))  # not above buffer
    assert [c.reason for c in commands if c.__class__.__name__ == "RejectInput"] == ["invalid_override"]
    sim.apply(state.key, state.resource_id, OverrideThresholds(message_tokens=40, observation_tokens=500))
    for _ in range(4):
        sim.say("t1", "user", TEN)
        sim.settle()
    assert events(sim, "data-om-activation")  # 40-token threshold instead of 100
    assert events(sim, "data-om-status")[-1].windows.active.messages.threshold == 40


def test_clear_forgets_the_observations_and_ignores_results_that_arrive_later() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=60_000))
    sim.say("t1", "user", " ".join(["w"] * 25))
    state = sim.state()
    (running,) = state.cycles  # a buffering cycle is running
    sim.apply(state.key, state.resource_id, ClearRecord())
    cleared = sim.state()
    assert cleared.buffered == [] and cleared.log == [] and running.id not in [c.id for c in cleared.cycles]
    assert cleared.epoch == 1
    assert [m.id for m in cleared.unobserved] == ["m1"]  # the conversation stays
    assert sim.last_context().message_ids == ("m1",)
    sim.settle()
    assert not [e for e in events(sim, "data-om-buffering-end") if e.cycle_id == running.id]
    assert all(c.cycle_id != running.id for c in sim.state().buffered)


def test_clear_gives_the_conversation_back_as_unobserved_and_observe_rebuilds_the_log() -> None:
    sim = Sim(sync_only(40))
    for i in range(3):
        sim.say("t1", "user" if i % 2 == 0 else "assistant", TEN)
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    sim.settle()
    before = sim.state()
    assert before.log and before.unobserved == []
    asked = len(sim.requests)
    sim.apply(before.key, before.resource_id, ClearRecord("t1"))
    cleared = sim.state()
    assert len(sim.requests) == asked  # 30 tokens, below the 40-token threshold: the clear calls no model
    assert cleared.log == [] and cleared.log_tokens == 0
    assert [m.id for m in cleared.unobserved] == ["m1", "m2", "m3"]
    assert cleared.unobserved_tokens == 30 and cleared.msg_seq == before.msg_seq
    context = sim.last_context()
    assert context.segment_ids == () and context.message_ids == ("m1", "m2", "m3")
    sim.apply(cleared.key, cleared.resource_id, ObserveNow())  # below the threshold: still nothing
    assert len(sim.requests) == asked
    sim.apply(cleared.key, cleared.resource_id, ObserveNow(force=True))
    sim.settle()
    rebuilt = sim.state()
    assert rebuilt.log and rebuilt.unobserved == []
    assert sim.observed_count == {"m1": 2, "m2": 2, "m3": 2}  # once before the clear, once after
    message = sim.say("t1", "user", TEN)  # numbering goes on after the cleared epoch
    assert sim.state().unobserved[-1].id == message.message_id
    assert sim.state().unobserved[-1].seq == before.msg_seq + 1


def test_a_cleared_conversation_past_the_limit_is_observed_again_before_the_agent_gets_it() -> None:
    sim = Sim(sync_only(40))
    for i in range(6):
        sim.say("t1", "user" if i % 2 == 0 else "assistant", TEN)
        sim.settle()
    state = sim.state()
    published, observed = len(sim.contexts), dict(sim.observed_count)
    sim.apply(state.key, state.resource_id, ClearRecord("t1"))
    assert sim.state().in_flight("observation", "sync")  # 60 tokens past the 40-token threshold
    assert len(sim.contexts) == published  # the context waits for it rather than carry 60 raw tokens
    sim.settle()
    assert sim.state().log and sim.last_context().segment_ids
    assert sim.state().unobserved_tokens < 40
    assert {m: sim.observed_count[m] - observed.get(m, 0) for m in sim.messages} == {f"m{i}": 1 for i in range(1, 7)}


def test_clear_keeps_a_tool_call_waiting_for_its_result_and_the_current_turn() -> None:
    sim = Sim(sync_only(1_000))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", "looking it up", tool_calls=("c1",))
    state = sim.state()
    sim.apply(state.key, state.resource_id, ClearRecord())
    cleared = sim.state()
    assert cleared.threads["t1"].open_tool_calls == ["c1"]
    assert cleared.threads["t1"].turn_message is not None and cleared.threads["t1"].turn_message.id == "m1"
    assert [m.safe_cut for m in cleared.unobserved] == [True, False]


def test_clear_in_resource_scope_gives_back_every_thread_of_the_resource() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 30}, "reflection": {"observationTokens": 10_000}})
    for thread in ("a", "b"):
        sim.say(thread, "user", TEN)
        sim.say(thread, "assistant", TEN)
    sim.settle()
    state = sim.state("a")
    assert state.log
    sim.apply(state.key, state.resource_id, ClearRecord("a"))
    cleared = sim.state("a")
    assert cleared.log == []
    assert sorted(m.id for m in cleared.unobserved) == ["m1", "m2", "m3", "m4"]
    # b's context from before the clear (the clear's observation holds contexts back): m3 was observed and m4
    # answered it, so m3 is in the log only
    assert sim.last_context("b").message_ids == ("m4",)


def test_a_clear_batched_after_a_message_gives_that_message_back_too() -> None:
    from om_stream.core.messages import Message, TextPart
    from om_stream.runtime.host_ports import Arrival

    sim = Sim(sync_only(1_000))
    first = sim.say("t1", "user", TEN)
    second = Message(message_id="m2", thread_id="t1", resource_id="r1", role="assistant",
                     created_at=first.created_at, parts=(TextPart(text=TEN),))
    state = sim.state()
    batch = [Arrival(state.key, state.resource_id, MessageAppended(second), None),
             Arrival(state.key, state.resource_id, ClearRecord(), None)]
    sim._loop.run_until_complete(sim.host.apply(batch))  # the worker decides a batch before writing its rows
    assert [m.id for m in sim.state().unobserved] == ["m1", "m2"]


def test_clearing_a_thread_no_message_reached_makes_no_record() -> None:
    sim = Sim(buffered())
    assert sim.apply("nobody", "nobody", ClearRecord("nobody")) == []
    assert sim.apply("nobody", "nobody", ObserveNow("nobody", force=True)) == []
    assert "nobody" not in sim.states


def test_a_duplicate_message_changes_nothing_but_gets_its_context_again() -> None:
    sim = Sim(buffered())
    message = sim.say("t1", "user", TEN)
    state = sim.state()
    commands = sim.apply(state.key, state.resource_id, MessageAppended(message))
    assert sim.state() == state  # not even a version or an id: a replay numbers everything as the first time
    (again,) = commands
    assert isinstance(again, PublishContext) and again.spec == sim.contexts[-2].spec  # the same context, sent again


def test_a_result_read_again_sends_the_context_it_released_again() -> None:
    """A crash may keep the state a result made and lose the context it released (the agent waits for it): read
    again, the result finds its cycle resolved, changes nothing, and sends that context again."""
    sim = Sim(sync_only(40))
    for _ in range(4):
        sim.say("t1", "user", TEN)
    (request,) = [r for r in sim.requests if isinstance(r, RequestObservation)]
    sim.settle()
    released, after = sim.last_context(), sim.state()
    assert released.segment_ids and not after.cycles
    commands = sim.apply(after.key, after.resource_id, sim._result(request, Outcome()))
    assert sim.state() == after
    assert [c.spec for c in commands if isinstance(c, PublishContext)] == [released]


def test_a_deadline_read_again_leaves_the_next_attempts_deadline_alone() -> None:
    """A cycle's deadline fired, the call was asked again with a new deadline; the first firing read again (after a
    crash) must not take the new deadline with it, or a second lost call would never be asked again."""
    sim = Sim(buffered(), outcome=lambda r: Outcome(lost=True))
    for _ in range(3):
        sim.say("t1", "user", TEN)
    state = sim.state()
    (cycle,) = state.cycles
    timer = f"deadline:{cycle.id}"
    first = state.timers[timer]
    sim.run_until(first)
    retried = sim.state()
    assert retried.cycles[0].attempt == 2 and retried.timers[timer] > first
    commands = sim.apply(state.key, state.resource_id, TimerFired(timer, first))
    assert sim.state() == retried
    assert [c for c in commands if isinstance(c, RequestObservation)] == []
    sim.run_until(retried.timers[timer])
    assert sim.state().cycles[0].attempt == 3  # the second attempt's deadline still fired


# -- purity ------------------------------------------------------------------------------------------------------

def test_decide_never_mutates_the_state_it_is_given() -> None:
    sim = Sim(buffered())
    for _ in range(6):
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    snapshot = state.to_dict()
    message = sim.messages["m1"].model_copy(update={"message_id": "new"})
    decide(state, MessageAppended(message), sim.now, sim.config, sim.accountant)
    assert state.to_dict() == snapshot


def test_replaying_the_same_inputs_reproduces_the_same_commands() -> None:
    def run() -> list[str]:
        sim = Sim(buffered())
        for i in range(15):
            sim.say("t1", "user" if i % 2 == 0 else "assistant", TEN)
            sim.settle()
        return [repr(c) for c in sim.commands]

    assert run() == run()


def test_state_round_trips_through_its_dict_form() -> None:
    sim = Sim({"temporalMarkers": True, **buffered()}, outcome=lambda r: Outcome(delay_ms=30_000))
    for i in range(12):
        sim.say("t1", "user" if i % 2 == 0 else "assistant", TEN)
    state = sim.state()
    assert state.cycles
    assert state.unobserved
    restored = type(state).from_dict(state.to_dict())
    assert restored == state
    assert new_record("k", "thread", "r").to_dict()["unobserved"] == []


def test_publish_context_carries_read_your_writes_ids() -> None:
    sim = Sim(buffered())
    message = sim.say("t1", "user", TEN)
    published = [c for c in sim.commands if isinstance(c, PublishContext)]
    assert published[-1].spec.through_message_id == message.message_id
    assert published[-1].spec.version == 1


def test_a_resend_timer_asks_for_an_in_flight_call_again_with_the_same_request_id() -> None:
    sim = Sim(sync_only(40), outcome=lambda r: Outcome(lost=True))
    for _ in range(4):
        sim.say("t1", "user", TEN)
    first = [r for r in sim.requests if isinstance(r, RequestObservation)]
    state = sim.state()
    cycle = state.cycles[0]
    sim.apply(state.key, state.resource_id, TimerFired(f"resend:{cycle.id}"))
    again = [r for r in sim.requests if isinstance(r, RequestObservation)]
    assert len(again) == len(first) + 1
    assert again[-1].request_id == first[-1].request_id
    assert sim.state().cycles == state.cycles  # nothing else changes
    sim.apply(state.key, state.resource_id, TimerFired("resend:no-such-cycle"))
    assert len([r for r in sim.requests if isinstance(r, RequestObservation)]) == len(again)


def test_a_thread_belongs_to_one_resource() -> None:
    from om_stream.core.commands import RejectInput

    sim = Sim({})
    sim.say("t1", "user", "secret of resource a", resource="a")
    sim.say("t1", "user", "hello from resource b", resource="b")
    state = sim.state("t1", "a")
    assert state.resource_id == "a" and [m.id for m in state.unobserved] == ["m1"]
    rejected = [c for c in sim.commands if isinstance(c, RejectInput)]
    assert [c.reason for c in rejected] == ["resource_mismatch"] and "'a'" not in rejected[0].detail
    assert all("m2" not in c.spec.message_ids for c in sim.contexts)


def test_a_record_made_by_a_command_takes_the_resource_of_its_first_message() -> None:
    sim = Sim({})
    sim.apply("t1", "t1", ObserveNow("t1"))  # a command for a thread nobody wrote to yet
    assert "t1" not in sim.states  # makes no record
    sim.say("t1", "user", "first message", resource="a")
    assert sim.state("t1", "a").resource_id == "a" and len(sim.state("t1", "a").unobserved) == 1
