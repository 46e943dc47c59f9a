"""A synchronous driver of ``core.decide`` for tests: executes the commands in memory, answers model requests
with scripted outcomes (success, failure, degenerate output, delays, out-of-order delivery) and records what an
agent would see, so invariants can be checked after every input."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from om_stream.core.commands import (
    ClearStored,
    Command,
    CommitGeneration,
    ContextSpec,
    EmitEvent,
    PersistMessage,
    PersistSegment,
    PublishContext,
    RequestObservation,
    RequestReflection,
    ScheduleTimer,
)
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.engine import decide, new_record, record_key
from om_stream.core.inputs import Input, MessageAppended, ModelResultArrived, TimerFired
from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant


def word_count(text: str) -> int:
    return len(text.split())


@dataclass
class Outcome:
    ok: bool = True
    delay_ms: int = 1_000
    text: str | None = None  # None: the default observer/reflector output
    error: str = "model failed"
    lost: bool = False  # the result never arrives (worker crash)


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
    states: dict[str, RecordState] = field(default_factory=dict)
    segments: dict[str, str] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)
    message_tokens: dict[str, int] = field(default_factory=dict)
    events: list[EmitEvent] = field(default_factory=list)
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
        self.config: ResolvedConfig = config.resolve()
        self.accountant = TokenAccountant(word_count, message_overhead=1, conversation_overhead=0)

    # -- driving -------------------------------------------------------------------------------------------------

    def apply(self, key: str, resource_id: str, event: Input) -> list[Command]:
        state = self.states.get(key) or new_record(key, self.config.scope, resource_id)
        before = state
        decision = decide(state, event, self.now, self.config, self.accountant, self.limits)
        self.states[key] = decision.state
        self._execute(key, resource_id, decision.commands)
        for check in self.checks:
            check(self, before, decision.state, decision.commands)
        return decision.commands

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
        while self._queue and self._queue[0][0] <= until:
            at, _, key, event = heapq.heappop(self._queue)
            self.now = max(self.now, at)
            state = self.states.get(key)
            if state is not None:
                self.apply(key, state.resource_id, event)
        self.now = max(self.now, until)

    def settle(self, horizon_ms: int = 3_600_000) -> None:
        self.run_until(self.now + horizon_ms)

    def _enqueue(self, at: int, key: str, event: Input) -> None:
        heapq.heappush(self._queue, (at, next(self._tie), key, event))

    # -- executing commands --------------------------------------------------------------------------------------

    def _execute(self, key: str, resource_id: str, commands: list[Command]) -> None:
        self.commands.extend(commands)
        for command in commands:
            if isinstance(command, PersistMessage):
                self.messages[command.message.message_id] = command.message
                self.message_tokens[command.message.message_id] = command.tokens
            elif isinstance(command, PersistSegment):
                self.segments[command.segment_id] = command.text
                if command.kind == "observation":
                    for mid in command.message_ids:
                        self.observed_count[mid] = self.observed_count.get(mid, 0) + 1
            elif isinstance(command, EmitEvent):
                self.events.append(command)
            elif isinstance(command, PublishContext):
                thread_newest = command.spec.through_message_id
                self.contexts.append(Published(command.spec, self.now,
                                               self.message_tokens.get(thread_newest or "", 0)))
            elif isinstance(command, RequestObservation | RequestReflection):
                self.requests.append(command)
                outcome = Outcome() if command.use_offline_model else self.outcome(command)
                if not outcome.lost:
                    self._enqueue(self.now + outcome.delay_ms, key, self._result(command, outcome))
            elif isinstance(command, ScheduleTimer):
                self._enqueue(command.due_at, key, TimerFired(command.timer))
            elif isinstance(command, ClearStored | CommitGeneration):
                pass

    def _result(self, request: RequestObservation | RequestReflection, outcome: Outcome) -> ModelResultArrived:
        operation = "observation" if isinstance(request, RequestObservation) else "reflection"
        if not outcome.ok:
            return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation=operation,
                                      ok=False, error=outcome.error, duration_ms=outcome.delay_ms,
                                      observations=outcome.text or "")
        if outcome.text is not None:
            text = outcome.text
        elif isinstance(request, RequestObservation):
            text = "\n".join(f"* 🔴 observed {mid}" for mid in request.message_ids)
        else:
            covered = "\n".join(self.segments.get(s, "") for s in request.segment_ids)
            lines = [line for line in covered.splitlines() if line.strip()]
            text = "\n".join(lines[: max(1, len(lines) // 4)])
        return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation=operation, ok=True,
                                  observations=text, duration_ms=outcome.delay_ms,
                                  current_task="the current task" if isinstance(request, RequestObservation)
                                  and request.want_hints and request.kind != "buffer" else None,
                                  fallback_model="offline" if request.use_offline_model else None)

    # -- views ---------------------------------------------------------------------------------------------------

    def event_types(self) -> list[str]:
        return [e.event.event_type for e in self.events]

    def state(self, thread: str = "t1", resource: str = "r1") -> RecordState:
        return self.states[record_key(self.config.scope, thread, resource)]

    def last_context(self, thread: str = "t1") -> ContextSpec:
        return next(p.spec for p in reversed(self.contexts) if p.spec.thread_id == thread)
