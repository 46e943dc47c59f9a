"""§5 of the reference: where @mastra/memory 1.31.0 departs from its own documentation or loses data.

om-stream must not copy these. Each test checks that it does what the documentation says instead (items that are
design choices rather than behaviours have an entry in the README's "Where om-stream differs" list; the map of
items to tests is docs/reference-coverage.md).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from om_stream import FilePart, Memory, Message, TextPart
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.commands import PersistSegment, RequestObservation
from om_stream.core.config import RetrievalConfig
from om_stream.core.context import render_context
from om_stream.core.events import OMEvent
from om_stream.core.inputs import ObserveNow
from om_stream.core.prompts.ladder import Attempt, choose
from om_stream.core.recall.instructions import recall_instructions
from om_stream.eval.longmemeval.judge import read_verdict
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START, START_MS, context_spec, message, observe_all
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim

COUNT = TiktokenCounter().count


async def run(options: dict[str, Any], answer: Callable[[ChatRequest], str], messages: list[Message], *,
              rounds_of_observe: int = 1, reflect: bool = False,
              clock_ms: int = START_MS) -> tuple[Memory, FunctionModel, list[OMEvent]]:
    model = FunctionModel(answer)
    seen: list[OMEvent] = []
    om = Memory({"model": "openai/gpt-5-mini", **options}, model=model, clock=ManualClock(clock_ms),
                on_event=lambda e, _i: seen.append(e))
    async with om:
        for m in messages:
            await om.add_message(m)
            await om.settle()
        for _ in range(rounds_of_observe):
            await om.observe("t1", force=True)
            await om.settle()
        if reflect:
            await om.reflect("t1")
            await om.settle()
        om.last = await om.context("t1")  # type: ignore[attr-defined]
    return om, model, seen


# 1 ---------------------------------------------------------------------------------------------------------------

async def test_1_previous_observer_tokens_limits_the_log_the_observer_is_shown() -> None:
    batches = iter(range(100))

    def long_answer(request: ChatRequest) -> str:
        i = next(batches)
        return (f"<observations>\nDate: Mar 2, 2026\n* 🟡 (09:00) batch {i} "
                + " ".join(f"d{i}x{j}" for j in range(8)) + "\n</observations>")

    model = FunctionModel(long_answer)
    async with Memory({"model": "openai/gpt-5-mini", "observation": {"previousObserverTokens": 100}}, model=model,
                      clock=ManualClock(START_MS)) as om:
        for i in range(1, 5):
            await om.add_message(message(i, "more"))
            await om.observe("t1", force=True)
            await om.settle()
    task = model.calls("observer")[-1].messages[1].content
    shown = task.split("## Previous observations", 1)[1].split("These are already recorded", 1)[0]
    assert COUNT(shown) <= 120 and "batch 2" in shown and "batch 0" not in shown
    assert "observations truncated here" in shown


# 2 ---------------------------------------------------------------------------------------------------------------

async def test_2_every_attachment_is_forwarded_to_the_observer_by_default() -> None:
    csv = Message(message_id="m1", thread_id="t1", resource_id="r1", role="user", created_at=START,
                  parts=(TextPart(text="here is the export"),
                         FilePart(data="YSxiCjEsMg==", mime_type="text/csv", filename="export.csv")))
    _, model, _ = await run({}, observe_all, [csv])
    (call,) = model.calls("observer")
    assert [a.filename for a in call.messages[2].attachments] == ["export.csv"]
    assert "[File #1: export.csv]" in call.messages[2].content


# 3 ---------------------------------------------------------------------------------------------------------------

async def test_3_the_embedded_memory_honours_obscure_thread_ids_and_per_phase_idle_settings() -> None:
    def threads(request: ChatRequest) -> str:
        labels = re.findall(r'<thread id="([^"]+)">', request.messages[2].content)
        sections = "".join(f'<thread id="{label}">\n* 🔴 (09:00) x\n</thread>\n' for label in labels)
        return f"<observations>\n{sections}</observations>"

    for obscure, visible in ((None, False), (False, True)):
        options: dict[str, Any] = {"scope": "resource", "observation": {"messageTokens": 10_000}}
        if obscure is not None:
            options["obscureThreadIds"] = obscure
        _, model, _ = await run(options, threads, [message(1, "hi", thread="t1")])
        assert ('<thread id="t1">' in model.calls("observer")[0].messages[2].content) == visible
    memory = Memory({"reflection": {"activateAfterIdle": "5m"}, "observation": {"activateAfterIdle": "1m"}})
    assert (memory.config.observation_idle, memory.config.reflection_idle) == (60_000, 300_000)
    await memory.close()


# 4 ---------------------------------------------------------------------------------------------------------------

def test_4_the_reflector_keeps_its_smallest_usable_attempt_not_its_last() -> None:
    attempts = [Attempt(1, "a" * 10, 900), Attempt(2, "b" * 10, 400), Attempt(3, "c" * 10, 700),
                Attempt(4, "", 0, valid=False)]
    assert choose(attempts, target_tokens=300) == attempts[1]
    assert choose([Attempt(1, "", 0), Attempt(2, "x", 5, valid=False)], 300) is None  # nothing usable: fail


async def test_4_an_over_target_ladder_commits_what_its_smallest_attempt_said() -> None:
    sizes = {1: 18, 2: 6, 3: 14, 4: 10}

    def answer(request: ChatRequest) -> str:
        if request.role == "observer":
            return ("<observations>\nDate: Mar 2, 2026\n" + "\n".join(
                f"* 🟡 (09:{i:02d}) detail {i} " + " ".join(f"w{i}{j}" for j in range(30)) for i in range(10))
                + "\n</observations>")
        level = int(m.group(1)) if (m := re.search(r"level (\d) of 4", request.messages[-1].content)) else 1
        lines = "\n".join(f"* 🔴 (1{level}:{i:02d}) kept {level}-{i} " + " ".join(f"k{j}" for j in range(12))
                          for i in range(sizes[level]))  # the hour tells the attempts apart
        return f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>"

    _, model, seen = await run({"observation": {"messageTokens": 30, "bufferTokens": False},
                                "reflection": {"observationTokens": 60}}, answer,
                               [message(1, "hello"), message(2, "hi", "assistant")])
    assert len(model.calls("reflector")) == 4  # the whole ladder, none under target
    (end,) = [e for e in seen if e.event_type == "data-om-observation-end" and e.operation_type == "reflection"]  # type: ignore[attr-defined]
    assert "(12:" in end.observations and not re.search(r"\(1[134]:", end.observations)  # type: ignore[attr-defined]


# 5 ---------------------------------------------------------------------------------------------------------------

def test_5_the_observation_block_is_closed_after_the_instructions_and_the_log() -> None:
    spec_texts = {"s1": "* 🔴 User is Ada.", "s2": "* 🔴 User lives in Porto."}
    blocks = render_context(context_spec(tuple(spec_texts)), spec_texts, (), now_ms=START_MS).system_blocks
    assert blocks.index("<observations>") == 1 and blocks[-1] == "</observations>"


# 6 ---------------------------------------------------------------------------------------------------------------

def test_6_the_recall_instructions_describe_the_group_headings_the_agent_sees() -> None:
    instructions = recall_instructions(RetrievalConfig(), search_available=False)
    assert "_range:" in instructions and "<observation-group" not in instructions


# 7 ---------------------------------------------------------------------------------------------------------------

async def test_7_bracketed_text_and_image_placeholders_reach_the_agent() -> None:
    def answer(request: ChatRequest) -> str:
        return ("<observations>\nDate: Mar 2, 2026\n* 🔴 (09:00) User shared [Image #1: beach.jpg] of the villa "
                "[booked for May]\n  * -> 🟡 pool on the roof\n</observations>")

    om, _, _ = await run({}, answer, [message(1, "look")])
    shown = om.last.observations  # type: ignore[attr-defined]
    assert "[Image #1: beach.jpg]" in shown and "[booked for May]" in shown and "  * -> 🟡 pool" in shown


# 8 ---------------------------------------------------------------------------------------------------------------

async def test_8_relative_dates_follow_the_conversation_not_the_wall_clock() -> None:
    def answer(request: ChatRequest) -> str:
        return ("<observations>\nDate: Mar 2, 2026\n* 🔴 (09:00) User stated they fly to Lyon on Friday "
                "(meaning Mar 6, 2026).\n</observations>")

    a_year_later = int(datetime(2027, 3, 2, tzinfo=UTC).timestamp() * 1000)
    om, _, _ = await run({}, answer, [message(1, "flying friday")], clock_ms=a_year_later)
    shown = om.last.observations  # type: ignore[attr-defined]
    assert "(meaning Mar 6, 2026) - in 4 days" in shown and "Date: Mar 2, 2026 (today)" in shown


# 9 ---------------------------------------------------------------------------------------------------------------

def test_9_activating_chunks_without_hints_keeps_the_threads_hints() -> None:
    sim = Sim(buffered())
    sim.say("t1", "user", TEN)
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))  # a synchronous observation sets the task
    sim.settle()
    for _ in range(10):  # the simulator's buffered chunks carry no hints
        sim.say("t1", "user", TEN)
        sim.settle()
    assert events(sim, "data-om-activation")
    assert sim.last_context().current_task == "the current task"


# 10 --------------------------------------------------------------------------------------------------------------

def test_10_buffering_events_report_this_cycle_share_its_id_and_fail_once() -> None:
    outcomes = iter([Outcome(ok=False, text="* 🔴 partial"), Outcome()] * 20)
    sim = Sim(buffered(), outcome=lambda r: next(outcomes))
    for _ in range(9):
        sim.say("t1", "user", TEN)
        sim.settle()
    ends = events(sim, "data-om-buffering-end")
    failed = events(sim, "data-om-buffering-failed")
    assert ends and failed
    assert all(e.buffered_tokens == sim.accountant.count_text(e.observations) for e in ends)
    assert all(f.observations == "* 🔴 partial" for f in failed)
    starts = [e.cycle_id for e in events(sim, "data-om-buffering-start")]
    assert sorted(e.cycle_id for e in ends + failed) == sorted(starts)  # one ending per start, same id
    assert not events(sim, "data-om-observation-failed")  # no second failure event for a background cycle


# 11 --------------------------------------------------------------------------------------------------------------

def test_11_a_manual_observe_counts_pending_tokens_once() -> None:
    sim = Sim(sync_only(100))
    for _ in range(6):  # 60 tokens: twice that would pass the 100-token threshold
        sim.say("t1", "user", TEN)
    state = sim.state()
    assert sim.apply(state.key, state.resource_id, ObserveNow()) == []
    assert not [r for r in sim.requests if isinstance(r, RequestObservation)]


# 12 --------------------------------------------------------------------------------------------------------------

def test_12_observed_messages_are_not_kept_raw_beside_their_observations() -> None:
    for options in (buffered(blockAfter=1.2), sync_only(50)):
        sim = Sim(options, outcome=lambda r: Outcome(ok=r.kind != "buffer"))
        for i in range(13):
            sim.say("t1", "user" if i % 2 == 0 else "assistant", TEN)
            sim.settle(10)
        sim.settle()
        context = sim.last_context()
        turn = sim.state().threads["t1"].turn_message
        duplicated = [m for m in context.message_ids if sim.observed_count.get(m) and (turn is None or m != turn.id)]
        assert context.segment_ids and duplicated == [], options


# 13 --------------------------------------------------------------------------------------------------------------

def test_13_resource_scope_only_appends_to_the_log_so_its_prefix_stays_stable() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 40}, "reflection": {"observationTokens": 10_000}})
    for _ in range(4):
        for thread in ("a", "b"):
            sim.say(thread, "user", TEN)
            sim.say(thread, "assistant", TEN)
        sim.settle()
    writes = [c for c in sim.commands if isinstance(c, PersistSegment)]
    assert len(writes) >= 3 and len({w.segment_id for w in writes}) == len(writes)  # never rewritten in place
    specs = [p.spec.segment_ids for p in sim.contexts if p.spec.thread_id == "a"]
    assert all(later[:len(earlier)] == earlier for earlier, later in itertools.pairwise(specs))


# 14 --------------------------------------------------------------------------------------------------------------

async def test_14_the_observers_task_points_at_the_history_that_follows_it() -> None:
    _, model, _ = await run({}, observe_all, [message(1, "hello")])
    _, task, history = model.calls("observer")[0].messages
    assert "in the next message" in task.content and "history above" not in task.content
    assert history.content.startswith("## New message history to observe")


# 15 --------------------------------------------------------------------------------------------------------------

async def test_15_thresholds_count_model_tokens_and_attachments_call_no_provider() -> None:
    image = Message(message_id="m1", thread_id="t1", resource_id="r1", role="user", created_at=START,
                    model="openai/gpt-4o",
                    parts=(TextPart(text="what is this?"),
                           FilePart(url="https://files.example.com/scan.png", mime_type="image/png")))
    async with Memory({"model": "openai/gpt-5-mini"}, clock=ManualClock(START_MS)) as om:
        await om.add_message(image)  # the network guard refuses any call beyond loopback
        state = om.state("t1")
    assert state is not None and state.unobserved_tokens == om.accountant.message_tokens(image, "openai/gpt-4o")


# 16 --------------------------------------------------------------------------------------------------------------

def test_16_the_benchmark_judge_reads_its_verdict_from_the_first_word() -> None:
    assert read_verdict("Yes, the answer matches.") is True
    assert read_verdict("No. A correct answer would say yes to the offer.") is False
    assert read_verdict("The answer is close.") is None  # asked once more, then counted wrong


# 17 --------------------------------------------------------------------------------------------------------------

def test_17_chunks_outlive_a_reflection_and_land_on_the_current_generation() -> None:
    sim = Sim({"observation": {"messageTokens": 60, "bufferTokens": 0.2},
               "reflection": {"observationTokens": 40, "bufferActivation": 0.5}})
    carried = 0
    for _ in range(60):
        before = sim.states.get("t1")
        waiting = [c.id for c in before.buffered] if before else []
        generation = before.generation if before else 0
        sim.say("t1", "user", TEN)
        sim.settle()
        after = sim.state()
        if after.generation > generation:
            known = {s.id for s in after.log} | {c.id for c in after.buffered}
            assert set(waiting) <= known
            carried += len(waiting)
    assert carried


# 18 --------------------------------------------------------------------------------------------------------------

async def test_18_a_rate_limited_observer_does_not_blank_the_agents_turn() -> None:
    from om_stream.errors import ModelError

    def limited(request: ChatRequest) -> str:
        raise ModelError("HTTP 429: rate limited", kind="rate_limited", status_code=429)

    om, _, seen = await run({"observation": {"messageTokens": 40, "bufferTokens": False}}, limited,
                            [message(1, "word " * 30), message(2, "word " * 30, "assistant")],
                            rounds_of_observe=0)
    assert om.last.through_message_id == "m2" and om.last.observations  # type: ignore[attr-defined]
    assert [e for e in seen if e.event_type == "data-om-observation-failed"]


# 19 --------------------------------------------------------------------------------------------------------------

async def test_19_a_reflection_keeps_a_precise_pointer_to_every_range_it_condensed() -> None:
    model = FunctionModel(observe_all)
    async with Memory({"model": "openai/gpt-5-mini", "retrieval": True}, model=model,
                      clock=ManualClock(START_MS)) as om:
        for pair in ((1, 2), (3, 4), (5, 6)):
            for i in pair:
                await om.add_message(message(i, f"detail {i}", "user" if i % 2 else "assistant"))
            await om.observe("t1", force=True)
            await om.settle()
        await om.reflect("t1")
        await om.settle()
        context = await om.context("t1")
    assert context is not None and context.generation == 1
    ranges = re.findall(r"^## Group `[^`]+`\n_range: ([^_]+)_", "\n".join(context.system_blocks), re.MULTILINE)
    # the three runs follow each other: one pointer at exactly m1..m6; runs with a gap between them are kept
    # apart (tests/unit/test_recall_core.py), where the reference spans the first start to the last end
    assert ranges == ["m1:m6"]


# 20 --------------------------------------------------------------------------------------------------------------

async def test_20_extracted_values_ride_on_the_end_events_of_the_cycle_that_found_them() -> None:
    from om_stream.core.extractors import Extractor

    mood = Extractor(name="mood", instructions="x")
    _, _, seen = await run({"observation": {"extract": [mood]}},
                           lambda r: observe_all(r) + "\n<mood>calm</mood>", [message(1, "hello")])
    assert "data-om-extracted" not in {e.event_type for e in seen}
    (end,) = [e for e in seen if e.event_type == "data-om-observation-end"]
    assert end.extracted_values == {"mood": "calm"}  # type: ignore[attr-defined]
