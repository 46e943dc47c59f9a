"""Seeded conversation shapes in the replay format, each with the facts it planted and which must be retained.

A benchmark tuned on one generator proves one generator, so the engine is measured and property-tested on several:

* ``chatty``: many short turns, seconds apart;
* ``tool-heavy``: nearly half the turns call tools (one to four calls) that return long results;
* ``documents``: the user now and then pastes a long document (notes, a design text, logs, a table, code);
* ``multi-day``: sessions hours to days apart, with knowledge updates (a fact stated, later changed);
* ``mixed``: turns of widely varied length, about 12 % with tool calls returning long results;
* ``project``: the project's first generator (``om_stream.replay.synthetic``), facts planted early.

Every shape plants facts in the user's words (``om_stream.replay.facts``): requests to remember, personal details,
numbers, versions, dates, preferences, and in ``multi-day`` updates that supersede earlier facts. A conversation is
deterministic for its (shape, turns, seed, scale); ``scale`` multiplies the long contents (tool results, documents,
long turns) so that tests with small thresholds keep each shape's proportions.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from om_stream.replay import prose
from om_stream.replay.conversation import ReplayLine, Turn, turns_from_lines
from om_stream.replay.facts import FACT_KINDS, FactDraw, FactKind, PlantedFact, Statement
from om_stream.replay.synthetic import PLANTED_FACTS
from om_stream.replay.synthetic import generate as project_lines

__all__ = ["SHAPES", "Conversation", "Shape", "generate", "write_jsonl"]

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Conversation:
    shape: str
    seed: int
    lines: tuple[ReplayLine, ...]
    facts: tuple[PlantedFact, ...]

    def turns(self) -> list[Turn]:
        return list(turns_from_lines(self.lines))

    def current_facts(self) -> tuple[PlantedFact, ...]:
        """What the user last said on each subject (superseded facts left out)."""
        return tuple(f for f in self.facts if f.current)

    def kept_facts(self) -> tuple[PlantedFact, ...]:
        """Current facts the user asked to remember or stated as a correction."""
        return tuple(f for f in self.current_facts() if f.asked_to_keep)


class _Plan:
    """Which turn says which fact: one in each equal stretch of the conversation, updates at least a quarter of
    it after the fact they replace."""

    def __init__(self, rng: random.Random, turns: int, *, updates: int) -> None:
        self.draw = FactDraw(rng)
        count = min(turns, max(3, min(14, turns // 12)))
        kinds: list[FactKind] = ["remember", "remember"]
        others = list(FACT_KINDS[1:])
        rng.shuffle(others)
        while len(kinds) < count:
            kinds.append(others[len(kinds) % len(others)] if len(kinds) % 4 else "remember")
        free = list(range(1, turns + 1))
        self._say: dict[int, tuple[Statement, FactKind, int | None]] = {}
        for _ in range(updates if turns >= 8 else 0):
            first = rng.choice([t for t in free if t <= max(1, turns * 6 // 10)])
            later = [t for t in free if t >= first + max(1, turns // 4)]
            if not later:
                break
            second = rng.choice(later)
            drawn = self.draw.update()
            if drawn is None:
                break
            kind, old, new = drawn
            self._say[first] = (old, kind, second)
            self._say[second] = (new, "update", None)
            free = [t for t in free if t not in (first, second)]
        for band, wanted in enumerate(kinds):  # one fact in each equal stretch of the conversation
            lo, hi = band * turns // len(kinds) + 1, (band + 1) * turns // len(kinds)
            choices = [t for t in free if lo <= t <= hi] or free
            if not choices:
                break
            turn = rng.choice(choices)
            free.remove(turn)
            kind, statement = self.draw.statement(wanted)
            self._say[turn] = (statement, kind, None)

    def at(self, turn: int) -> Statement | None:
        planned = self._say.get(turn)
        return planned[0] if planned else None

    def facts(self) -> tuple[PlantedFact, ...]:
        return tuple(PlantedFact(turn=turn, kind=kind, statement=statement.text, needles=statement.needles,
                                 superseded_at=superseded)
                     for turn, (statement, kind, superseded) in sorted(self._say.items()))


class _Script:
    """Writes one conversation's lines: turn numbers, a clock that only moves forward, tool-call ids."""

    def __init__(self, rng: random.Random, thread_id: str, resource_id: str, scale: float) -> None:
        self.rng = rng
        self.thread_id = thread_id
        self.resource_id = resource_id
        self.scale = scale
        self.moment = START + timedelta(days=rng.randint(0, 20), minutes=rng.randint(0, 300))
        self.turn = 0
        self.calls = 0
        self.lines: list[ReplayLine] = []

    def next_turn(self, after_s: float) -> int:
        self.turn += 1
        self.wait(after_s if self.turn > 1 else 0)
        return self.turn

    def wait(self, seconds: float) -> None:
        self.moment += timedelta(seconds=seconds)

    def size(self, tokens: int) -> int:
        """A long content's length at this conversation's scale."""
        return max(20, round(tokens * self.scale))

    def _line(self, role: str, text: str, **tool: Any) -> None:
        self.lines.append(ReplayLine(thread_id=self.thread_id, resource_id=self.resource_id, role=role,
                                     text=text, created_at=self.moment, turn=self.turn, **tool))

    def user(self, text: str) -> None:
        self._line("user", text)

    def assistant(self, text: str, after_s: float = 0) -> None:
        self.wait(after_s or self.rng.randint(2, 25))
        self._line("assistant", text)

    def tool(self, name: str, args: dict[str, Any], result: str) -> None:
        self.calls += 1
        self.wait(self.rng.randint(1, 6))
        self._line("tool", result, tool_name=name, tool_args=args, tool_call_id=f"call-{self.calls}")


