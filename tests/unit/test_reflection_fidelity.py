"""A reflection's hint and the events of its compression ladder, as the reference has them (issue 30 items 3, 6)."""

from __future__ import annotations

from om_stream.core.inputs import AttemptOutcome
from tests.support.engine_cases import events, reflect_after_six_turns, sync_only
from tests.support.sim import Outcome, Sim


def test_a_reflectors_suggested_response_becomes_the_threads_hint() -> None:
    def reflector(request: object) -> Outcome:
        return Outcome(suggested_response="Ask whether the move date is fixed.", current_task="Plan the move.")

    sim = Sim(sync_only(20), outcome=reflector)
    reflect_after_six_turns(sim)
    thread = sim.state().threads["t1"]
    assert (thread.current_task, thread.suggested_response) == ("Plan the move.", "Ask whether the move date is fixed.")
    end = next(e for e in events(sim, "data-om-observation-end") if e.operation_type == "reflection")
    assert end.suggested_response == "Ask whether the move date is fixed."
    assert sim.last_context().suggested_response == "Ask whether the move date is fixed."


def test_each_retry_at_a_stricter_level_is_announced_by_a_failed_and_a_new_start_event() -> None:
    climb = (AttemptOutcome(level=1, tokens=80, next_level=2), AttemptOutcome(level=2, tokens=0, next_level=3))

    def reflector(request: object) -> Outcome:
        return Outcome(attempts=climb)

    sim = Sim(sync_only(20), outcome=reflector)
    reflect_after_six_turns(sim)
    reflection = [e.event for e in sim.events if getattr(e.event, "operation_type", None) == "reflection"]
    kinds = [e.event_type.removeprefix("data-om-observation-") for e in reflection]
    assert kinds == ["start", "failed", "start", "failed", "start", "end"]
    first, failed_1, second, failed_2, third, end = reflection
    assert failed_1.cycle_id == first.cycle_id  # type: ignore[attr-defined]
    assert "retrying at level 2" in failed_1.error and "80 tokens" in failed_1.error  # type: ignore[attr-defined]
    assert "retrying at level 3" in failed_2.error  # type: ignore[attr-defined]
    assert failed_2.cycle_id == second.cycle_id != first.cycle_id  # type: ignore[attr-defined]
    assert end.cycle_id == third.cycle_id not in (first.cycle_id, second.cycle_id)  # type: ignore[attr-defined]
    assert second.tokens_to_observe == first.tokens_to_observe  # type: ignore[attr-defined]


def test_a_reflection_that_needed_one_attempt_shows_one_start_and_one_end() -> None:
    sim = Sim(sync_only(20))
    reflect_after_six_turns(sim)
    kinds = [e.event.event_type for e in sim.events if getattr(e.event, "operation_type", None) == "reflection"]
    assert kinds == ["data-om-observation-start", "data-om-observation-end"]


def test_in_resource_scope_a_reflections_hints_are_no_one_threads() -> None:
    def reflector(request: object) -> Outcome:
        return Outcome(suggested_response="Ask about the move.", current_task="Plan the move.")

    sim = Sim(sync_only(20), outcome=reflector, scope="resource")
    reflect_after_six_turns(sim)
    assert any(e.operation_type == "reflection" for e in events(sim, "data-om-observation-end"))
    thread = sim.state().threads["t1"]
    assert (thread.current_task, thread.suggested_response) != ("Plan the move.", "Ask about the move.")
