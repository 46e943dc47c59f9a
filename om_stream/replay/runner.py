"""Plays a conversation through the embedded runner as an agent would, and reports what OM did.

For each turn the user message is added, then every tool call and result, then the assistant's reply; the context
is read before each model step (after the user message and after each tool result). Time is the conversation's
own (a manual clock set to each message's ``created_at``). With ``drain`` (the default for the offline model)
background cycles finish before the next message, which makes runs reproducible.

Engine overhead per turn = wall time of the turn − time spent inside the model's ``complete()`` − time spent in the
watchers below (the harness's own work).

Every context the host publishes is watched (through its ``on_decided`` hook, chained with the driver's): the
report gives the largest observation log any published context held and the turns where it exceeded the bound
``reflection.observationTokens × blockAfter`` (``observation_limit``). ``watch`` sees every decision too, and
``finalize`` observes what is left unobserved at the end (as a thread that ends would), before the memory closes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from om_stream.core.commands import PersistSegment, PublishContext
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.messages import Message
from om_stream.ports import ChatModel, ContentStore
from om_stream.replay.conversation import Turn
from om_stream.runtime.clock import ManualClock
from om_stream.runtime.cycles import RoleStats
from om_stream.runtime.embedded import Memory
from om_stream.runtime.host_ports import Decided
from om_stream.wire.context import ContextRecord

__all__ = ["PublishedLogs", "ReplayResult", "TurnRecord", "observation_limit", "replay"]


def observation_limit(config: ResolvedConfig) -> int:
    """The most observation-log tokens a published context may hold: ``reflection.observationTokens ×
    blockAfter``, or the threshold itself when reflection is not buffered (it then blocks at the threshold)."""
    block_after = config.reflection_block_after
    return block_after if block_after is not None else config.observation_tokens


class PublishedLogs:
    """Watches the host's decisions: the observation log of every published context, and the observation tokens
    the Observer added to the log."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.contexts = 0
        self.over_limit = 0
        self.largest = 0
        self.since_mark = 0  # the largest since ``mark()``
        self.observation_tokens_written = 0

    def __call__(self, decided: Decided[None]) -> None:
        for command in decided.commands:
            if isinstance(command, PublishContext):
                tokens = command.spec.observation_tokens
                self.contexts += 1
                self.over_limit += tokens > self.limit
                self.largest = max(self.largest, tokens)
                self.since_mark = max(self.since_mark, tokens)
            elif isinstance(command, PersistSegment) and command.kind == "observation":
                self.observation_tokens_written += command.tokens

    def mark(self) -> int:
        """The largest observation log published since the previous mark."""
        largest, self.since_mark = self.since_mark, 0
        return largest


@dataclass
class TurnRecord:
    turn: int
    active_message_tokens: int
    observation_tokens: int
    buffered_chunks: int
    generation_count: int
    context_message_tokens: int
    context_has_current_user_message: bool
    newest_tokens: int
    overhead_ms: float
    published_observation_tokens: int = 0  # the largest observation log in a context published during the turn


@dataclass
class ReplayResult:
    turns: list[TurnRecord] = field(default_factory=list)
    memory: Memory | None = None
    wall_seconds: float = 0.0
    final_observation_lines: int = 0
    published: PublishedLogs | None = None
    final_contexts: dict[str, ContextRecord] = field(default_factory=dict)  # read last, before the memory closed

    def report(self) -> dict[str, Any]:
        assert self.memory is not None
        memory = self.memory
        overheads = [t.overhead_ms for t in self.turns]
        half = len(overheads) // 2

        def role(stats: RoleStats) -> dict[str, Any]:
            return {"calls": stats.calls, "buffered": stats.buffered, "sync": stats.sync,
                    "input_tokens": stats.input_tokens, "output_tokens": stats.output_tokens}

        observer, reflector = memory.stats.observer, memory.stats.reflector
        last = self.turns[-1] if self.turns else None
        limit = memory.config.message_limit
        published = self.published or PublishedLogs(observation_limit(memory.config))
        unknown = observer.unknown_cost_calls + reflector.unknown_cost_calls
        return {
            "totals": {
                "observer": role(observer),
                "reflector": role(reflector),
                "tokens_sent_to_models": observer.input_tokens + reflector.input_tokens,
                "activations": memory.events_by_type.get("data-om-activation", 0),
                "generations": last.generation_count if last else 0,
                "observation_tokens_written": published.observation_tokens_written,
                "events_by_type": dict(sorted(memory.events_by_type.items())),
                "cost_usd": None if unknown and not (observer.cost_usd + reflector.cost_usd)
                else round(observer.cost_usd + reflector.cost_usd, 6),
                "cost_unknown_calls": unknown,
                "model_failures": observer.failures + reflector.failures,
                "retries": memory.retries,
                "offline_fallback_calls": (observer.offline_calls + reflector.offline_calls
                                           if memory.model is not memory.offline else 0),
            },
            "timing": {
                "overhead_ms": {"mean": _round(statistics.fmean(overheads)) if overheads else 0.0,
                                "p50": _round(_percentile(overheads, 50)), "p90": _round(_percentile(overheads, 90))},
                "overhead_ms_first_half_mean": _round(statistics.fmean(overheads[:half])) if half else 0.0,
                "overhead_ms_second_half_mean": _round(statistics.fmean(overheads[half:])) if half else 0.0,
                "wall_seconds": round(self.wall_seconds, 3),
            },
            "invariants": {
                "message_limit": limit,
                "turns_over_block_after": sum(1 for t in self.turns
                                              if t.context_message_tokens - t.newest_tokens > limit),
                "turns_without_current_user_message": sum(1 for t in self.turns
                                                          if not t.context_has_current_user_message),
                "observation_limit": published.limit,
                "largest_observation_log": published.largest,
                "turns_over_observation_limit": sum(1 for t in self.turns
                                                    if t.published_observation_tokens > published.limit),
                "contexts_published": published.contexts,
                "contexts_over_observation_limit": published.over_limit,
            },
            "per_turn": [{"turn": t.turn, "active_message_tokens": t.active_message_tokens,
                          "observation_tokens": t.observation_tokens, "buffered_chunks": t.buffered_chunks,
                          "generation_count": t.generation_count, "context_message_tokens": t.context_message_tokens,
                          "context_has_current_user_message": t.context_has_current_user_message}
                         for t in self.turns],
            "final_state": {
                "observation_tokens": last.observation_tokens if last else 0,
                "active_observation_lines": self.final_observation_lines,
                "generation_count": last.generation_count if last else 0,
            },
        }


