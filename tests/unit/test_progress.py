"""A thread's progress and ``settled`` (``core/progress.py``), rule by rule, through the real host
(``tests.support.sim``: one token per word plus one per message)."""

from __future__ import annotations

from om_stream.core.commands import EmitEvent
from om_stream.core.events import ProgressEvent
from om_stream.core.inputs import ClearRecord, ModelResultArrived, ObserveNow, ReflectNow, ReportProgress
from om_stream.core.progress import place, progress_event, quiescent, settled
from om_stream.runtime.host_ports import Arrival
from tests.support.engine_cases import TEN, buffered, sync_only
from tests.support.progress_checks import ProgressChecks, ask
from tests.support.sim import Outcome, Sim


def progress_events(sim: Sim, thread: str = "t1") -> list[ProgressEvent]:
    return [e.event for e in sim.events if isinstance(e.event, ProgressEvent) and e.event.thread_id == thread
            and e.event.request_id is None]


def checked(sim: Sim) -> ProgressChecks:
    checks = ProgressChecks()
    sim.checks.append(checks)
    return checks


def test_a_message_under_the_threshold_is_settled_unobserved_and_publishes_no_progress() -> None:
    sim = Sim(sync_only(100))
    checks = checked(sim)
    sim.say("t1", "user", TEN)
    state = sim.state()
    assert settled(state, "t1", "m1") and settled(state, "t1")
    assert place(state, "t1", "m1").status == "unobserved"
    assert progress_events(sim) == []  # the context says a message arrived; nothing else changed
    answer = ask(sim, "t1", "m1")
    assert answer.through is not None
    assert (answer.through.status, answer.through.settled, answer.through.seq) == ("unobserved", True, 1)
    assert answer.settled_through is not None and answer.settled_through.message_id == "m1"
    assert answer.observed_through is None and not answer.pending
    assert checks.violations == []


def test_a_synchronous_observation_holds_settled_until_it_lands() -> None:
    sim = Sim(sync_only(50))
    checks = checked(sim)
    for _ in range(5):
        sim.say("t1", "user", TEN)  # the fifth reaches 50: the Observer runs
    state = sim.state()
    assert not settled(state, "t1", "m5") and not settled(state, "t1", "m1")
    assert place(state, "t1", "m5").status == "observing"
    running = progress_events(sim)[-1]
    assert running.pending and running.in_flight[0].kind == "sync" and running.in_flight[0].messages == 5
    assert running.settled_through is None  # nothing observed yet
    sim.settle()
    state = sim.state()
    assert settled(state, "t1", "m5") and place(state, "t1", "m5").status == "observed"
    landed = progress_events(sim)[-1]
    assert landed.observed_through is not None and landed.observed_through.seq == 5
    assert landed.observed_through.message_id == "m5" and not landed.pending and landed.in_flight == []
    assert checks.violations == []


def test_a_buffered_chunk_waiting_for_the_threshold_is_settled_but_not_observed() -> None:
    sim = Sim(buffered())  # messageTokens 100, bufferTokens 20
    checks = checked(sim)
    sim.say("t1", "user", TEN)
    sim.say("t1", "user", TEN)  # 20 tokens: a buffering starts
    assert place(sim.state(), "t1", "m2").status == "observing"
    assert not settled(sim.state(), "t1", "m1")
    sim.settle()
    state = sim.state()
    assert [place(state, "t1", m).status for m in ("m1", "m2")] == ["buffered", "buffered"]
    assert settled(state, "t1", "m2") and quiescent(state)  # only new messages would activate it
    event = progress_events(sim)[-1]
    assert [c.last_message_id for c in event.buffered] == ["m2"] and not event.pending
    assert checks.violations == []


