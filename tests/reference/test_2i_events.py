"""§2i of the reference: the ``data-om-*`` lifecycle events, when each is emitted and what it carries.

Through the simulator (every event the host publishes is recorded) and the embedded ``Memory``'s listeners.
"""

from __future__ import annotations

from om_stream import Memory
from om_stream.core.events import EVENT_TYPES, OMEvent
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all
from tests.support.engine_cases import TEN, buffered, events, reflect_after_six_turns, sync_only
from tests.support.sim import Outcome, Sim

DOCUMENTED = {"data-om-status", "data-om-observation-start", "data-om-observation-end",
              "data-om-observation-failed", "data-om-buffering-start", "data-om-buffering-end",
              "data-om-buffering-failed", "data-om-activation", "data-om-thread-update"}


def test_every_documented_event_type_exists_and_the_deprecated_one_does_not() -> None:
    assert set(EVENT_TYPES) >= DOCUMENTED
    assert "data-om-observed" not in EVENT_TYPES


def test_events_carry_the_documented_camel_case_field_names() -> None:
    sim = Sim(sync_only(30))
    for _ in range(3):
        sim.say("t1", "user", TEN)
    sim.settle()
    start = events(sim, "data-om-observation-start")[0].model_dump(by_alias=True)
    assert {"cycleId", "operationType", "startedAt", "tokensToObserve", "recordId", "threadId", "threadIds",
            "config"} <= set(start)
    assert set(start["config"]) >= {"messageTokens", "observationTokens", "scope"}


# -- status ---------------------------------------------------------------------------------------------------------

def test_a_status_accompanies_every_context_with_both_windows() -> None:
    sim = Sim(buffered())
    for _ in range(4):
        sim.say("t1", "user", TEN)
        sim.settle()
    statuses = events(sim, "data-om-status")
    assert len(statuses) == len(sim.contexts)
    last = statuses[-1]
    assert (last.record_id, last.thread_id, last.generation_count) == ("thread:t1", "t1", 0)
    assert last.windows.active.messages.tokens == sim.state().unobserved_tokens
    assert last.windows.active.observations.threshold == 10_000


# -- observation start / end / failed -------------------------------------------------------------------------------

def test_an_observation_reports_its_input_and_output_sizes_and_its_hints() -> None:
    sim = Sim(sync_only(30))
    for _ in range(3):
        sim.say("t1", "user", TEN)
    sim.settle()
    (start,) = events(sim, "data-om-observation-start")
    (end,) = events(sim, "data-om-observation-end")
    assert start.cycle_id == end.cycle_id and (start.operation_type, end.operation_type) == ("observation",) * 2
    assert start.tokens_to_observe == end.tokens_observed == 30
    assert end.observation_tokens == sim.accountant.count_text(end.observations) > 0
    assert end.current_task == "the current task" and end.duration_ms == 1_000
    assert start.thread_ids == ["t1"] and start.config.scope == "thread" and start.config.message_tokens == 30


def test_a_failed_observation_reports_the_error_the_attempt_and_any_partial_output() -> None:
    sim = Sim(sync_only(30), outcome=lambda r: Outcome(ok=False, error="HTTP 500: " + "x" * 5_000,
                                                      text="* 🔴 partial"))
    for _ in range(3):
        sim.say("t1", "user", TEN)
    sim.settle(2_000)
    failed = events(sim, "data-om-observation-failed")[0]
    assert failed.cycle_id == events(sim, "data-om-observation-start")[0].cycle_id
    assert failed.tokens_attempted == 30 and failed.observations == "* 🔴 partial"
    assert failed.error.startswith("HTTP 500") and len(failed.error) <= 2_000


def test_a_reflection_reports_the_new_log_size() -> None:
    sim = Sim(sync_only(20))
    state = reflect_after_six_turns(sim)
    end = next(e for e in events(sim, "data-om-observation-end") if e.operation_type == "reflection")
    assert end.tokens_observed == state.log_tokens
    assert end.observation_tokens == sim.state().log_tokens


# -- buffering start / end / failed ---------------------------------------------------------------------------------

def test_buffering_end_reports_this_cycles_input_and_output() -> None:
    sim = Sim(buffered())
    for _ in range(8):
        sim.say("t1", "user", TEN)
        sim.settle()
    starts = {e.cycle_id: e for e in events(sim, "data-om-buffering-start")}
    ends = events(sim, "data-om-buffering-end")
    assert len(ends) >= 3
    for end in ends:
        assert end.tokens_buffered == starts[end.cycle_id].tokens_to_buffer
        assert end.buffered_tokens == sim.accountant.count_text(end.observations)  # this chunk, not all chunks