def _said(rng: random.Random, statement: Statement | None, framings: tuple[str, ...]) -> str:
    return rng.choice(framings).format(fact=statement.text) if statement else ""


def _chatty(script: _Script, plan: _Plan, turns: int) -> None:
    rng = script.rng
    for turn in range(1, turns + 1):
        script.next_turn(rng.choice((4, 8, 15, 30, 60, 120)))
        fact = _said(rng, plan.at(turn), ("{fact}", "btw, {fact}", "oh and {fact}", "{fact} Anyway."))
        roll = rng.random()
        text = prose.short_reply(rng) if roll < 0.45 else (prose.question(rng) if roll < 0.7 else
                                                           prose.sentence(rng))
        script.user(f"{fact} {text}".strip() if fact else text)
        script.assistant(prose.paragraph(rng, rng.choice((8, 14, 25, 40))), after_s=rng.randint(2, 10))


_TOOLS = ("query_orders", "list_tickets", "fetch_metrics", "tail_logs", "web_search", "read_file")


def _tool_heavy(script: _Script, plan: _Plan, turns: int) -> None:
    rng = script.rng
    for turn in range(1, turns + 1):
        script.next_turn(rng.choice((20, 45, 90, 240, 600)))
        fact = _said(rng, plan.at(turn), ("{fact}", "Before we start: {fact}", "{fact} Now,"))
        ask = f"{prose.sentence(rng)} {prose.question(rng)}"
        script.user(f"{fact} {ask}".strip())
        if rng.random() < 0.45:
            for index in range(rng.choice((1, 1, 2, 2, 3, 4))):
                if index and rng.random() < 0.4:
                    script.assistant(prose.sentence(rng))
                name = rng.choice(_TOOLS)
                args = {"query": prose.sentence(rng).rstrip("."), "limit": rng.choice((20, 50, 100))}
                script.tool(name, args, prose.tool_result(rng, name, script.size(rng.choice((300, 700, 1500, 3000)))))
        script.assistant(prose.paragraph(rng, rng.choice((30, 60, 120, 200))))


def _documents(script: _Script, plan: _Plan, turns: int) -> None:
    rng = script.rng
    for turn in range(1, turns + 1):
        script.next_turn(rng.choice((30, 90, 300, 900)))
        statement = plan.at(turn)
        if rng.random() < 0.14:
            preamble = _said(rng, statement, ("{fact} Here is the text I mentioned.", "{fact}")) or \
                rng.choice(("Here is the document.", "I pasted the file below.", "Please read this first."))
            body = prose.document(rng, script.size(rng.choice((800, 1500, 3000, 6000))))
            script.user(f"{preamble}\n\n{body}\n\n{prose.question(rng)}")
            script.assistant(prose.paragraph(rng, rng.choice((120, 250, 400))))
            continue
        fact = _said(rng, statement, ("{fact}", "One more thing: {fact}"))
        text = prose.paragraph(rng, rng.choice((15, 30, 60, 120)))
        script.user(f"{fact} {text}".strip())
        script.assistant(prose.paragraph(rng, rng.choice((60, 120, 250))))


def _multi_day(script: _Script, plan: _Plan, turns: int) -> None:
    rng = script.rng
    session_left = 0
    for turn in range(1, turns + 1):
        if session_left == 0:
            session_left = rng.randint(3, 12)
            gap = rng.choice((3, 8, 20, 30, 50, 100, 220)) * 3600
        else:
            gap = rng.choice((30, 60, 180, 480))
        session_left -= 1
        script.next_turn(gap)
        fact = _said(rng, plan.at(turn), ("{fact}", "Quick update: {fact}", "{fact} Just so you know."))
        text = prose.paragraph(rng, rng.choice((12, 25, 50, 90)))
        if rng.random() < 0.15:
            text += rng.choice((" I'll get back to this tomorrow.", " Let's pick this up next week.",
                                " I need it done by the weekend."))
        script.user(f"{fact} {text}".strip())
        script.assistant(prose.paragraph(rng, rng.choice((40, 80, 160))))


