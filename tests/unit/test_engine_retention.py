"""Retention in the state machine (``core.expiry``), driven through the host by ``tests.support.sim`` on the
in-memory store and a simulated clock: the fence, the override, the purge and its receipt, late writers, and the
guarantee as a property over many seeds: at any time, nothing older than the window is in a thread's context, and
everything younger that the record holds is; the stores lose what expired within a purge gap of its expiry.

Every message's text names its id, and the simulated Observer writes one entry per message (``dated``), so the tests
know which message every line of a context comes from."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

import pytest

from om_stream.core.commands import (
    EmitEvent,
    ExpireIndex,
    ExpireStored,
    IndexForRecall,
    PersistMessage,
    PersistRetention,
    PersistSegment,
    RejectInput,
)
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.engine import decide, new_record, record_config
from om_stream.core.events import ExpiredEvent
from om_stream.core.expiry import PURGE_TIMER
from om_stream.core.inputs import ClearRecord, ExpiryDue, MessageAppended, OverrideThresholds
from om_stream.core.messages import Message, TextPart
from om_stream.core.retention import DAY_MS, SegmentText
from om_stream.core.state import ChunkRef, MessageRef, RecordState, ThreadState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.core.views import context_spec, narrowed
from om_stream.wire.context import ContextRecord
from tests.support.engine_cases import events, sync_only
from tests.support.sim import Outcome, Sim

MINUTE = 60_000
HOUR = 60 * MINUTE
_MENTION = re.compile(r"\bm\d+\b")


def _message(sim: Sim, thread: str, msg_id: str, at: int, *, resource: str = "r1", role: str = "user") -> Message:
    return Message(message_id=msg_id, thread_id=thread, resource_id=resource, role=role,
                   created_at=datetime.fromtimestamp(at / 1000, UTC),  # type: ignore[arg-type]
                   parts=(TextPart(text=f"about {msg_id} and more words here"),))


def _render(sim: Sim, thread: str, config: ResolvedConfig) -> ContextRecord:
    state = sim.state(thread)
    spec = context_spec(state, thread, record_config(config, state), state.context_version, sim.now)
    return sim._loop.run_until_complete(sim.host.effects.context(spec, now_ms=sim.now))


def _mentioned(context: ContextRecord) -> set[str]:
    shown = "\n".join([*context.system_blocks, context.observations, *(m.text for m in context.messages)])
    return set(_MENTION.findall(shown)) | {m.message_id for m in context.messages}


def _created(sim: Sim, message_id: str) -> int:
    return sim.messages[message_id].created_at_ms


# -- the fence ---------------------------------------------------------------------------------------------------------


def test_a_message_already_past_the_window_is_refused_without_being_copied_or_recorded() -> None:
    sim = Sim(sync_only(1000), retention_days=3)
    old = _message(sim, "t1", "m-old", sim.now - 3 * DAY_MS - 1)
    commands = sim.apply("t1", "r1", MessageAppended(old))
    refusals = [c for c in commands if isinstance(c, RejectInput)]
    assert [(r.reason, r.keep_input) for r in refusals] == [("expired", False)]
    assert "about m-old" not in refusals[0].detail  # the refusal names the message, never its content
    assert not any(isinstance(c, PersistMessage) for c in commands)
    assert "t1" not in sim.states  # nothing recorded, no record made
    edge = _message(sim, "t1", "m-edge", sim.now - 3 * DAY_MS)  # exactly at the cutoff: still inside
    assert any(isinstance(c, PersistMessage) for c in sim.apply("t1", "r1", MessageAppended(edge)))


# -- the override ------------------------------------------------------------------------------------------------------


def test_a_record_may_shorten_the_window_never_lengthen_it_and_replace_removes_it() -> None:
    sim = Sim(sync_only(1000), retention_days=30)
    sim.say("t1", "user", "hello m1", msg_id="m1")
    state = sim.state()
    shorter = sim.apply(state.key, "r1", OverrideThresholds(retention_days=7, thread_id="t1"))
    assert [c.days for c in shorter if isinstance(c, PersistRetention)] == [7]
    assert record_config(sim.config, sim.state()).retention_ms == 7 * DAY_MS
    longer = sim.apply(state.key, "r1", OverrideThresholds(retention_days=31, thread_id="t1"))
    refused = [c for c in longer if isinstance(c, RejectInput)]
    assert refused and refused[0].reason == "invalid_override" and "at most 30 days" in refused[0].detail
    assert sim.state().override_retention_days == 7
    sim.apply(state.key, "r1", OverrideThresholds(message_tokens=500, thread_id="t1"))  # merges: the window stays
    assert sim.state().override_retention_days == 7
    removed = sim.apply(state.key, "r1", OverrideThresholds(thread_id="t1", replace=True))
    assert [c.days for c in removed if isinstance(c, PersistRetention)] == [None]
    assert record_config(sim.config, sim.state()).retention_ms == 30 * DAY_MS


def test_without_a_deployment_window_an_override_sets_one_and_a_clear_keeps_it() -> None:
    sim = Sim(sync_only(1000), dated=True)
    sim.say("t1", "user", "hello m1", msg_id="m1")
    key = sim.state().key
    sim.apply(key, "r1", OverrideThresholds(retention_days=2, thread_id="t1"))
    assert PURGE_TIMER in sim.state().timers
    sim.apply(key, "r1", ClearRecord("t1"))
    assert sim.state().override_retention_days == 2 and PURGE_TIMER in sim.state().timers
    sim.run_until(sim.now + 2 * DAY_MS + MINUTE)
    assert sim.state().unobserved == [] and _mentioned(_render(sim, "t1", sim.config)) == set()


# -- the purge ---------------------------------------------------------------------------------------------------------


def _day_conversation(sim: Sim, days: int, per_day: int = 4) -> list[str]:
    """``per_day`` exchanges a day, an hour apart, for ``days`` days; every message observed the same day."""
    ids = []
    for _ in range(days):
        for _ in range(per_day):
            for role in ("user", "assistant"):
                msg_id = f"m{len(sim.messages) + 1}"
                ids.append(msg_id)
                sim.say("t1", role, f"about {msg_id} and a few more words", msg_id=msg_id, advance_ms=30 * MINUTE)
        sim.settle(horizon_ms=20 * 3_600_000)
    return ids


def test_the_purge_cuts_entries_rewrites_segments_and_counts_what_went() -> None:
    sim = Sim(sync_only(60), retention_days=2, dated=True)
    _day_conversation(sim, 3)
    state = sim.state()
    assert PURGE_TIMER in state.timers
    due = state.timers[PURGE_TIMER]
    before_ids = {s.id for s in state.log}
    sim.commands.clear()
    sim.events.clear()
    sim.published.clear()
    sim.run_until(due)
    purges = [c for c in sim.commands if isinstance(c, ExpireStored)]
    assert len(purges) == 1
    purge = purges[0]
    assert purge.before == due - 2 * DAY_MS and set(purge.deletes) | {r.old_id for r in purge.rewrites} <= before_ids
    assert all(r.new_id not in before_ids and r.text for r in purge.rewrites)
    index = [c for c in sim.commands if isinstance(c, ExpireIndex)]
    assert index and index[0].before == purge.before
    assert set(index[0].source_ids) == set(purge.deletes) | {r.old_id for r in purge.rewrites}
    reindexed = [c for c in sim.commands if isinstance(c, IndexForRecall)]
    assert {c.segment_id for c in reindexed} == {r.new_id for r in purge.rewrites} and not any(
        c.messages for c in reindexed)
    receipts = [e for e in sim.events if isinstance(e.event, ExpiredEvent)]
    assert len(receipts) == 1 and receipts[0].expiry_of == purge.expiry_id
    receipt = next(e for e in sim.published if isinstance(e, ExpiredEvent))  # as published: the store's counts in
    assert receipt.expiry_id == purge.expiry_id and receipt.retention_days == 2
    assert receipt.removed.messages == 1 and receipt.removed.entries == 1 and receipt.removed.rewritten == 1
    assert receipt.next_purge_at is not None and receipt.cutoff < receipt.expired_at
    # the state and the store agree: what is left is all younger than the cutoff
    assert all(m.created_at >= purge.before for m in sim.state().unobserved)
    store = sim.host.effects.store
    texts = sim._loop.run_until_complete(store.get_segment_texts([s.id for s in sim.state().log]))
    for text in texts.values():
        assert all(_created(sim, m) >= purge.before for m in _MENTION.findall(text)), text


def test_derived_metadata_goes_when_the_oldest_message_it_was_written_from_passes_the_window() -> None:
    sim = Sim(sync_only(30), retention_days=1, dated=True)
    for index in range(4):
        sim.say("t1", "user" if index % 2 == 0 else "assistant", f"about m{index + 1} a b c d e f g",
                msg_id=f"m{index + 1}")
    sim.settle()
    thread = sim.state().threads["t1"]
    assert thread.current_task == "the current task" and thread.derived_from == _created(sim, "m1")
    sim.run_until(sim.now + DAY_MS + 2 * MINUTE)
    thread = sim.state().threads["t1"]
    assert thread.derived_from is None and thread.current_task is None and thread.title is None
    purge = next(c for c in reversed(sim.commands) if isinstance(c, ExpireStored) and c.threads)
    assert purge.threads == ("t1",)
    context = _render(sim, "t1", sim.config)
    assert context.hints.current_task is None and context.messages == [] and context.observations == ""
    assert not any(isinstance(c, EmitEvent) and isinstance(c.event, ExpiredEvent) and c.event.next_purge_at
                   for c in sim.commands[-3:])


def test_a_context_changes_only_when_something_in_it_expires() -> None:
    """Providers' prompt caches: the system blocks of a thread's context stay byte-identical while time passes and
    nothing in them expires; when the oldest entry does, the blocks before its segment stay identical."""
    sim = Sim(sync_only(60), retention_days=2, dated=True)
    _day_conversation(sim, 1)
    first = min(_created(sim, m) for m in sim.messages)  # its entry starts at that very minute
    window = 2 * DAY_MS
    sim.now = first + window  # the cutoff is the entry's start: still inside
    before = _render(sim, "t1", sim.config).system_blocks
    sim.now = first + window - 3_600_000
    assert _render(sim, "t1", sim.config).system_blocks == before
    sim.now = first + window + 1  # the entry is past the window now; no purge ran
    after = _render(sim, "t1", sim.config).system_blocks
    assert after != before and "m1" not in _MENTION.findall("\n".join(after))
    changed = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
    assert before[:changed] == after[:changed] and "m1" in before[changed]


def test_a_context_held_back_by_a_blocking_cycle_is_read_at_today_s_cutoff() -> None:
    sim = Sim(sync_only(60), retention_days=2, dated=True)
    _day_conversation(sim, 2)
    published = sim.last_context()
    later = narrowed(published, published.segment_boundaries[0] + 1)
    assert later.segment_ids == published.segment_ids[1:] and later.expire_before == published.segment_boundaries[0] + 1
    assert len(later.segment_dated_from) == len(later.segment_ids)
    assert narrowed(later, published.segment_boundaries[0]) is later  # an earlier cutoff changes nothing


# -- late writers ------------------------------------------------------------------------------------------------------


def test_an_observation_that_answers_after_its_messages_expired_brings_none_of_them_back() -> None:
    slow = EngineLimits(cycle_timeout_ms=10 * DAY_MS, blocking_timeout_ms=10 * DAY_MS)
    sim = Sim(sync_only(30), retention_days=1, dated=True, limits=slow,
              outcome=lambda request: Outcome(delay_ms=DAY_MS + 30 * MINUTE))
    for index in range(4):
        sim.say("t1", "user" if index % 2 == 0 else "assistant", f"about m{index + 1} a b c d e f g",
                msg_id=f"m{index + 1}", advance_ms=MINUTE)
    assert sim.state().in_flight("observation")
    sim.commands.clear()
    sim.settle(horizon_ms=2 * DAY_MS)
    written = [c for c in sim.commands if isinstance(c, PersistSegment)]
    assert written == [], "a late Observer answer landed after its messages expired"
    assert "overtaken" in " ".join(str(getattr(e.event, "error", "")) for e in sim.events[-20:])


def test_a_late_answer_keeps_only_the_entries_still_inside_the_window() -> None:
    slow = EngineLimits(cycle_timeout_ms=10 * DAY_MS, blocking_timeout_ms=10 * DAY_MS)
    sim = Sim(sync_only(40), retention_days=1, dated=True, limits=slow,
              outcome=lambda request: Outcome(delay_ms=3 * 3_600_000))
    sim.say("t1", "user", "about m1 a b c d e f g", msg_id="m1")
    sim.say("t1", "assistant", "about m2 a b c d e f g", msg_id="m2", advance_ms=22 * 3_600_000)
    sim.say("t1", "user", "about m3 a b c d e f g", msg_id="m3", advance_ms=MINUTE)
    sim.say("t1", "assistant", "about m4 a b c d e f g", msg_id="m4", advance_ms=MINUTE)
    cycle = sim.state().in_flight("observation")[0]
    assert set(cycle.message_ids) == {"m1", "m2", "m3", "m4"}
    sim.settle(horizon_ms=4 * 3_600_000)  # m1 passes the window while the call runs
    written = [c for c in sim.commands if isinstance(c, PersistSegment) and c.cycle_id == cycle.id]
    assert len(written) == 1 and "m1" not in _MENTION.findall(written[0].text)
    assert {"m2", "m3", "m4"} <= set(_MENTION.findall(written[0].text))


def test_a_reflection_over_entries_the_purge_changed_is_overtaken() -> None:
    slow = EngineLimits(cycle_timeout_ms=10 * DAY_MS, blocking_timeout_ms=10 * DAY_MS)
    reflections = {"delay": 3_600_000}

    def outcome(request: object) -> Outcome:
        from om_stream.core.commands import RequestReflection
        return Outcome(delay_ms=reflections["delay"] if isinstance(request, RequestReflection) else 1_000)

    sim = Sim(sync_only(30, 60), retention_days=1, dated=True, limits=slow, outcome=outcome)
    reflections["delay"] = 2 * DAY_MS
    for index in range(12):
        sim.say("t1", "user" if index % 2 == 0 else "assistant", f"about m{index + 1} a b c d e f g",
                msg_id=f"m{index + 1}", advance_ms=10 * MINUTE)
        sim.run_until(sim.now + 5_000)
    running = sim.state().in_flight("reflection")
    assert running, "no reflection started"
    sim.run_until(sim.now + DAY_MS + MINUTE)
    assert not any(c.id == running[0].id for c in sim.state().cycles)
    failed = [e for e in events(sim, "data-om-buffering-failed") + events(sim, "data-om-observation-failed")
              if e.cycle_id == running[0].id]
    assert failed and "retention window" in failed[0].error


# -- the guarantee, over many seeds ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(80))
def test_nothing_older_than_the_window_is_shown_everything_younger_is_and_the_store_follows(seed: int) -> None:
    rng = random.Random(seed)
    days = rng.choice([1, 2, 3])
    resource = rng.random() < 0.3  # several threads share one record and one log
    threads = ["t1", "t2"] if resource else ["t1"]
    options = rng.choice([sync_only(rng.choice([40, 80, 150]), rng.choice([60, 120, 400, 10_000])),
                          {"observation": {"messageTokens": 80, "bufferTokens": 0.25},
                           "reflection": {"observationTokens": rng.choice([60, 150, 10_000])}}])
    if resource:
        options = sync_only(rng.choice([40, 80]), rng.choice([60, 400]))
    sim = Sim(options, retention_days=days, dated=True, scope="resource" if resource else "thread")
    window = days * DAY_MS
    gap = sim.limits.purge_gap_ms
    plain = sim.config.with_retention(None)
    store = sim.host.effects.store
    for index in range(rng.randint(30, 90)):
        msg_id = f"m{index + 1}"
        sim.say(rng.choice(threads), "user" if index % 2 == 0 else "assistant",
                f"about {msg_id} and some more words here", msg_id=msg_id,
                advance_ms=rng.choice([1, 1, 2, 5, 5, 10, 30, 60, 600, 1440, 2880]) * MINUTE)
        if rng.random() < 0.3:
            sim.run_until(sim.now + rng.choice([1, 60, 1440, 4000]) * MINUTE)
        before = sim.now - window
        purged = before - gap  # what expired a purge gap ago or more is gone from the state and the stores
        for thread in threads:
            if thread not in sim.state(thread).threads:
                continue
            assert all(m.created_at >= purged for m in sim.state(thread).unobserved)
            shown = _render(sim, thread, sim.config)
            everything = _render(sim, thread, plain)  # the same state without a window
            expired = {m for m in _mentioned(shown) if _created(sim, m) < before}
            assert not expired, f"seed {seed}: {sorted(expired)} shown past the window"
            younger = {m for m in _mentioned(everything) if _created(sim, m) >= before}
            assert _mentioned(shown) == younger, f"seed {seed}: {sorted(younger - _mentioned(shown))} went too soon"
            assert [m.message_id for m in shown.messages] == [m.message_id for m in everything.messages
                                                              if m.created_at_ms >= before]
        stale = [m.message_id for tenants in store._messages.values() for m in tenants.values()
                 if m.created_at_ms < purged]
        assert not stale, f"seed {seed}: the store still holds {stale}"
        for segment in store.segments.values():
            old = [m for m in _MENTION.findall(segment.segment.text) if _created(sim, m) < purged]
            assert not old, f"seed {seed}: segment {segment.segment.segment_id} still holds {old}"


# -- a buffered chunk's hints -----------------------------------------------------------------------------------------


def _chunk_state(derived_from: int | None) -> RecordState:
    """A record with a buffered chunk over m2..m3 whose hints name m1 (the Observer read the thread's hints, written
    from m1, beside the chunk's messages), and the thread's own metadata dated ``derived_from``."""
    state = new_record("t1", "thread", "r1")
    state.msg_seq = 3
    state.unobserved = [MessageRef(f"m{n}", "t1", n, n * HOUR, 10, "user", True) for n in (2, 3)]
    state.unobserved_tokens = 20
    state.buffered = [ChunkRef(id="seg-c", cycle_id="buf-1", first_seq=2, last_seq=3, first_message_id="m2",
                               last_message_id="m3", message_count=2, message_tokens=20, tokens=12,
                               last_message_at=3 * HOUR, buffered_at=3 * HOUR, thread_ids=("t1",),
                               current_task="carry on with m1", suggested_response="answer m1",
                               thread_title="about m1", dated_from=2 * HOUR)]
    state.threads["t1"] = ThreadState("t1", title="about m1", current_task="m1", derived_from=derived_from,
                                      last_message_id="m3", last_message_at=3 * HOUR)
    return state


def _purged(state: RecordState, before: int) -> RecordState:
    config = OMConfig.parse({}).resolve().with_retention(1)
    texts = (SegmentText("seg-c", "Date: Jan 1, 1970\n* (02:00) m2\n* (03:00) m3", 3 * HOUR),)
    return decide(state, ExpiryDue(before, texts), before + DAY_MS, config, TokenAccountant(len)).state


def test_a_buffered_chunk_loses_its_hints_with_the_thread_s_metadata_or_with_a_message_it_covers() -> None:
    # the thread's metadata, written from m1, expires: the chunk's hints (written with it) go too
    chunk = _purged(_chunk_state(HOUR), HOUR + 1).buffered[0]
    assert (chunk.current_task, chunk.suggested_response, chunk.thread_title) == (None, None, None)
    assert chunk.id == "seg-c" and chunk.message_count == 2  # its text and messages were all inside the window
    # a message it covers expires: its hints go, what is left of it stays
    chunk = _purged(_chunk_state(None), 2 * HOUR + 1).buffered[0]
    assert (chunk.current_task, chunk.thread_title) == (None, None) and chunk.message_count == 1
    # nothing of it expired: the chunk is left as it was
    state = _chunk_state(None)
    assert _purged(state, HOUR).buffered == state.buffered