def test_an_idle_activation_due_holds_settled_until_it_activates() -> None:
    sim = Sim({**buffered(), "activateAfterIdle": 60_000})
    checks = checked(sim)
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN)  # the turn ends: the idle timer is set
    sim.settle(5_000)  # the buffering lands; the idle activation is still to come
    state = sim.state()
    assert place(state, "t1", "m2").status == "buffered"
    assert not settled(state, "t1", "m2")
    assert progress_events(sim)[-1].waiting_for == ["idle-activation"]
    sim.settle()
    state = sim.state()
    assert place(state, "t1", "m2").status == "observed" and settled(state, "t1", "m2")
    assert progress_events(sim)[-1].waiting_for == []
    assert checks.violations == []


def test_a_failed_buffering_holds_settled_until_its_retry_has_run() -> None:
    attempts: list[str] = []

    def outcome(request: object) -> Outcome:
        attempts.append("call")
        return Outcome(ok=len(attempts) > 1)

    sim = Sim(buffered(), outcome=outcome)
    checks = checked(sim)
    sim.say("t1", "user", TEN)
    sim.say("t1", "user", TEN)
    sim.settle(1_500)  # the first buffering failed: a retry is scheduled
    state = sim.state()
    assert "retry:buffer" in state.timers
    assert not settled(state, "t1", "m2") and progress_events(sim)[-1].waiting_for == ["buffering-retry"]
    sim.settle()
    assert settled(sim.state(), "t1", "m2")
    assert checks.violations == []


def test_a_reflection_in_flight_does_not_hold_settled() -> None:
    sim = Sim(sync_only(20, observation_tokens=10_000), outcome=lambda r: Outcome(delay_ms=600_000))
    checks = checked(sim)
    sim.say("t1", "user", TEN)
    sim.say("t1", "user", TEN)
    sim.settle(700_000)
    state = sim.state()
    sim.apply(state.key, state.resource_id, ReflectNow())
    state = sim.state()
    assert state.in_flight("reflection") and settled(state, "t1", "m2")
    event = progress_events(sim)[-1]
    assert event.in_flight[0].operation_type == "reflection" and not event.pending
    assert checks.violations == []


def test_unknown_messages_are_not_settled_and_a_thread_without_messages_has_nothing_to_wait_for() -> None:
    sim = Sim(sync_only(100))
    sim.say("t1", "user", TEN)
    state = sim.state()
    assert not settled(state, "t1", "m-never-sent")
    assert place(state, "t1", "m-never-sent").status == "unknown"
    answer = ask(sim, "t1", "m-never-sent")
    assert answer.through is not None and answer.through.status == "unknown" and not answer.through.settled
    empty = ask(sim, "nobody", None)  # no record is made for it
    assert empty.through is not None and empty.through.settled and empty.through.message_id is None
    assert empty.latest_message is None


def test_a_message_observed_long_ago_is_placed_through_the_store() -> None:
    sim = Sim(sync_only(30))
    for _ in range(90):  # many more than the record's recent ids (64)
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    named = {i for s in state.log for i in (s.first_message_id, s.last_message_id)} | set(state.recent_ids)
    old = next(f"m{n}" for n in range(1, 90) if f"m{n}" not in named)  # one the record no longer names
    seq = int(old[1:])
    assert place(state, "t1", old).status == "unknown"
    assert place(state, "t1", old, stored_seq=seq).status == "observed"
    assert place(state, "t1", old, stored_seq=state.msg_seq + 1).status == "unknown"  # not taken in yet
    answer = ask(sim, "t1", old)  # the host reads its seq from the content store
    assert answer.through is not None
    assert (answer.through.status, answer.through.seq, answer.through.settled) == ("observed", seq, True)


def test_resource_scope_keeps_each_threads_progress_apart() -> None:
    sim = Sim(sync_only(40), scope="resource")
    checks = checked(sim)
    sim.say("a", "user", TEN)
    sim.say("b", "user", TEN)
    sim.say("a", "user", TEN)
    sim.say("b", "user", TEN)  # 40: the Observer runs over both threads
    state = sim.state("a")
    assert place(state, "a", "m2").status == "unknown"  # b's message, asked about as a's
    assert place(state, "b", "m2").status == "observing"
    sim.settle()
    state = sim.state("a")
    event = progress_event(state, "b")
    assert event.observed_through is not None and event.observed_through.seq == 4
    assert event.observed_through.message_id is None  # the segment covers both threads: it names only its last
    assert settled(state, "a", "m3") and settled(state, "b", "m4")
    assert checks.violations == []