def _mixed(script: _Script, plan: _Plan, turns: int) -> None:
    rng = script.rng
    for turn in range(1, turns + 1):
        script.next_turn(rng.choice((20, 45, 90, 180, 600, 3600)))
        fact = _said(rng, plan.at(turn), ("{fact}", "{fact} Also,"))
        length = rng.choice((12, 25, 40, 60, 120, 250))
        text = prose.paragraph(rng, length if length < 100 else script.size(length))
        if rng.random() < 0.3:
            text += f" {prose.question(rng)}"
        script.user(f"{fact} {text}".strip())
        if rng.random() < 0.12:
            for _ in range(rng.choice((1, 1, 2))):
                name = rng.choice(_TOOLS)
                script.tool(name, {"query": prose.sentence(rng).rstrip(".")},
                            prose.tool_result(rng, name, script.size(rng.choice((600, 1200, 2500)))))
        script.assistant(prose.paragraph(rng, rng.choice((30, 60, 100, 160, 240))))


# needles of the project generator's facts (its turns 1, 4, 7, 10, 13)
_PROJECT_FACTS: tuple[tuple[FactKind, tuple[str, ...]], ...] = (
    ("personal", ("Ada Lovelace", "Lisbon")), ("preference", ("peanuts",)), ("date", ("2026-03-14", "2026-03-10")),
    ("preference", ("bullet points",)), ("date", ("July 9",)))


def _project(turns: int, seed: int, scale: float) -> Conversation:
    lines = tuple(ReplayLine.model_validate(line)
                  for line in project_lines(turns, seed=seed, thread_id=f"project-{seed}", resource_id="shape-user"))
    facts = tuple(PlantedFact(turn=3 * index + 1, kind=kind, statement=text, needles=needles)
                  for index, (text, (kind, needles)) in enumerate(zip(PLANTED_FACTS, _PROJECT_FACTS, strict=True))
                  if 3 * index + 1 <= turns)
    return Conversation("project", seed, lines, facts)


@dataclass(frozen=True)
class Shape:
    name: str
    summary: str
    build: Callable[[int, int, float], Conversation]  # (turns, seed, scale)


def _scripted(name: str, write: Callable[[_Script, _Plan, int], None], *,
              updates: int = 0) -> Callable[[int, int, float], Conversation]:
    def build(turns: int, seed: int, scale: float) -> Conversation:
        # a string seed is hashed the same way in every process (PYTHONHASHSEED does not apply to it)
        rng = random.Random(f"{name}:{seed}")
        plan = _Plan(rng, turns, updates=min(4, max(1, turns // 40)) if updates else 0)
        script = _Script(rng, f"{name}-{seed}", "shape-user", scale)
        write(script, plan, turns)
        return Conversation(name, seed, tuple(script.lines), plan.facts())

    return build


SHAPES: dict[str, Shape] = {shape.name: shape for shape in (
    Shape("chatty", "many short turns, seconds apart", _scripted("chatty", _chatty)),
    Shape("tool-heavy", "nearly half the turns call 1-4 tools with long results",
          _scripted("tool-heavy", _tool_heavy)),
    Shape("documents", "long pasted documents now and then", _scripted("documents", _documents)),
    Shape("multi-day", "sessions hours to days apart, facts stated then changed",
          _scripted("multi-day", _multi_day, updates=1)),
    Shape("mixed", "varied turn lengths, about 12 % tool turns with long results", _scripted("mixed", _mixed)),
    Shape("project", "the project's first generator (facts planted early)", _project),
)}


def generate(shape: str, turns: int, *, seed: int = 42, scale: float = 1.0) -> Conversation:
    """A conversation of ``turns`` turns in ``shape`` (a key of ``SHAPES``)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown conversation shape {shape!r}; known: {', '.join(SHAPES)}")
    if turns < 1:
        raise ValueError("a conversation has at least one turn")
    return SHAPES[shape].build(turns, seed, scale)


def write_jsonl(path: Path, conversation: Conversation) -> int:
    """Write a conversation in the replay format (``om-stream replay`` reads it); returns the number of lines."""
    with path.open("w") as out:
        for line in conversation.lines:
            out.write(json.dumps(line.model_dump(mode="json", exclude_none=True)) + "\n")
    return len(conversation.lines)
