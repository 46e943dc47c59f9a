"""Rules of activation, synchronous observation and cycle ends as the reference documents them (issue 14: a single
chunk activates at the threshold, no synchronous observation while a tool call is pending, idle activation fields,
and every started cycle ends even when it is overtaken). Driven through the host by ``tests.support.sim``.

Token counts in the simulator: one token per word plus one per message.
"""

from __future__ import annotations

import pytest

from om_stream.core.commands import EmitEvent, PersistSegment, PublishContext
from om_stream.core.engine import decide
from om_stream.core.inputs import ModelResultArrived, ReflectNow
from om_stream.core.state import RecordState
from om_stream.core.thresholds import select_chunks
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim


def words(count: int) -> str:
    return " ".join(["w"] * count)


# -- a single chunk at the threshold -------------------------------------------------------------------------------

def test_a_single_buffered_chunk_is_activated_once_the_threshold_is_crossed() -> None:
    sim = Sim(buffered())  # messageTokens 100, blockAfter 120
    sim.say("t1", "user", words(103))  # 104 tokens: buffered in the band between the threshold and blockAfter
    sim.settle()
    activation = events(sim, "data-om-activation")
    assert [a.triggered_by for a in activation] == ["threshold"]
    assert activation[0].tokens_activated == 104
    context = sim.last_context()
    assert context.segment_ids  # observed, although nothing of the retention floor stays raw
    assert sim.state().unobserved == []
    assert context.message_ids == ("m1",)  # the current question stays in the context


# -- tool calls ----------------------------------------------------------------------------------------------------

def test_no_synchronous_observation_while_a_tool_call_is_pending() -> None:
    sim = Sim(sync_only(40))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", words(30), tool_calls=("c1",))  # 41 tokens: past the threshold, the call open
    sim.settle()
    assert not events(sim, "data-om-observation-start")
    assert sim.requests == []
    assert sim.last_context().message_ids == ("m1", "m2")  # published, not held back
    sim.say("t1", "tool", TEN, tool_results=("c1",))
    sim.settle()
    started = events(sim, "data-om-observation-start")
    assert len(started) == 1
    # once the result is in: the question, the call and its result together
    assert started[0].tokens_to_observe == sum(sim.message_tokens[m] for m in ("m1", "m2", "m3"))
    assert sim.state().unobserved == []


def test_parallel_calls_wait_for_every_result() -> None:
    sim = Sim(sync_only(40))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", words(30), tool_calls=("c1", "c2"))
    sim.say("t1", "tool", TEN, tool_results=("c1",))
    sim.settle()
    assert not events(sim, "data-om-observation-start")
    sim.say("t1", "tool", TEN, tool_results=("c2",))
    sim.settle()
    assert [e.tokens_to_observe for e in events(sim, "data-om-observation-start")] == [sum(sim.message_tokens.values())]


def test_a_call_left_open_by_an_earlier_turn_does_not_hold_observation_back() -> None:
    sim = Sim(sync_only(40))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN, tool_calls=("c1",))  # never answered
    sim.say("t1", "assistant", TEN)
    sim.say("t1", "user", words(30))  # a new turn past the threshold
    sim.settle()
    assert events(sim, "data-om-observation-start")


def test_an_abandoned_call_does_not_keep_later_messages_from_being_observed() -> None:
    """A call that never gets its result must not make every later message unsafe to cut: the next user message
    ends its turn, so the conversation after it is observed and the raw messages stay bounded."""
    sim = Sim(sync_only(40))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN, tool_calls=("c1",))  # never answered
    for turn in range(12):
        sim.say("t1", "user", words(12))
        sim.say("t1", "assistant", words(12))
        sim.settle()
        assert sim.state().unobserved_tokens <= 40 + 26, f"turn {turn}: raw messages grow past the abandoned call"
    assert sim.state().total_observed_messages >= 20


def test_resource_scope_observes_the_other_threads_while_one_waits_for_a_tool_result() -> None:
    sim = Sim(sync_only(40), scope="resource")
    sim.say("a", "user", TEN)
    sim.say("a", "assistant", words(30), tool_calls=("c1",))
    sim.settle()
    assert not events(sim, "data-om-observation-start")
    sim.say("b", "user", TEN)
    sim.settle()
    first = events(sim, "data-om-observation-start")
    assert [e.thread_ids for e in first] == [["b"]]
    sim.say("a", "tool", TEN, tool_results=("c1",))
    sim.settle()
    assert [e.thread_ids for e in events(sim, "data-om-observation-start")] == [["b"], ["a"]]


# -- activation events ---------------------------------------------------------------------------------------------

def test_each_activated_chunk_is_reported_under_its_buffering_cycle_id() -> None:
    sim = Sim(buffered())
    for _ in range(10):
        sim.say("t1", "user", TEN)
        sim.settle()
    activations = [e for e in sim.events if e.event.event_type == "data-om-activation"]
    ends = {e.cycle_id: e for e in events(sim, "data-om-buffering-end")}
    assert len(activations) > 1  # several chunks activated at once
    assert len({a.event.cycle_id for a in activations}) == len(activations)  # type: ignore[attr-defined]
    for emitted in activations:
        event = emitted.event
        end = ends[event.cycle_id]  # type: ignore[attr-defined]
        assert event.chunks_activated == 1  # type: ignore[attr-defined]
        assert event.buffer_cycle_ids == [event.cycle_id]  # type: ignore[attr-defined]
        assert event.tokens_activated == end.tokens_buffered  # type: ignore[attr-defined]
        assert event.observation_tokens == end.buffered_tokens  # type: ignore[attr-defined]
        (segment,) = emitted.observations_from
        assert sim.segments[segment] == end.observations
    assert sum(a.event.messages_activated for a in activations) == 10 - len(sim.state().unobserved)  # type: ignore[attr-defined]


