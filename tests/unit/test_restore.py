"""The restore rule (``core/restore.py``): a record becomes the state another deployment held, unchanged, and says
so; and the state's form is checked before it is taken (driven through core.decide)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from om_stream.core.commands import PublishContext, RejectInput, RequestObservation
from om_stream.core.engine import decide, new_record
from om_stream.core.inputs import MessageAppended, RestoreRecord
from om_stream.core.messages import Message, TextPart
from om_stream.core.restore import checked_state
from om_stream.core.state import RecordState
from om_stream.errors import WireDecodeError
from om_stream.runtime.internal_codec import decode_internal, encode_internal
from tests.support.engine_cases import TEN, buffered
from tests.support.sim import Sim


def _held(threads: tuple[str, ...] = ("t1",), *, settle: bool = True,
          scope: str = "thread") -> tuple[Sim, RecordState]:
    options = buffered() if scope == "thread" else {"scope": "resource", "observation": {"messageTokens": 100},
                                                    "reflection": {"observationTokens": 10_000}}
    sim = Sim(options)
    for _ in range(12):
        for thread in threads:
            sim.say(thread, "user", TEN)
            if settle:
                sim.settle()
    return sim, sim.state(threads[0])


def test_a_restored_record_is_the_state_it_was_given_and_publishes_its_contexts_as_they_were() -> None:
    sim, held = _held()
    assert held.buffered and held.log, "the record holds buffered and active observations"
    fresh = new_record(held.key, "thread", held.resource_id)
    decision = decide(fresh, RestoreRecord(held), sim.now + 60_000, sim.config, sim.accountant)
    assert decision.state == held and decision.state is not held  # the same values, a copy the caller may change
    (context,) = decision.commands
    assert isinstance(context, PublishContext) and context.spec.version == held.context_version
    assert context.spec == sim.last_context("t1")  # what the agent was last given, under the same version


def test_calls_in_flight_are_asked_again_under_their_request_ids_and_change_nothing() -> None:
    sim, held = _held(settle=False)
    assert held.cycles, "a call is in flight"
    decision = decide(new_record(held.key, "thread", held.resource_id), RestoreRecord(held), sim.now, sim.config,
                      sim.accountant)
    asked = [c for c in decision.commands if isinstance(c, RequestObservation)]
    assert [r.request_id for r in asked] == [f"{c.id}#{c.attempt}" for c in held.cycles]
    assert decision.state == held  # ids, counters and timers go on from where they were


def test_a_blocking_call_keeps_the_contexts_owed() -> None:
    sim, held = _held(settle=False)
    blocked = held.clone()
    blocked.cycles = [replace(held.cycles[0], blocking=True)]
    decision = decide(new_record(blocked.key, "thread", blocked.resource_id), RestoreRecord(blocked), sim.now,
                      sim.config, sim.accountant)
    assert not [c for c in decision.commands if isinstance(c, PublishContext)]


def test_resource_scope_publishes_every_thread_of_the_record() -> None:
    sim, held = _held(("a", "b"), scope="resource")
    decision = decide(new_record(held.key, "resource", held.resource_id), RestoreRecord(held), sim.now, sim.config,
                      sim.accountant)
    published = [c.spec.thread_id for c in decision.commands if isinstance(c, PublishContext)]
    assert published == ["a", "b"]
    assert all(c.spec.version == held.context_version for c in decision.commands if isinstance(c, PublishContext))


def test_a_record_of_another_resource_refuses_the_restore() -> None:
    sim, held = _held()
    theirs = new_record(held.key, "thread", "someone-else")
    message = Message(message_id="x1", thread_id="t1", resource_id="someone-else", role="user",
                      created_at=datetime(2026, 1, 1, tzinfo=UTC), parts=(TextPart(text=TEN),))
    theirs = decide(theirs, MessageAppended(message), sim.now, sim.config, sim.accountant).state
    decision = decide(theirs, RestoreRecord(held), sim.now, sim.config, sim.accountant)
    assert decision.state == theirs
    (refusal,) = decision.commands
    assert isinstance(refusal, RejectInput) and refusal.reason == "resource_mismatch"


def test_a_state_of_another_record_is_refused() -> None:
    sim, held = _held()
    decision = decide(new_record("t-other", "thread", held.resource_id), RestoreRecord(held), sim.now, sim.config,
                      sim.accountant)
    (refusal,) = decision.commands
    assert isinstance(refusal, RejectInput) and refusal.reason == "invalid_restore"
    assert not decision.state.holds_conversation


def test_the_state_form_is_checked_field_by_field() -> None:
    _, held = _held()
    data = held.to_dict()
    assert checked_state(data) == held
    for broken, why in ((lambda d: d.pop("key"), "key"),
                        (lambda d: d.update(msg_seq="eleven"), "msg_seq"),
                        (lambda d: d.update(scope="galaxy"), "scope"),
                        (lambda d: d.update(unobserved=[["m1", "t1"]]), "not a record state"),
                        (lambda d: d["threads"]["t1"].update(open_tool_calls=[{"x": 1}]), "open_tool_calls")):
        copy = held.to_dict()
        broken(copy)
        with pytest.raises(ValueError, match=why):
            checked_state(copy)


def test_a_restore_travels_the_results_topic_as_the_table_holds_it() -> None:
    _, held = _held()
    record = RestoreRecord(held)
    assert decode_internal(encode_internal(record)) == record
    forged = encode_internal(record).replace(b'"msg_seq":', b'"msg_seq":"x","was":')
    with pytest.raises(WireDecodeError, match="internal restore record"):
        decode_internal(forged)