def _round(value: float) -> float:
    return round(value, 4)


def _percentile(values: Sequence[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


async def replay(turns: Sequence[Turn], options: OMConfig, *, model: ChatModel | None = None, drain: bool = True,
                 on_turn: Callable[[Turn, ContextRecord | None, Memory], None] | None = None,
                 memory: Memory | None = None, store: ContentStore | None = None,
                 watch: Callable[[Decided[None]], None] | None = None, finalize: bool = False) -> ReplayResult:
    """Replay ``turns`` through a ``Memory`` (the given one, else one on ``store``: SQLite in memory by default).
    ``watch`` sees every decision of the memory's host; ``finalize`` observes what is left at the end."""
    clock = ManualClock(turns[0].messages[0].created_at_ms if turns else 0)
    result = ReplayResult()
    started = time.perf_counter()
    async with memory or Memory(options, model=model, clock=clock, store=store) as om:
        clock = om.clock if isinstance(om.clock, ManualClock) else clock
        result.memory = om
        published = result.published = PublishedLogs(observation_limit(om.config))
        watching = _chain(om, published, watch)
        for turn in turns:
            model_before = om.stats.observer.model_seconds + om.stats.reflector.model_seconds
            watched_before = watching.seconds
            began = time.perf_counter()
            max_tokens = 0
            largest: Message | None = None  # the message after which the context's messages were the largest
            has_user = True
            context: ContextRecord | None = None
            user_id = next((m.message_id for m in turn.messages if m.role == "user"), None)
            for message in turn.messages:
                await om.advance_to(message.created_at_ms)
                clock.now = max(clock.now, message.created_at_ms)
                context = await om.add_message(message)
                if drain:
                    await om.settle()
                if message.role != "assistant" and context is not None:  # the agent reads it for a model step
                    ids = [m.message_id for m in context.messages]
                    if context.tokens.messages > max_tokens:
                        max_tokens, largest = context.tokens.messages, message
                    if user_id is not None and user_id not in ids:
                        has_user = False
            elapsed = time.perf_counter() - began
            # the harness's own counting stays out of the turn's time
            newest = om.accountant.message_tokens(largest) if largest is not None else 0
            model_seconds = om.stats.observer.model_seconds + om.stats.reflector.model_seconds - model_before
            harness = watching.seconds - watched_before
            state = om.state(turn.thread_id, turn.messages[0].resource_id)
            assert state is not None
            result.turns.append(TurnRecord(
                turn=turn.number, active_message_tokens=state.unobserved_tokens,
                observation_tokens=state.log_tokens, buffered_chunks=len(state.buffered),
                generation_count=state.generation, context_message_tokens=max_tokens,
                context_has_current_user_message=has_user, newest_tokens=newest,
                overhead_ms=max(0.0, (elapsed - model_seconds - harness) * 1000),
                published_observation_tokens=published.mark()))
            if on_turn is not None:
                on_turn(turn, context, om)
        await om.settle()
        result.wall_seconds = time.perf_counter() - started
        threads = {t.thread_id: t.messages[0].resource_id for t in turns}
        if finalize:
            for thread_id, resource_id in threads.items():
                await om.observe(thread_id, resource_id, force=True)
            await om.settle()
        for thread_id in threads:
            context = await om.context(thread_id)
            if context is not None:
                result.final_contexts[thread_id] = context
        if turns:
            result.final_observation_lines = await om.observation_lines(turns[-1].thread_id,
                                                                       turns[-1].messages[0].resource_id)
    return result


@dataclass
class Watching:
    """The time the watchers took: the harness's work, kept out of the engine's overhead."""

    seconds: float = 0.0


def _chain(memory: Memory, *watchers: Callable[[Decided[None]], None] | None) -> Watching:
    """Every decision of the memory's host to its own hook first (the driver's: engine work), then to each watcher
    (timed)."""
    own = memory.host.on_decided
    watching = Watching()
    chained = [w for w in watchers if w is not None]

    def on_decided(decided: Decided[None]) -> None:
        if own is not None:
            own(decided)
        began = time.perf_counter()
        for watcher in chained:
            watcher(decided)
        watching.seconds += time.perf_counter() - began

    memory.host.on_decided = on_decided
    return watching
