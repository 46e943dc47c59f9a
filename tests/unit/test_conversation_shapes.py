"""The conversation shapes are what they claim to be: deterministic per seed, replayable, each with its own
character (short turns, long tool results, pasted documents, days between sessions), and their planted facts are
findable only where the user said them (so a context holding a fact's needles really kept that fact)."""

from __future__ import annotations

import itertools
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from om_stream.core.messages import ToolCallPart, ToolResultPart
from om_stream.replay.conversation import ReplayLine, load_turns
from om_stream.replay.facts import PlantedFact, mentions
from om_stream.replay.shapes import SHAPES, Conversation, generate, write_jsonl

SCRIPTED = [name for name in SHAPES if name != "project"]


def words(line: ReplayLine) -> int:
    return len(line.text.split())


def tool_turns(conversation: Conversation) -> set[int]:
    return {line.turn for line in conversation.lines if line.role == "tool"}


def user_lines(conversation: Conversation) -> list[ReplayLine]:
    return [line for line in conversation.lines if line.role == "user"]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_seed_gives_the_same_conversation_and_another_seed_another(shape: str) -> None:
    first, again, other = generate(shape, 40, seed=7), generate(shape, 40, seed=7), generate(shape, 40, seed=8)
    assert first.lines == again.lines and first.facts == again.facts
    assert [line.text for line in first.lines] != [line.text for line in other.lines]
    assert len(first.turns()) == 40
    moments = [line.created_at for line in first.lines]
    assert moments == sorted(moments)  # time only moves forward


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_written_conversation_replays_as_generated(shape: str, tmp_path: Path) -> None:
    conversation = generate(shape, 30, seed=3)
    path = tmp_path / f"{shape}.jsonl"
    assert write_jsonl(path, conversation) == len(conversation.lines)
    assert load_turns(path) == conversation.turns()


@pytest.mark.parametrize("shape", SCRIPTED)
@pytest.mark.parametrize("seed", [1, 2])
def test_facts_are_planted_across_the_conversation_with_some_the_user_asks_to_keep(shape: str, seed: int) -> None:
    conversation = generate(shape, 240, seed=seed)
    facts = conversation.facts
    assert len(facts) >= 12
    assert len(conversation.kept_facts()) >= 3
    turns = sorted(f.turn for f in facts)
    assert turns[0] <= 80 and turns[-1] >= 160  # early facts must survive reflections, late ones observation
    kinds = {f.kind for f in facts}
    assert {"remember", "number", "version", "date", "preference"} <= kinds | {"update"}, kinds
    for fact in facts:
        said = [line for line in user_lines(conversation) if line.turn == fact.turn]
        assert len(said) == 1 and fact.statement in said[0].text


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("seed", [1, 5])
def test_a_facts_needles_appear_only_where_the_user_said_it(shape: str, seed: int) -> None:
    conversation = generate(shape, 150, seed=seed)
    lowered = [(line.turn, line.text, line.text.lower()) for line in conversation.lines]

    def said_at(needle: str) -> set[int]:
        return {f.turn for f in conversation.facts if needle in f.needles} | {
            f.superseded_at for f in conversation.facts if needle in f.needles and f.superseded_at is not None}

    for fact in conversation.facts:
        for needle in fact.needles:
            first = needle.split()[0].lower()  # a cheap look first: the lines that could hold it at all
            found = {turn for turn, text, low in lowered if first in low and mentions(text, needle)}
            assert found <= said_at(needle), (needle, found, said_at(needle))
            assert fact.turn in found


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_multi_day_has_days_between_sessions_and_facts_that_change(seed: int) -> None:
    conversation = generate("multi-day", 200, seed=seed)
    moments = [line.created_at for line in conversation.lines]
    assert moments[-1] - moments[0] >= timedelta(days=10)
    starts: dict[int, datetime] = {}
    for line in conversation.lines:
        starts.setdefault(line.turn, line.created_at)
    ordered = [starts[t] for t in sorted(starts)]
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    assert sum(1 for gap in gaps if gap >= timedelta(hours=6)) >= 10
    assert len({m.date() for m in moments}) >= 8
    superseded = [f for f in conversation.facts if not f.current]
    assert superseded, "no knowledge update"
    for old in superseded:
        update = next(f for f in conversation.facts if f.turn == old.superseded_at)
        assert update.kind == "update" and update.asked_to_keep and update.current
        assert old.superseded_at is not None and old.superseded_at - old.turn >= 200 // 4
        assert update.needles != old.needles
    assert set(conversation.current_facts()) == {f for f in conversation.facts if f not in superseded}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chatty_turns_are_short_and_quick(seed: int) -> None:
    conversation = generate("chatty", 200, seed=seed)
    assert statistics.median(words(line) for line in user_lines(conversation)) <= 12
    assert max(words(line) for line in conversation.lines) <= 80
    assert conversation.lines[-1].created_at - conversation.lines[0].created_at <= timedelta(hours=8)
    assert not tool_turns(conversation)


