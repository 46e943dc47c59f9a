"""§2k of the reference: what is stored, the store's operations, and who may write a record when.

om-stream keeps a record's control state in its state table (the Kafka changelog, a dict in ``Memory``) and the
texts in a content store (README, "Where om-stream differs"). One writer per record, ids derived from the record
and idempotent writes replace the reference's flags, locks and optimistic guards; the tests check the guarantees
those were meant to give, including the ones the reference's maintainers list as broken (§2k.4).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable

from om_stream import Memory, Message, TextPart
from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.commands import STORE, ActivateChunks, Command, CommitGeneration, RequestReflection
from om_stream.core.inputs import ClearRecord, ReflectNow
from om_stream.core.state import RecordState
from om_stream.runtime.effects import Effects
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START, START_MS, message, observe_all
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim, word_count


def reflect_now(sim: Sim) -> None:
    state = sim.state()
    sim.apply(state.key, state.resource_id, ReflectNow())


# -- 2k.1 what is kept ----------------------------------------------------------------------------------------------

async def test_a_reflection_keeps_the_generation_it_replaced_in_the_store() -> None:
    store = SqliteContentStore(":memory:")
    async with Memory({"model": "openai/gpt-5-mini"}, model=FunctionModel(observe_all), store=store,
                      clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "hello"))
        await om.observe("t1", force=True)
        await om.settle()
        before = om.state("t1")
        await om.reflect("t1")
        await om.settle()
        after = om.state("t1")
        assert before is not None and after is not None and after.generation == 1
        committed = await store.get_generation("t1", 1)
        old_texts = await store.get_segment_texts([s.id for s in before.log])
    await store.close()
    assert committed is not None
    assert committed.replaced_segment_ids == tuple(s.id for s in before.log)
    assert committed.segment_ids[0] == committed.reflection_id == after.log[0].id
    assert set(old_texts) == {s.id for s in before.log}, "the condensed generation stays readable"


def test_a_record_has_one_current_generation_whatever_the_interleaving() -> None:
    sim = Sim({"observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 40, "bufferActivation": 0.5}},
              outcome=lambda r: Outcome(delay_ms=random.Random(len(sim.requests)).randint(10, 8_000)))
    for i in range(40):
        sim.say("t1", "user", TEN)
        if i % 7 == 0:
            reflect_now(sim)
        sim.settle(500)
    sim.settle()
    commits = [c for c in sim.commands if isinstance(c, CommitGeneration)]
    assert [c.generation for c in commits] == list(range(1, len(commits) + 1))  # never two rows for one number


# -- 2k.2 the store's operations ------------------------------------------------------------------------------------

def _store_commands(sim: Sim) -> list[Command]:
    return [c for c in sim.commands if c.phase == STORE]


async def _snapshot(store: InMemoryContentStore) -> tuple[object, ...]:
    return (sorted((i, s.status, sorted(s.generations)) for i, s in store.segments.items()),
            await store.get_record_messages("t1", resource_id="r1", thread_ids=("t1",), through_seq=10_000),
            await store.get_thread_metadata("t1"))


def test_replaying_the_writes_of_a_conversation_changes_nothing() -> None:
    sim = Sim(buffered())
    for i in range(25):
        sim.say("t1", "user" if i % 2 == 0 else "assistant", TEN)
        sim.settle()
    reflect_now(sim)
    sim.settle()

    async def write(times: int) -> tuple[object, ...]:
        store = InMemoryContentStore()
        effects = Effects(store, sim.config, count_text=word_count)
        for _ in range(times):  # a crash after the writes and before the offsets: the same writes again
            await effects.write(_store_commands(sim))
        assert any(s.status == "active" for s in store.segments.values())
        return await _snapshot(store)

    assert asyncio.run(write(1)) == asyncio.run(write(2))


async def test_clearing_a_record_forgets_its_observations_and_keeps_its_messages() -> None:
    store = InMemoryContentStore()
    async with Memory({"model": "openai/gpt-5-mini"}, model=FunctionModel(observe_all), store=store,
                      clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "hello"))
        await om.observe("t1", force=True)
        await om.settle()
        assert store.segments
        await om.clear("t1")
        assert not store.segments
        kept = await store.get_record_messages("t1", resource_id="r1", thread_ids=("t1",), through_seq=10)
    assert [m.message.message_id for m in kept] == ["m1"]


# -- 2k.3 one writer per record -------------------------------------------------------------------------------------

async def test_concurrent_inputs_for_one_record_are_applied_one_at_a_time() -> None:
    async with Memory({"model": "openai/gpt-5-mini"}, clock=ManualClock(START_MS)) as om:
        said = [Message(message_id=f"m{i}", thread_id="t1", resource_id="r1", role="user", created_at=START,
                        parts=(TextPart(text=f"message {i}"),)) for i in range(30)]
        await asyncio.gather(*(om.add_message(m, wait=False) for m in said))
        state = om.state("t1")
    assert state is not None and state.msg_seq == 30
    assert sorted(m.seq for m in state.unobserved) == list(range(1, 31))


def test_a_reflection_overtaken_by_a_newer_generation_is_dropped_and_says_so() -> None:
    def slow_background(request: object) -> Outcome:
        slow = isinstance(request, RequestReflection) and request.kind == "buffer"
        return Outcome(delay_ms=60_000 if slow else 10)

    sim = Sim({"observation": {"messageTokens": 20, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 200, "bufferActivation": 0.1}}, outcome=slow_background)
    for _ in range(8):
        sim.say("t1", "user", TEN)
        sim.settle(100)
    (background,) = [r for r in sim.requests if isinstance(r, RequestReflection) and r.kind == "buffer"]
    reflect_now(sim)
    sim.settle(1_000)
    assert sim.state().generation == 1
    sim.settle()
    failed = [e for e in events(sim, "data-om-buffering-failed") if e.cycle_id == background.cycle_id]
    assert failed and "overtaken" in failed[0].error
    assert sim.state().generation == 1 and sim.state().buffered_reflection is None


def test_a_cycle_overtaken_by_clear_writes_nothing() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=60_000))
    sim.say("t1", "user", " ".join(["w"] * 25))
    (running,) = sim.state().cycles
    state = sim.state()
    sim.apply(state.key, state.resource_id, ClearRecord())
    cleared_at = len(sim.commands)
    sim.settle()
    later = sim.commands[cleared_at:]
    assert not [c for c in later if getattr(c, "cycle_id", None) == running.id and c.phase == STORE]
    assert all(c.cycle_id != running.id for c in sim.state().buffered)


def test_a_cycle_overtaken_by_clear_still_ends_with_a_failed_event() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=60_000))
    sim.say("t1", "user", " ".join(["w"] * 25))
    (running,) = sim.state().cycles
    state = sim.state()
    sim.apply(state.key, state.resource_id, ClearRecord())
    sim.settle()
    ended = [e for e in events(sim, "data-om-buffering-end") + events(sim, "data-om-buffering-failed")
             if e.cycle_id == running.id]
    assert len(ended) == 1 and ended[0].event_type == "data-om-buffering-failed"


# -- 2k.4 the reference's known loss paths, as invariants -----------------------------------------------------------

def _invariants(check_contexts: list[int]) -> Callable[[Sim, RecordState, RecordState, list[Command]], None]:
    def check(sim: Sim, before: RecordState, after: RecordState, commands: list[Command]) -> None:
        # H1: the cursor never moves backwards
        for thread_id, thread in before.threads.items():
            assert after.threads[thread_id].observed_through_seq >= thread.observed_through_seq
        # P4: activation and commits land only on the generation that is current when they are made, and a
        # chunk activated just before a reflection commits is carried into the new generation
        current, activated = before.generation, set()
        for command in commands:
            if isinstance(command, ActivateChunks):
                assert command.generation == current
                activated.update(command.chunk_ids)
            elif isinstance(command, CommitGeneration):
                assert command.generation == current + 1
                current = command.generation
                assert activated <= set(command.segment_ids) | set(command.replaced_segment_ids)
        assert current == after.generation
        # ordered, disjoint chunks of messages still unobserved (P1: nothing stranded on an old generation)
        seqs = [(c.first_seq, c.last_seq) for c in after.buffered]
        assert all(a[1] < b[0] for a, b in itertools.pairwise(seqs))
        unobserved = {m.seq for m in after.unobserved}
        assert all(first in unobserved for first, _ in seqs)
        # H2, H8, P5: no message is ever observed twice
        assert all(count == 1 for count in sim.observed_count.values()), sim.observed_count
        # no loss: every context accounts for every message up to its newest, raw or in its log (H4, H5, P6)
        segments = {s.id: s for s in after.log}
        for published in commands:
            spec = getattr(published, "spec", None)
            if spec is None or spec.through_message_id is None:
                continue
            covered = {int(m[1:]) for m in spec.message_ids}
            for segment_id in spec.segment_ids:
                segment = segments[segment_id]
                covered.update(range(int(segment.first_message_id[1:]), int(segment.last_message_id[1:]) + 1))
            missing = set(range(1, int(spec.through_message_id[1:]) + 1)) - covered
            assert not missing, f"context {spec.version} lost {sorted(missing)}"
            check_contexts.append(spec.version)
    return check


def test_under_any_interleaving_no_observation_is_lost_duplicated_or_stranded() -> None:
    for seed in range(4):
        rng = random.Random(seed)
        checked: list[int] = []
        sim = Sim({"observation": {"messageTokens": 60, "bufferTokens": 0.2},
                   "reflection": {"observationTokens": 50, "bufferActivation": 0.5}},
                  outcome=lambda r, rng=rng: Outcome(delay_ms=rng.choice([10, 500, 3_000, 20_000]),
                                                     ok=rng.random() > 0.1))
        sim.checks.append(_invariants(checked))
        for i in range(60):
            sim.say("t1", "user" if i % 2 == 0 else "assistant", TEN, advance_ms=rng.choice([10, 700, 5_000]))
            if rng.random() < 0.05:
                reflect_now(sim)
        sim.settle()
        assert len(checked) > 20, "contexts were published and checked"
        starts = [e.cycle_id for e in events(sim, "data-om-buffering-start") + events(sim, "data-om-observation-start")]
        finished = [e.cycle_id for kind in ("buffering-end", "buffering-failed", "observation-end",
                                            "observation-failed") for e in events(sim, f"data-om-{kind}")]
        assert sorted(set(finished)) == sorted(set(starts)), "every cycle that started ended"
        state = sim.state()
        logged = {mid for s in state.log for mid in (s.first_message_id, s.last_message_id)}
        assert not logged & {m.id for m in state.unobserved}
        assert state.generation >= 1, seed


def test_observations_activated_while_a_reflection_runs_are_kept_after_it() -> None:
    slow = {"sync": 10, "buffer": 10, "manual": 30_000}
    sim = Sim(buffered(), outcome=lambda r: Outcome(delay_ms=slow[r.kind]))
    for _ in range(10):
        sim.say("t1", "user", TEN)
        sim.settle()
    reflect_now(sim)
    covered = {s.id for s in sim.state().log}
    for _ in range(8):  # more chunks are activated while the Reflector works
        sim.say("t1", "user", TEN)
        sim.settle(2_000)
    appended = [s.id for s in sim.state().log if s.id not in covered]
    assert appended
    sim.settle()
    state = sim.state()
    assert state.generation == 1 and [s.id for s in state.log[1:]] == appended


def test_an_observe_with_nothing_pending_starts_no_cycle() -> None:
    sim = Sim(sync_only(30))
    for _ in range(3):
        sim.say("t1", "user", TEN)
    sim.settle()
    asked = len(sim.requests)
    state = sim.state()
    from om_stream.core.inputs import ObserveNow
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    sim.settle()
    assert len(sim.requests) == asked and state.log == sim.state().log
