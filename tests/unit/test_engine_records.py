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

def test_manual_observe_activates_and_observes_whatever_the_thresholds() -> None:
    sim = Sim(buffered())
    for _ in range(3):
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow())
    sim.settle()
    assert sim.state().unobserved == []
    assert sorted(sim.observed_count.values()) == [1, 1, 1]


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


def test_clear_forgets_the_record_and_ignores_results_that_arrive_later() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=60_000))
    sim.say("t1", "user", " ".join(["w"] * 25))
    state = sim.state()
    sim.apply(state.key, state.resource_id, ClearRecord())
    sim.settle()
    cleared = sim.state()
    assert cleared.unobserved == []
    assert cleared.buffered == []
    assert cleared.log == []
    assert cleared.epoch == 1
    assert not events(sim, "data-om-buffering-end")
    assert sim.last_context().message_ids == ()


def test_a_duplicate_message_changes_nothing_but_gets_its_context() -> None:
    sim = Sim(buffered())
    message = sim.say("t1", "user", TEN)
    state = sim.state()
    commands = sim.apply(state.key, state.resource_id, MessageAppended(message))
    assert sim.state().unobserved_tokens == 10
    assert [type(c).__name__ for c in commands] == ["PublishContext", "EmitEvent"]


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
    sim.say("t1", "user", "first message", resource="a")
    assert sim.state("t1", "a").resource_id == "a" and len(sim.state("t1", "a").unobserved) == 1
