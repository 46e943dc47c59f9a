"""The engine's invariants on a conversation shape (``om_stream.replay.shapes``), checked through the real host.

A conversation is replayed through the embedded ``Memory`` with the offline model, as ``om-stream replay`` does
(its own timestamps, background cycles drained between messages), on the in-memory store. ``ContextWatch`` sees
every decision the host makes and checks every context it publishes; ``shape_violations`` adds what can only be
checked at the end. The invariants:

1. **the bound**: no published context holds an observation log over ``reflection.observationTokens ×
   blockAfter`` (``observation_limit``; the threshold itself when reflection is not buffered), and the largest
   one, recounted from the stored texts, is within it too (the engine's accounting cannot hide an overrun);
2. **the current user message** (the thread's latest) is raw in every context published while its turn is open,
   and in every context after it (raw, or in the log once observed and answered: never in both then);
3. **every message observed exactly once**: never twice while the conversation runs, and each exactly once after
   a final ``observe()``;
4. **planted facts retained**: every current fact the user asked to keep is in the context the agent holds after
   the last turn (its observations or its raw messages);
5. **reflection calls bounded**: see ``reflection_call_budget``; Reflector cycles (each request the engine makes)
   stay within it, and so do the Reflector's model calls when the offline model answers (it meets each ladder
   level's target, so one call per cycle); a Reflector that never meets its target may be asked once per ladder
   level, ``LADDER_LEVELS`` per cycle.

``repeated_date_headers`` finds days whose ``Date:`` header a context shows more than once (one per day is the
Observer's format, whatever chunks and reflections built the log).

``run_shape(..., reflector=MisbehavingReflector(...))`` (``tests.support.reflectors``) checks the bound and the call
budget whatever the Reflector returns; planted facts are then the Reflector's business, not the engine's.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import ContextSpec, PersistMessage, PersistSegment, PublishContext, RequestReflection
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.replay.conversation import Turn
from om_stream.replay.facts import PlantedFact
from om_stream.replay.runner import ReplayResult, observation_limit, replay
from om_stream.replay.shapes import Conversation
from om_stream.runtime.embedded import Memory
from om_stream.runtime.host_ports import Decided
from om_stream.wire.context import ContextRecord
from tests.support.reflectors import MisbehavingReflector

# A correct engine starts a Reflector call only once the log has grown back to a trigger. With each reflection
# meeting the target of 0.75 x what it condenses, the log settles where a background reflection covering L tokens
# and activating at the threshold R leaves 0.75 L + (R - L) = L, i.e. L = 0.8 R: one call per 0.2 R of new
# observations. Churn is calls with next to no new observations in between (a generation still over the threshold
# reflected again at once; a reflector that barely shrinks the log), so the budget allows one call per tenth of R
# of new observation tokens: twice what the steady state needs, and far below what a churning engine makes.
NEW_TOKENS_PER_REFLECTION = 0.1
LADDER_LEVELS = 4  # levels 1 to 4: an automatic reflection that never comes in under target climbs them all


def reflection_call_budget(observation_tokens_written: int, config: ResolvedConfig) -> int:
    """Reflector calls allowed for a run: 1 + new observation tokens / (0.1 × reflection.observationTokens)."""
    return 1 + int(observation_tokens_written / (NEW_TOKENS_PER_REFLECTION * config.observation_tokens))


class ContextWatch:
    """Checks every context the host publishes, and counts what each message went through. Give it to
    ``replay(watch=...)``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.violations: list[str] = []
        self.current_user: dict[str, str] = {}  # thread id -> its latest user message
        self.answered: set[str] = set()  # threads whose latest user message the agent's reply has answered
        self.persisted: list[str] = []
        self.observed: Counter[str] = Counter()
        self.largest: ContextSpec | None = None
        self.contexts = 0
        self.reflection_requests = 0

    def __call__(self, decided: Decided) -> None:
        for command in decided.commands:
            if isinstance(command, PersistMessage):
                self.persisted.append(command.message.message_id)
                message = command.message
                if message.role == "user":
                    self.current_user[message.thread_id] = message.message_id
                    self.answered.discard(message.thread_id)
                elif message.role == "assistant" and not message.tool_call_ids():
                    self.answered.add(message.thread_id)
            elif isinstance(command, PersistSegment) and command.kind == "observation":
                for message_id in command.message_ids:
                    self.observed[message_id] += 1
                    if self.observed[message_id] == 2:
                        self.violations.append(f"message {message_id} observed a second time "
                                               f"(segment {command.segment_id})")
            elif isinstance(command, PublishContext):
                self._context(command.spec)
            elif isinstance(command, RequestReflection):
                self.reflection_requests += 1

    def _context(self, spec: ContextSpec) -> None:
        self.contexts += 1
        if spec.observation_tokens > self.limit:
            self.violations.append(f"context v{spec.version} holds an observation log of {spec.observation_tokens}"
                                   f" tokens, over the bound {self.limit}")
        if self.largest is None or spec.observation_tokens > self.largest.observation_tokens:
            self.largest = spec
        current = self.current_user.get(spec.thread_id)
        if current is not None and current not in spec.message_ids \
                and (spec.thread_id not in self.answered or not self.observed[current]):
            self.violations.append(f"context v{spec.version} lacks the current user message {current}")