def test_a_clear_brings_the_cursor_back_and_says_so() -> None:
    sim = Sim(sync_only(30))
    checks = checked(sim)
    for _ in range(3):
        sim.say("t1", "user", TEN)
    sim.settle()
    assert place(sim.state(), "t1", "m3").status == "observed"
    state = sim.state()
    checks.new_input()
    sim.apply(state.key, state.resource_id, ClearRecord("t1"))
    state = sim.state()
    assert state.unobserved and place(state, "t1", "m3").status in ("observing", "unobserved")
    assert progress_events(sim)[-1].observed_through is None
    sim.settle()
    assert place(sim.state(), "t1", "m3").status == "observed"
    assert checks.violations == []


def test_a_manual_observe_waiting_for_the_call_in_flight_holds_settled() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=10_000))
    checks = checked(sim)
    sim.say("t1", "user", TEN)
    sim.say("t1", "user", TEN)  # a buffering runs
    sim.say("t1", "user", TEN)
    state = sim.state()
    checks.new_input()
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    assert sim.state().manual_observe_pending and not settled(sim.state(), "t1", "m3")
    sim.settle()
    assert place(sim.state(), "t1", "m3").status == "observed"
    assert checks.violations == []


def test_progress_event_ids_are_deterministic_and_never_repeat() -> None:
    def run() -> list[str]:
        sim = Sim(buffered(), outcome=lambda r: Outcome(ok=r.attempt > 1 or len(r.message_ids) % 2 == 0))
        for _ in range(12):
            sim.say("t1", "user", TEN)
            sim.settle(3_000)
        sim.settle()
        return [e.event_id for e in sim.events if isinstance(e, EmitEvent) and isinstance(e.event, ProgressEvent)]

    first, second = run(), run()
    assert first == second and len(first) == len(set(first)) > 5


def test_a_batch_publishes_a_threads_progress_once_its_newest_and_every_answer() -> None:
    sim = Sim(sync_only(30))
    for _ in range(3):
        sim.say("t1", "user", TEN)  # the Observer runs
    request = sim.requests[-1]
    state = sim.state()
    result = ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
                                observations="* 🔴 observed")
    sim._queue.clear()  # the test delivers the result itself, inside one batch
    published = len(sim.events)
    batch = [Arrival(state.key, "r1", ReportProgress("t1", "q1", "m3"), None),
             Arrival(state.key, "r1", result, None),  # the observation lands: a change
             Arrival(state.key, "r1", ReportProgress("t1", "q2", "m3"), None),
             Arrival(state.key, "r1", ObserveNow(force=True), None)]  # m4 goes to the Observer: another change
    sim.say("t1", "user", TEN, advance_ms=0)  # m4 arrives while the Observer runs; then the batch
    sim._loop.run_until_complete(sim.host.apply(batch))
    out = [e.event for e in sim.events[published:] if isinstance(e.event, ProgressEvent)]
    answers = [e for e in out if e.request_id is not None]
    changes = [e for e in out if e.request_id is None]
    assert [(a.request_id, a.through.status if a.through else None) for a in answers] == [
        ("q1", "observing"), ("q2", "observed")]
    # two changes, one published: the newest (the landing of m1-m3, and m4 being observed)
    assert len(changes) == 1 and changes[0].observed_through is not None and changes[0].observed_through.seq == 3
    assert [c.last_message_id for c in changes[0].in_flight] == ["m4"]
    assert out.index(changes[0]) > out.index(answers[-1])  # changes go with the statuses, after the batch's events
