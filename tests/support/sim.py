"""A synchronous driver of the host for tests: the same ``Host`` as the worker and the embedded runner, on the
in-memory content store and a simulated clock, with model requests answered by scripted outcomes (success,
failure, degenerate output, delays, out-of-order delivery, lost results). It records every command and what an
agent would see, so invariants can be checked after every input."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import (
    Command,
    ContextSpec,
    EmitEvent,
    ExpireIndex,
    IndexForRecall,
    PersistMessage,
    PersistSegment,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.engine import record_key
from om_stream.core.events import OMEvent
from om_stream.core.inputs import AttemptOutcome, Input, MessageAppended, ModelResultArrived
from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.runtime.effects import Effects
from om_stream.runtime.host import Host
from om_stream.runtime.host_ports import Arrival, Decided
from om_stream.runtime.timers import TimerWheel


def word_count(text: str) -> int:
    return len(text.split())


def dated_observations(messages: list[Message]) -> str:
    """What the Observer writes of ``messages`` in the reference format: one ``Date:`` header per day (UTC), then
    one entry per message at its minute, naming the message (so a test knows what each entry describes), with a
    detail line under every other one."""
    lines: list[str] = []
    day = None
    for message in sorted(messages, key=lambda m: m.created_at):
        moment = message.created_at.astimezone(UTC)
        if moment.date() != day:
            day = moment.date()
            lines.append(f"Date: {moment.strftime('%b')} {moment.day}, {moment.year}")
        lines.append(f"* 🔴 ({moment.strftime('%H:%M')}) observed {message.message_id}")
        if len(lines) % 2:
            lines.append(f"  * -> detail of {message.message_id}")
    return "\n".join(lines)


@dataclass
class Outcome:
    ok: bool = True
    delay_ms: int = 1_000
    text: str | None = None  # None: the default observer/reflector output
    error: str = "model failed"
    lost: bool = False  # the result never arrives (worker crash)
    suggested_response: str | None = None  # the Reflector's hints (an Observer's hints are the default ones)
    current_task: str | None = None
    attempts: tuple[AttemptOutcome, ...] = ()  # a reflection's unproductive ladder attempts before the one kept


def always_ok(_request: RequestObservation | RequestReflection) -> Outcome:
    return Outcome()


@dataclass
class Published:
    spec: ContextSpec
    at: int
    newest_tokens: int  # tokens of the thread's newest message when it was published


@dataclass
class Sim:
    options: dict[str, Any] | OMConfig
    outcome: Callable[[RequestObservation | RequestReflection], Outcome] = always_ok
    scope: str = "thread"
    limits: EngineLimits = field(default_factory=EngineLimits)
    now: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    retention_days: int | None = None  # the deployment's retention window (``core.expiry``)
    dated: bool = False  # the default Observer writes the reference format: a Date: header per day, (HH:MM) times
    states: dict[str, RecordState] = field(default_factory=dict)
    segments: dict[str, str] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)
    message_tokens: dict[str, int] = field(default_factory=dict)
    events: list[EmitEvent] = field(default_factory=list)
    published: list[OMEvent] = field(default_factory=list)  # the events as they left (store counts filled in)
    contexts: list[Published] = field(default_factory=list)
    requests: list[RequestObservation | RequestReflection] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    checks: list[Callable[[Sim, RecordState, RecordState, list[Command]], None]] = field(default_factory=list)
    observed_count: dict[str, int] = field(default_factory=dict)
    _queue: list[tuple[int, int, str, Input]] = field(default_factory=list)
    _tie: itertools.count = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        config = self.options if isinstance(self.options, OMConfig) else OMConfig.parse(
            {"scope": self.scope, **self.options})
        self.config: ResolvedConfig = config.resolve().with_retention(self.retention_days)
        self.accountant = TokenAccountant(word_count, message_overhead=1, conversation_overhead=0)
        self.timers = TimerWheel()
        self.host = Host(config=self.config, accountant=self.accountant,
                         effects=Effects(InMemoryContentStore(), self.config, count_text=word_count),
                         table=_Table(self.states),
                         outlets=lambda: _Outlet(self), timers=self.timers, clock=self, limits=self.limits,
                         on_decided=self._decided)
        self._loop = asyncio.new_event_loop()
        self._decisions: list[Decided] = []

    def __del__(self) -> None:
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.close()

    def now_ms(self) -> int:  # the host's clock
        return self.now

    # -- driving -------------------------------------------------------------------------------------------------

    def apply(self, key: str, resource_id: str, event: Input) -> list[Command]:
        """One input through the host; the checks run once it is committed."""
        self._decisions.clear()
        self._loop.run_until_complete(self.host.apply([Arrival(key, resource_id, event, None)]))
        commands = [c for d in self._decisions for c in d.commands]
        for decided in self._decisions:
            for check in self.checks:
                check(self, decided.before, decided.after, decided.commands)
        return commands

    def say(self, thread: str, role: str, text: str = "", *, resource: str = "r1", model: str | None = None,
            tool_calls: tuple[str, ...] = (), tool_results: tuple[str, ...] = (), msg_id: str | None = None,
            advance_ms: int = 1_000) -> Message:
        self.run_until(self.now + advance_ms)
        parts: list[Any] = [TextPart(text=text)] if text else []
        parts += [ToolCallPart(tool_call_id=c, tool_name="search", args={"q": text}) for c in tool_calls]
        parts += [ToolResultPart(tool_call_id=c, tool_name="search", result=text or "ok") for c in tool_results]
        message = Message(message_id=msg_id or f"m{len(self.messages) + 1}", thread_id=thread, resource_id=resource,
                          role=role, created_at=datetime.fromtimestamp(self.now / 1000, UTC),  # type: ignore[arg-type]
                          parts=tuple(parts), model=model)
        self.apply(record_key(self.config.scope, thread, resource), resource, MessageAppended(message))
        return message

    def run_until(self, until: int) -> None:
        """Deliver, in time order, every model result and due timer up to ``until``."""
        while True:
            due = self.timers.next_due()
            queued = self._queue[0][0] if self._queue else None
            if (due is None or due > until) and (queued is None or queued > until):
                break
            if due is not None and (queued is None or due <= queued):
                self.now = max(self.now, due)
                for key, timer in self.timers.due(due):
                    self._deliver(key, timer)
            else:
                at, _, key, event = heapq.heappop(self._queue)
                self.now = max(self.now, at)
                self._deliver(key, event)
        self.now = max(self.now, until)

    def _deliver(self, key: str, event: Input) -> None:
        state = self.states.get(key)
        if state is not None:
            self.apply(key, state.resource_id, event)

    def settle(self, horizon_ms: int = 3_600_000) -> None:
        self.run_until(self.now + horizon_ms)

    def _enqueue(self, at: int, key: str, event: Input) -> None:
        heapq.heappush(self._queue, (at, next(self._tie), key, event))

    # -- what the host does --------------------------------------------------------------------------------------

    def _decided(self, decided: Decided) -> None:
        self._decisions.append(decided)
        self.commands.extend(decided.commands)
        for command in decided.commands:
            if isinstance(command, PersistMessage):
                self.messages[command.message.message_id] = command.message
                self.message_tokens[command.message.message_id] = command.tokens
            elif isinstance(command, PersistSegment):
                self.segments[command.segment_id] = command.text
                if command.kind == "observation":
                    for mid in command.message_ids:
                        self.observed_count[mid] = self.observed_count.get(mid, 0) + 1

    def _requested(self, key: str, command: RequestObservation | RequestReflection) -> None:
        self.requests.append(command)
        outcome = Outcome() if command.use_offline_model else self.outcome(command)
        if not outcome.lost:
            self._enqueue(self.now + outcome.delay_ms, key, self._result(command, outcome))

    def _result(self, request: RequestObservation | RequestReflection, outcome: Outcome) -> ModelResultArrived:
        operation = "observation" if isinstance(request, RequestObservation) else "reflection"
        if not outcome.ok:
            return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation=operation,
                                      ok=False, error=outcome.error, duration_ms=outcome.delay_ms,
                                      observations=outcome.text or "")
        if outcome.text is not None:
            text = outcome.text
        elif isinstance(request, RequestObservation) and self.dated:
            text = dated_observations([self.messages[m] for m in request.message_ids if m in self.messages])
        elif isinstance(request, RequestObservation):
            text = "\n".join(f"* 🔴 observed {mid}" for mid in request.message_ids)
        else:
            covered = "\n".join(self.segments.get(s, "") for s in request.segment_ids)
            lines = [line for line in covered.splitlines() if line.strip()]
            text = "\n".join(lines[: max(1, len(lines) // 4)])
        return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation=operation, ok=True,
                                  observations=text, duration_ms=outcome.delay_ms,
                                  current_task="the current task" if isinstance(request, RequestObservation)
                                  and request.want_hints and request.kind != "buffer" else outcome.current_task,
                                  suggested_response=outcome.suggested_response if operation == "reflection"
                                  else None, attempts=outcome.attempts,
                                  fallback_model="offline" if request.use_offline_model else None)

    # -- views ---------------------------------------------------------------------------------------------------

    def event_types(self) -> list[str]:
        return [e.event.event_type for e in self.events]

    def state(self, thread: str = "t1", resource: str = "r1") -> RecordState:
        return self.states[record_key(self.config.scope, thread, resource)]

    def last_context(self, thread: str = "t1") -> ContextSpec:
        return next(p.spec for p in reversed(self.contexts) if p.spec.thread_id == thread)


class _Table:
    def __init__(self, states: dict[str, RecordState]) -> None:
        self.states = states

    def get(self, arrival: Arrival) -> RecordState | None:
        return self.states.get(arrival.key)

    def set(self, arrival: Arrival, state: RecordState) -> None:
        self.states[arrival.key] = state


class _Outlet:
    """What the host publishes, recorded as an agent would see it; model requests answered by the script."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim

    async def event(self, event: OMEvent, command: EmitEvent, arrival: Arrival) -> None:
        self.sim.events.append(command)
        self.sim.published.append(event)

    async def context(self, command: PublishContext, arrival: Arrival, *, folded: Sequence[Arrival] = ()) -> None:
        newest = command.spec.through_message_id
        self.sim.contexts.append(Published(command.spec, self.sim.now, self.sim.message_tokens.get(newest or "", 0)))

    async def request(self, command: RequestObservation | RequestReflection, arrival: Arrival) -> None:
        self.sim._requested(arrival.key, command)

    async def index(self, command: IndexForRecall, arrival: Arrival) -> None: ...

    async def expire_index(self, command: ExpireIndex, arrival: Arrival) -> None: ...

    async def forget(self, resource_id: str, key: str, arrival: Arrival) -> None: ...

    async def refuse(self, command: RejectInput, arrival: Arrival) -> None: ...

    async def failed(self, arrival: Arrival, reason: str, detail: str, error: BaseException) -> None:
        raise error  # a test must see the engine fail

    async def commit(self) -> None: ...

    def discard(self) -> None: ...