@pytest.mark.parametrize("seed", [1, 2])
def test_tool_heavy_turns_call_tools_with_long_results(seed: int) -> None:
    conversation = generate("tool-heavy", 120, seed=seed)
    assert 0.3 <= len(tool_turns(conversation)) / 120 <= 0.6
    results = [line for line in conversation.lines if line.role == "tool"]
    assert statistics.median(len(r.text) for r in results) >= 2_000
    assert any(sum(1 for r in results if r.turn == turn) >= 3 for turn in tool_turns(conversation))
    # each tool line is a call and its result, paired by id, as an agent publishes them
    messages = [m for turn in conversation.turns() for m in turn.messages]
    calls = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    answered = {p.tool_call_id for m in messages for p in m.parts if isinstance(p, ToolResultPart)}
    assert calls == answered and len(calls) == len(results)


@pytest.mark.parametrize("seed", [1, 2])
def test_documents_are_pasted_now_and_then(seed: int) -> None:
    conversation = generate("documents", 200, seed=seed)
    pasted = [line for line in user_lines(conversation) if words(line) >= 400]
    assert 8 <= len(pasted) <= 50
    assert max(words(line) for line in pasted) >= 2_500


@pytest.mark.parametrize("seed", [1, 2])
def test_mixed_has_varied_turns_and_a_few_tool_turns(seed: int) -> None:
    conversation = generate("mixed", 300, seed=seed)
    assert 0.06 <= len(tool_turns(conversation)) / 300 <= 0.2
    sizes = [words(line) for line in user_lines(conversation)]
    assert min(sizes) <= 20 and max(sizes) >= 150


@pytest.mark.parametrize("shape", ["tool-heavy", "documents"])
def test_scale_shrinks_the_long_contents(shape: str) -> None:
    full, small = generate(shape, 120, seed=4), generate(shape, 120, seed=4, scale=0.2)
    assert len(full.turns()) == len(small.turns())
    assert [f.statement for f in full.facts] == [f.statement for f in small.facts]
    longest = max(len(line.text) for line in full.lines)
    assert max(len(line.text) for line in small.lines) <= longest * 0.4


def test_project_shape_is_the_projects_generator_with_its_facts() -> None:
    conversation = generate("project", 30, seed=42)
    assert conversation.lines[0].text.startswith("My name is Ada Lovelace")
    assert [f.turn for f in conversation.facts] == [1, 4, 7, 10, 13]
    for fact in conversation.facts:
        assert fact.found_in(next(line.text for line in conversation.lines if line.turn == fact.turn))


def test_unknown_shapes_and_empty_conversations_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown conversation shape"):
        generate("gossip", 10)
    with pytest.raises(ValueError, match="at least one turn"):
        generate("chatty", 0)


def test_a_needle_is_found_as_a_whole_token_only() -> None:
    assert mentions("We already run Cassandra 4.1 in production.", "4.1")
    assert mentions("cassandra 4.1", "Cassandra")
    assert not mentions("p95 was 14.12 ms", "4.1")
    assert not mentions("upgraded to 4.1.2", "4.1")
    assert not mentions("version 4.10", "4.1")
    assert mentions("capped at 18,500 euros", "18,500")
    assert not mentions("capped at 118,500 euros", "18,500")
    assert mentions("lands on May\n 14, picking", "May 14")
    assert not mentions("lands on May 140", "May 14")
    assert not mentions("code 47319", "4731")


def test_a_fact_is_retained_when_every_needle_is_there() -> None:
    fact = PlantedFact(turn=3, kind="remember", statement="Remember: on-call changes every Monday at 09:05 Berlin",
                       needles=("Monday", "09:05", "Berlin"))
    assert fact.found_in("* 🔴 (10:00) User asked to remember: on-call rotation Monday 09:05 Berlin time")
    assert not fact.found_in("* 🔴 (10:00) User mentioned the on-call rotation changes on Monday in Berlin")
    assert fact.asked_to_keep and fact.current


def test_om_stream_synth_writes_any_shape_for_om_stream_replay(tmp_path: Path) -> None:
    from om_stream.cli import main

    path = tmp_path / "documents.jsonl"
    assert main(["synth", str(path), "--shape", "documents", "--turns", "12", "--seed", "9"]) == 0
    assert load_turns(path) == generate("documents", 12, seed=9).turns()