def test_a_failed_background_reflection_ends_under_the_cycle_id_it_started_with() -> None:
    def failing_reflections(request: object) -> Outcome:
        return Outcome(ok=type(request).__name__ != "RequestReflection", error="HTTP 429")

    sim = Sim({"observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 60, "bufferActivation": 0.5}}, outcome=failing_reflections)
    for _ in range(20):
        sim.say("t1", "user", TEN)
        sim.settle()
    starts = [e for e in events(sim, "data-om-buffering-start") if e.operation_type == "reflection"]
    failed = [e for e in events(sim, "data-om-buffering-failed") if e.operation_type == "reflection"]
    assert starts and failed
    assert {f.cycle_id for f in failed} <= {s.cycle_id for s in starts}
    assert all(f.duration_ms == 1_000 for f in failed)


# -- activation -----------------------------------------------------------------------------------------------------

def test_an_observation_activation_reports_each_chunk_with_its_text() -> None:
    sim = Sim(buffered())
    for _ in range(10):
        sim.say("t1", "user", TEN)
        sim.settle()
    ends = {e.cycle_id: e for e in events(sim, "data-om-buffering-end")}
    activation_commands = [e for e in sim.events if e.event.event_type == "data-om-activation"]
    assert activation_commands
    for command in activation_commands:
        event = command.event
        assert event.operation_type == "observation" and event.chunks_activated == 1
        assert event.tokens_activated == ends[event.cycle_id].tokens_buffered
        assert event.observation_tokens == ends[event.cycle_id].buffered_tokens
        assert event.messages_activated > 0 and event.generation_count == 0
        assert command.observations_from  # the chunk's stored text fills ``observations`` when published


async def test_a_published_activation_carries_the_activated_observations() -> None:
    seen: list[OMEvent] = []
    async with Memory({"model": "openai/gpt-5-mini", "observation": {"messageTokens": 120, "bufferTokens": 40}},
                      model=FunctionModel(observe_all), clock=ManualClock(START_MS),
                      on_event=lambda e, _i: seen.append(e)) as om:
        for i in range(1, 12):
            await om.add_message(message(i, "word " * 15))
            await om.settle()
    activations = [e for e in seen if e.event_type == "data-om-activation"]
    assert activations and all("saw m" in e.observations for e in activations)  # type: ignore[attr-defined]


def test_a_reflection_activation_reports_the_log_before_and_after() -> None:
    sim = Sim({"observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 40, "bufferActivation": 0.5}})
    for _ in range(30):
        sim.say("t1", "user", TEN)
        sim.settle()
    activation = next(e for e in events(sim, "data-om-activation") if e.operation_type == "reflection")
    assert activation.messages_activated == 0 and activation.generation_count >= 1
    assert activation.tokens_activated > activation.observation_tokens > 0
    assert activation.cycle_id in {e.cycle_id for e in events(sim, "data-om-buffering-end")
                                   if e.operation_type == "reflection"}


# -- where events go ------------------------------------------------------------------------------------------------

async def test_events_reach_the_listener_and_never_the_agents_messages() -> None:
    seen: list[str] = []
    async with Memory({"model": "openai/gpt-5-mini", "observation": {"messageTokens": 40, "bufferTokens": False}},
                      model=FunctionModel(observe_all), clock=ManualClock(START_MS),
                      on_event=lambda e, _i: seen.append(e.event_type)) as om:
        for i in range(1, 5):
            await om.add_message(message(i, "word " * 15, "user" if i % 2 else "assistant"))
            await om.settle()
        context = await om.context("t1")
    assert "data-om-observation-end" in seen
    assert context is not None and all(m.role in ("user", "assistant") for m in context.messages)
    assert all("data-om" not in m.text for m in context.messages)


def test_a_resource_scope_cycle_has_one_start_and_one_end_naming_all_its_threads() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 40, "maxTokensPerBatch": 1_000},
               "reflection": {"observationTokens": 10_000}})
    for thread in ("a", "b"):
        sim.say(thread, "user", TEN)
        sim.say(thread, "assistant", TEN)
    sim.settle()
    (start,) = events(sim, "data-om-observation-start")
    (end,) = events(sim, "data-om-observation-end")
    assert sorted(start.thread_ids) == ["a", "b"] and end.cycle_id == start.cycle_id