def _idle_activation(activate_after_idle: object, model: str | None = None) -> tuple[Sim, int]:
    sim = Sim({"activateAfterIdle": activate_after_idle, **buffered()})
    sim.say("t1", "user", words(14), model=model)
    sim.say("t1", "assistant", words(14), model=model)
    last_activity = sim.now
    sim.settle(10_000)
    assert sim.state().buffered and not events(sim, "data-om-activation")
    sim.say("t1", "user", TEN, advance_ms=301_000 - 10_000, model=model)
    return sim, last_activity


def test_idle_activation_reports_the_time_since_the_last_activity() -> None:
    sim, last_activity = _idle_activation(300_000)
    (activation,) = events(sim, "data-om-activation")
    assert activation.triggered_by == "ttl"
    assert activation.last_activity_at == last_activity
    activated_at = next(e.at for e in sim.contexts if e.spec.segment_ids)
    assert activation.ttl_expired_ms == activated_at - last_activity >= 300_000
    (start,) = events(sim, "data-om-buffering-start")
    assert activation.cycle_id == start.cycle_id


def test_idle_activation_reports_the_idle_time_auto_resolved_to() -> None:
    sim, _ = _idle_activation("auto", model="anthropic/claude-sonnet-4-5")
    (activation,) = events(sim, "data-om-activation")
    assert activation.config.activate_after_idle == 300_000


def test_an_activated_reflection_is_reported_under_its_buffering_cycle_id() -> None:
    sim = Sim({"observation": {"messageTokens": 40, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 60, "bufferActivation": 0.5}})
    for _ in range(40):
        sim.say("t1", "user", TEN)
        sim.settle()
    reflections = [a for a in events(sim, "data-om-activation") if a.operation_type == "reflection"]
    starts = {e.cycle_id for e in events(sim, "data-om-buffering-start") if e.operation_type == "reflection"}
    assert reflections
    assert all(a.cycle_id in starts and a.buffer_cycle_ids == [a.cycle_id] for a in reflections)


# -- overtaken cycles end too --------------------------------------------------------------------------------------

def test_a_background_reflection_overtaken_by_a_newer_generation_ends_with_a_failed_event() -> None:
    def outcome(request: object) -> Outcome:
        slow = request.__class__.__name__ == "RequestReflection" and request.kind == "buffer"  # type: ignore[attr-defined]
        return Outcome(delay_ms=60_000 if slow else 100)

    sim = Sim({"observation": {"messageTokens": 40, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 400, "bufferActivation": 0.05}}, outcome=outcome)
    while not [e for e in events(sim, "data-om-buffering-start") if e.operation_type == "reflection"]:
        sim.say("t1", "user", TEN)
        sim.settle(5_000)
    state = sim.state()
    sim.apply(state.key, state.resource_id, ReflectNow())  # commits a generation before the background one is back
    sim.settle()
    (background,) = [e for e in events(sim, "data-om-buffering-start") if e.operation_type == "reflection"]
    assert sim.state().generation == 1
    (failed,) = [e for e in events(sim, "data-om-buffering-failed") if e.cycle_id == background.cycle_id]
    assert failed.operation_type == "reflection"
    assert "overtaken" in failed.error and "generation 1" in failed.error
    assert sim.state().reflection_failures == 0  # not a model failure: no back-off


@pytest.mark.parametrize(("options", "failed_type"), [(buffered(), "data-om-buffering-failed"),
                                                   (sync_only(20), "data-om-observation-failed")])
def test_a_cycle_whose_messages_were_observed_meanwhile_ends_with_a_failed_event(options: dict[str, object],
                                                                               failed_type: str) -> None:
    sim = Sim(options, outcome=lambda r: Outcome(lost=True))
    sim.say("t1", "user", words(24))
    (cycle,) = sim.state().cycles
    # whatever observed them, its messages are no longer unobserved when its result arrives
    state = RecordState.from_dict({**sim.state().to_dict(), "unobserved": [], "unobserved_tokens": 0})
    result = ModelResultArrived(cycle_id=cycle.id, attempt=1, operation="observation", ok=True,
                                observations="* 🔴 observed m1")
    decision = decide(state, result, sim.now, sim.config, sim.accountant)
    failed = [c.event for c in decision.commands if isinstance(c, EmitEvent) and c.event.event_type == failed_type]
    assert [f.cycle_id for f in failed] == [cycle.id]  # type: ignore[attr-defined]
    assert "observed before its result arrived" in failed[0].error  # type: ignore[attr-defined]
    assert not any(isinstance(c, PersistSegment) for c in decision.commands)
    assert decision.state.buffered == [] and decision.state.cycles == []
    # a context held back by the (blocking) synchronous cycle is released
    blocking = failed_type == "data-om-observation-failed"
    assert any(isinstance(c, PublishContext) for c in decision.commands) == blocking


# -- the selection rule itself -------------------------------------------------------------------------------------

def test_chunk_selection_takes_at_least_one_chunk_even_below_the_minimum_context() -> None:
    # one 104-token chunk, retention floor 20, blockAfter 120: leaving nothing raw is still better than waiting
    assert select_chunks([104], 104, 20, 120).count == 1
    assert select_chunks([60, 44], 104, 20, 120).count == 1  # the under prefix keeps 44 raw
    assert select_chunks([], 104, 20, 120).count == 0