@dataclass
class ShapeRun:
    conversation: Conversation
    config: ResolvedConfig
    watch: ContextWatch
    result: ReplayResult
    last_turn_context: ContextRecord | None
    recounted_largest: int
    reflector_calls: int = 0
    checks_facts: bool = True
    lost_facts: list[PlantedFact] = field(default_factory=list)  # current facts not kept, asked to or not


_DATE_HEADER = re.compile(r"^\s*Date:\s*(.+?)\s*(?:\(.*\))?\s*$", re.MULTILINE)


def repeated_date_headers(context: ContextRecord | None) -> dict[str, int]:
    """Days whose ``Date:`` header the context's observations show more than once (the renderer's relative-time
    note, ``(today)``, is not part of the day)."""
    if context is None:
        return {}
    days = Counter(match.group(1) for match in _DATE_HEADER.finditer(context.observations))
    return {day: count for day, count in days.items() if count > 1}


def context_text(context: ContextRecord | None) -> str:
    """What the agent holds: the observations and every raw message's text."""
    if context is None:
        return ""
    return "\n".join([context.observations, *(m.text for m in context.messages)])


async def _run(conversation: Conversation, options: dict[str, Any],
               reflector: MisbehavingReflector | None) -> ShapeRun:
    config = OMConfig.parse(options)
    resolved = config.resolve()
    watch = ContextWatch(observation_limit(resolved))
    store = InMemoryContentStore()
    turns = conversation.turns()
    held: dict[str, ContextRecord | None] = {}

    def after_turn(turn: Turn, context: ContextRecord | None, _memory: Memory) -> None:
        if turn is turns[-1]:
            held["last"] = context

    result = await replay(turns, config, model=reflector, store=store, watch=watch, finalize=True,
                          on_turn=after_turn)
    assert result.memory is not None
    stats = result.memory.stats.reflector
    calls = stats.calls if reflector is None else reflector.reflector_calls + stats.offline_calls
    recounted = 0
    if watch.largest is not None:
        texts = await store.get_segment_texts(list(watch.largest.segment_ids))
        recounted = sum(result.memory.counter.count(text) for text in texts.values())
    await store.close()
    last = held.get("last")
    text = context_text(last)
    return ShapeRun(conversation=conversation, config=resolved, watch=watch, result=result,
                    last_turn_context=last, recounted_largest=recounted,
                    reflector_calls=calls, checks_facts=reflector is None or reflector.behaviour == "offline",
                    lost_facts=[f for f in conversation.current_facts() if not f.found_in(text)])


def run_shape(conversation: Conversation, options: dict[str, Any], *,
              reflector: MisbehavingReflector | None = None) -> ShapeRun:
    """Replay ``conversation`` with ``options``: the offline model, or ``reflector`` (Observer calls still go to
    the offline model)."""
    return asyncio.run(_run(conversation, options, reflector))


def shape_violations(run: ShapeRun) -> list[str]:
    """Every invariant the run broke, each with what was seen (empty: the run kept them all)."""
    watch, config = run.watch, run.config
    violations = list(watch.violations)
    if run.recounted_largest > watch.limit:
        violations.append(f"the largest published observation log recounts to {run.recounted_largest} tokens, "
                          f"over the bound {watch.limit}")
    never = [m for m in watch.persisted if watch.observed[m] == 0]
    if never:
        violations.append(f"{len(never)} of {len(watch.persisted)} messages never observed, e.g. {never[:3]}")
    written = run.result.published.observation_tokens_written if run.result.published else 0
    budget = reflection_call_budget(written, config)
    if watch.reflection_requests > budget:
        violations.append(f"{watch.reflection_requests} Reflector cycles for {written} new observation tokens "
                          f"(budget {budget})")
    calls_allowed = budget if run.checks_facts else LADDER_LEVELS * budget
    if run.reflector_calls > calls_allowed:
        violations.append(f"{run.reflector_calls} Reflector calls for {written} new observation tokens "
                          f"(allowed {calls_allowed})")
    kept = {f.statement for f in run.conversation.kept_facts()} if run.checks_facts else set()
    for fact in run.lost_facts:
        if fact.statement in kept:
            violations.append(f"lost a fact the user asked to keep (turn {fact.turn}): {fact.statement!r}, "
                              f"needles {fact.needles}")
    if watch.contexts == 0:
        violations.append("no context was published")
    return violations