# -- random conversations, configurations and model outcomes (the engine's property tests) ----------------------

Turn = tuple[int, list[tuple[int, int]], int, int]  # user words, [(call words, result words)], reply words, gap ms


@st.composite
def configurations(draw: st.DrawFn) -> dict[str, Any]:
    message_tokens = draw(st.integers(40, 400))
    observation: dict[str, Any] = {"messageTokens": message_tokens}
    reflection: dict[str, Any] = {"observationTokens": draw(st.integers(30, 600))}
    options: dict[str, Any] = {"observation": observation, "reflection": reflection}
    if draw(st.booleans()):
        observation["bufferTokens"] = False
        options["shareTokenBudget"] = draw(st.booleans())
    else:
        observation["bufferTokens"] = draw(st.sampled_from([0.1, 0.2, 0.25, 0.5]))
        observation["bufferActivation"] = draw(st.sampled_from([0.5, 0.8, 1.0]))
        observation["blockAfter"] = draw(st.sampled_from([1.0, 1.2, 1.5, 2.0]))
        reflection["bufferActivation"] = draw(st.sampled_from([0.3, 0.5, 1.0]))
        reflection["blockAfter"] = draw(st.sampled_from([1.0, 1.2, 2.0]))
        observation["bufferOnIdle"] = draw(st.booleans())
        if draw(st.booleans()):
            options["activateAfterIdle"] = draw(st.sampled_from(["1m", "5m", "auto", 120_000]))
    options["temporalMarkers"] = draw(st.booleans())
    return options


turns = st.lists(st.tuples(st.integers(1, 60), st.lists(st.tuples(st.integers(1, 20), st.integers(1, 150)),
                                                         max_size=2),
                           st.integers(1, 80), st.integers(200, 20 * 60_000)), min_size=5, max_size=30)


def outcome_plan(seed: int) -> Any:
    rng = random.Random(seed)

    def outcome(_request: object) -> Outcome:
        roll = rng.random()
        delay = rng.choice([100, 1_000, 5_000, 30_000, 120_000])
        if roll < 0.6:
            return Outcome(delay_ms=delay)
        if roll < 0.75:
            return Outcome(ok=False, delay_ms=delay, text=rng.choice([None, "* partial"]))
        if roll < 0.87:
            return Outcome(delay_ms=delay, text=rng.choice(["", "   "]))  # empty / degenerate output
        return Outcome(lost=True)

    return outcome
