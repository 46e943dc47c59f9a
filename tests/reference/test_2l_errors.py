"""§2l of the reference: transport retries, what each kind of failure does, degenerate answers and the parser's
safeguards.

The retry rules are the gateway's (``adapters/gateway/resilience.py``, pure functions); the failure semantics are
driven through the embedded ``Memory`` with a ``FunctionModel`` that fails, and through the simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from om_stream import Memory
from om_stream.adapters.gateway.resilience import RetryPolicy, incomplete_reason, is_transient
from om_stream.core.events import OMEvent
from om_stream.core.prompts.degenerate import is_degenerate
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim

# -- 2l.1 which errors are retried, and how long to wait ------------------------------------------------------------


@pytest.mark.parametrize(("error", "transient"), [
    (ModelError("upstream", status_code=429), True),
    (ModelError("upstream", status_code=408), True),
    (ModelError("upstream", status_code=425), True),
    (ModelError("upstream", status_code=503), True),
    (ModelError("upstream", status_code=500), True),
    (ModelError("socket hang up"), True),
    (ModelError("read ECONNRESET"), True),
    (ModelError("fetch failed"), True),
    (ModelError("the request timed out"), True),
    (ModelError("no answer", kind="timeout"), True),
    (ModelError("bad key", status_code=401), False),
    (ModelError("forbidden", status_code=403), False),
    (ModelError("bad request", status_code=400), False),
    (ModelError("invalid API key"), False),
    (ModelError("schema validation failed"), False),
    (ModelError("validation", kind="response_validation", status_code=500), False),
])
def test_only_failures_of_the_transport_or_the_providers_capacity_are_retried(error: ModelError,
                                                                              transient: bool) -> None:
    assert is_transient(error) == transient


def test_retries_back_off_exponentially_with_jitter_and_honour_retry_after() -> None:
    policy = RetryPolicy()
    assert [policy.delay(n, None, rand=lambda: 0.5) for n in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert policy.delay(20, None, rand=lambda: 0.5) == policy.max_s  # capped
    low, high = policy.delay(2, None, rand=lambda: 0.0), policy.delay(2, None, rand=lambda: 1.0)
    assert (low, high) == pytest.approx((4 * 0.8, 4 * 1.2))  # ±20 %
    assert policy.delay(0, 7.0) == 7.0


@pytest.mark.parametrize(("reason", "incomplete"), [("content_filter", True), ("other", True), ("unknown", True),
                                                    ("stop", False), ("length", False), (None, False)])
def test_an_answer_the_model_did_not_finish_is_a_failed_attempt(reason: str | None, incomplete: bool) -> None:
    response = ChatResponse(text="<observations>\n* 🔴 x\n</observations>", model="m", finish_reason=reason)
    assert (incomplete_reason(response) is not None) == incomplete


# -- 2l.2 what a failure does, path by path -------------------------------------------------------------------------

def failing(role: str, message_text: str = "HTTP 503 from the provider") -> Callable[[ChatRequest], str]:
    def answer(request: ChatRequest) -> str:
        if request.role == role:
            raise ModelError(message_text, kind="server_error", status_code=503)
        return observe_all(request)
    return answer


async def run(options: dict[str, Any], answer: Callable[[ChatRequest], str], count: int, *,
              reflect: bool = False) -> tuple[Memory, list[OMEvent], Any]:
    seen: list[OMEvent] = []
    om = Memory({"model": "openai/gpt-5-mini", **options}, model=FunctionModel(answer), clock=ManualClock(START_MS),
                on_event=lambda e, _i: seen.append(e))
    async with om:
        context = None
        for i in range(1, count + 1):
            context = await om.add_message(message(i, "word " * 20, "user" if i % 2 else "assistant"))
            await om.settle()
        if reflect:
            await om.reflect("t1")
            await om.settle()
    return om, seen, context


async def test_a_failed_blocking_observation_never_blanks_the_turn() -> None:
    _om, seen, context = await run({"observation": {"messageTokens": 40, "bufferTokens": False}},
                                  failing("observer"), 2)
    failed = [e for e in seen if e.event_type == "data-om-observation-failed"]
    assert failed and "503" in failed[0].error  # type: ignore[attr-defined]
    assert context is not None and context.through_message_id == "m2"  # the agent gets its context
    ended = [e for e in seen if e.event_type == "data-om-observation-end"]
    assert ended and ended[0].fallback_model == "offline"  # type: ignore[attr-defined]


def test_a_failed_manual_observation_is_tried_again_later() -> None:
    from om_stream.core.inputs import ObserveNow
    attempts: list[str] = []

    def first_fails(request: Any) -> Outcome:
        attempts.append(request.cycle_id)
        return Outcome(ok=len(attempts) > 1, error="HTTP 503")

    sim = Sim(sync_only(1_000), outcome=first_fails)
    sim.say("t1", "user", TEN)
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    sim.settle()
    assert events(sim, "data-om-observation-failed")[0].next_action == "retry later"
    assert len(attempts) == 2 and sim.state().unobserved == []


def test_a_failed_background_observation_raises_nothing_and_its_messages_wait() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(ok=False, error="HTTP 503"))
    sim.say("t1", "user", " ".join(["w"] * 25))
    sim.settle(2_000)
    assert events(sim, "data-om-buffering-failed")
    assert [m.id for m in sim.state().unobserved] == ["m1"]


async def test_a_failed_reflection_keeps_the_log_and_the_conversation_going() -> None:
    _om, seen, context = await run({"observation": {"messageTokens": 30, "bufferTokens": False},
                                   "reflection": {"observationTokens": 40}}, failing("reflector"), 6)
    failed = [e for e in seen if e.event_type == "data-om-observation-failed" and e.operation_type == "reflection"]  # type: ignore[attr-defined]
    assert failed and context is not None and context.observations
    assert context.through_message_id == "m6"


async def test_a_failed_manual_reflection_reports_it_and_raises_nothing() -> None:
    om, seen, _ = await run({"observation": {"messageTokens": 30, "bufferTokens": False}}, failing("reflector"), 2,
                            reflect=True)
    state = om.state("t1")
    assert state is not None and state.generation == 0 and state.log
    assert [e for e in seen if e.event_type == "data-om-observation-failed" and e.operation_type == "reflection"]  # type: ignore[attr-defined]


async def test_a_failure_is_reported_as_a_short_diagnostic() -> None:
    _, seen, _ = await run({"observation": {"messageTokens": 40, "bufferTokens": False}},
                           failing("observer", "HTTP 500: " + "a very long provider body " * 500), 2)
    failed = [e for e in seen if e.event_type == "data-om-observation-failed"]
    assert failed and len(failed[0].error) <= 2_000 and "HTTP 500" in failed[0].error[:40]  # type: ignore[attr-defined]


# -- 2l.3 degenerate answers ----------------------------------------------------------------------------------------

def _log(lines: int) -> str:
    return "\n".join(f"* 🟡 (09:{i % 60:02d}) User described step {i} of the migration plan in detail"
                     for i in range(lines))


def test_a_long_ordinary_log_is_not_degenerate() -> None:
    assert len(_log(80)) > 2_000 and not is_degenerate(_log(80))


def test_a_short_answer_is_never_degenerate() -> None:
    assert not is_degenerate("* 🔴 same line\n" * 100)  # under 2 000 characters


def test_repeated_lines_make_an_answer_degenerate() -> None:
    assert is_degenerate("* 🔴 (09:00) User said the same long thing again\n" * 60)


def test_repeating_windows_make_an_answer_degenerate() -> None:
    assert is_degenerate("the model is looping on this sentence without a line break " * 100)


def test_a_single_enormous_line_makes_an_answer_degenerate() -> None:
    assert is_degenerate(" ".join(str(i) for i in range(12_000)))  # over 50 000 characters, no repeats


async def test_a_reflector_that_only_loops_is_never_committed() -> None:
    def looping_reflector(request: ChatRequest) -> str:
        if request.role == "reflector":
            return "<observations>\n" + "* 🔴 (09:00) the reflector repeats this line forever\n" * 200
        return observe_all(request)

    om, seen, _ = await run({"observation": {"messageTokens": 30, "bufferTokens": False}}, looping_reflector, 2,
                            reflect=True)
    state = om.state("t1")
    assert state is not None and state.generation == 0
    failed = [e for e in seen if e.event_type == "data-om-observation-failed" and e.operation_type == "reflection"]  # type: ignore[attr-defined]
    assert failed and "degenerate" in failed[0].error  # type: ignore[attr-defined]
    reflector_calls = [r for r in om.model.requests if r.role == "reflector"]  # type: ignore[attr-defined]
    assert len(reflector_calls) >= 2  # an unusable attempt climbs the ladder before giving up


# -- 2l.4 the parser's safeguards -----------------------------------------------------------------------------------

async def test_an_empty_observer_answer_is_not_a_success() -> None:
    _, seen, _ = await run({"observation": {"messageTokens": 40, "bufferTokens": False}},
                           lambda r: "" if r.role == "observer" else observe_all(r), 2)
    failed = [e for e in seen if e.event_type == "data-om-observation-failed"]
    assert failed and "no observations" in failed[0].error  # type: ignore[attr-defined]


def test_an_empty_reflection_over_a_log_is_never_committed() -> None:
    sim = Sim(sync_only(20, 40), outcome=lambda r: Outcome(text="")
              if type(r).__name__ == "RequestReflection" and not r.use_offline_model else Outcome())
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle()
    reasons = [e.error for e in events(sim, "data-om-observation-failed") if e.operation_type == "reflection"]
    assert reasons and "returned nothing" in reasons[0]
    assert all(sim.segments.get(s.id) for s in sim.state().log)  # whatever was committed has text
