"""The working context of one ``decide`` call: the state being changed, the commands produced, and small helpers
(deterministic ids, events, timers, owed contexts) shared by the observation and reflection rules."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Literal

from om_stream.core.commands import Command, ContextSpec, EmitEvent, PublishContext, ScheduleTimer
from om_stream.core.config import ResolvedConfig
from om_stream.core.events import MarkerConfig, OMEvent, StatusEvent
from om_stream.core.messages import iso
from om_stream.core.state import Cycle, RecordState, ThreadState
from om_stream.core.thresholds import select_chunks
from om_stream.core.tokens import TokenAccountant

__all__ = ["EngineLimits", "Step"]


@dataclass(frozen=True)
class EngineLimits:
    """Bounds of the engine itself (not OM options): how long a model call may take, how often to retry."""

    cycle_timeout_ms: int = 180_000  # a background cycle without result is asked again after this
    blocking_timeout_ms: int = 60_000  # an agent waits at most this long for a blocking cycle's configured models
    max_cycle_attempts: int = 3
    retry_backoff_ms: int = 5_000
    max_retry_backoff_ms: int = 600_000
    max_reflection_failures: int = 5
    recent_ids: int = 64


@dataclass
class Step:
    state: RecordState
    now: int
    config: ResolvedConfig
    accountant: TokenAccountant
    limits: EngineLimits
    base: ResolvedConfig  # the configuration before per-record overrides
    commands: list[Command] = field(default_factory=list)
    owed: set[str] = field(default_factory=set)  # threads whose context must be (re)published
    _key_hash: str = ""

    def __post_init__(self) -> None:
        self._key_hash = hashlib.sha1(self.state.record_id.encode()).hexdigest()[:8]

    # -- ids -----------------------------------------------------------------------------------------------------

    def new_id(self, prefix: str) -> str:
        """Deterministic and unique per record: replaying the same inputs yields the same ids."""
        self.state.id_seq += 1
        return f"{prefix}-{self._key_hash}-{self.state.epoch}-{self.state.id_seq}"

    # -- commands ------------------------------------------------------------------------------------------------

    def add(self, command: Command) -> None:
        self.commands.append(command)

    def emit(self, event: OMEvent, observations_from: tuple[str, ...] = ()) -> None:
        self.add(EmitEvent(self.state.key, event, self.new_id("evt"), observations_from))

    def schedule(self, timer: str, due_at: int) -> None:
        if self.state.timers.get(timer) == due_at:
            return
        self.state.timers[timer] = due_at
        self.add(ScheduleTimer(self.state.key, timer, due_at))

    def cancel(self, timer: str) -> None:
        self.state.timers.pop(timer, None)

    def backoff(self, failures: int) -> int:
        delay: int = self.limits.retry_backoff_ms * 2 ** max(0, failures - 1)
        return min(delay, self.limits.max_retry_backoff_ms)

    # -- shared views --------------------------------------------------------------------------------------------

    @property
    def record_id(self) -> str:
        return self.state.record_id

    def thread(self, thread_id: str) -> ThreadState:
        thread = self.state.threads.get(thread_id)
        if thread is None:
            thread = self.state.threads[thread_id] = ThreadState(thread_id)
        return thread

    def primary_thread(self, thread_ids: tuple[str, ...] | list[str] = ()) -> str:
        if thread_ids:
            return thread_ids[0]
        return self.state.key if self.state.scope == "thread" else next(iter(self.state.threads), self.state.key)

    def pending(self) -> int:
        """Unobserved message tokens as the agent's model will count them (conversation overhead included)."""
        tokens = self.state.unobserved_tokens
        return tokens + self.accountant.conversation_overhead if tokens else 0

    def message_threshold(self) -> int:
        return self.config.message_threshold(self.state.log_tokens)

    def marker_config(self) -> MarkerConfig:
        return MarkerConfig(message_tokens=self.message_threshold(),
                            observation_tokens=self.config.observation_tokens,
                            scope=self.config.scope, activate_after_idle=self.config.observation_idle)

    def iso_now(self) -> str:
        return iso(self.now)

    def deadline(self, blocking: bool) -> int:
        return self.now + (self.limits.blocking_timeout_ms if blocking else self.limits.cycle_timeout_ms)

    def add_cycle(self, cycle: Cycle) -> None:
        self.state.cycles.append(cycle)
        self.schedule(f"deadline:{cycle.id}", cycle.deadline_at)

    def block_on(self, cycle: Cycle) -> None:
        """Make contexts wait for an in-flight cycle, and bound that wait like any blocking cycle."""
        if cycle.blocking:
            return
        again = replace(cycle, blocking=True, deadline_at=min(cycle.deadline_at, self.deadline(True)))
        self.state.cycles = [again if c.id == cycle.id else c for c in self.state.cycles]
        self.schedule(f"deadline:{cycle.id}", again.deadline_at)

    def drop_cycle(self, cycle_id: str) -> None:
        self.state.cycles = [c for c in self.state.cycles if c.id != cycle_id]
        self.cancel(f"deadline:{cycle_id}")

    def owe_all_threads(self) -> None:
        self.owed.update(self.state.threads)

    # -- context -------------------------------------------------------------------------------------------------

    def publish_owed(self) -> None:
        """Publish the contexts owed, unless a blocking cycle holds them back (they stay owed in the state)."""
        state = self.state
        if state.blocking_cycle() is not None:
            state.owed_threads = sorted(set(state.owed_threads) | self.owed)
            self.owed.clear()
            return
        owed = self.owed | set(state.owed_threads)
        state.owed_threads = []
        for thread_id in sorted(owed):
            if thread_id in state.threads:
                self._publish(thread_id)
        self.owed.clear()

    def _publish(self, thread_id: str) -> None:
        state = self.state
        thread = state.threads[thread_id]
        state.context_version += 1
        raw = [m for m in state.unobserved if m.thread_id == thread_id]
        pinned = thread.turn_message
        ids = [m.id for m in raw]
        tokens = sum(m.tokens for m in raw)
        if pinned is not None and pinned.id not in ids:
            ids.insert(0, pinned.id)
            tokens += pinned.tokens
        others: tuple[tuple[str, tuple[str, ...]], ...] = ()
        if state.scope == "resource":
            grouped: dict[str, list[str]] = {}
            for m in state.unobserved:
                if m.thread_id != thread_id:
                    grouped.setdefault(m.thread_id, []).append(m.id)
            others = tuple((tid, tuple(mids)) for tid, mids in grouped.items())
        spec = ContextSpec(
            record_key=state.key, thread_id=thread_id, resource_id=state.resource_id,
            version=state.context_version, through_message_id=thread.last_message_id,
            generation=state.generation, segment_ids=tuple(s.id for s in state.log),
            segment_boundaries=tuple(s.boundary_at for s in state.log), message_ids=tuple(ids),
            message_tokens=tokens, observation_tokens=state.log_tokens, current_task=thread.current_task,
            suggested_response=thread.suggested_response, thread_title=thread.title, other_threads=others,
            obscure_thread_ids=self.config.obscure_thread_ids)
        self.add(PublishContext(spec))
        self.emit(self.status(thread_id))

    def status(self, thread_id: str) -> StatusEvent:
        state = self.state
        chunk_tokens = [c.message_tokens for c in state.buffered]
        pending = self.pending()
        projected = (select_chunks(chunk_tokens, pending, self.config.retention_floor, None).tokens
                     if chunk_tokens else 0)
        buffering: Literal["idle", "running", "complete"] = (
            "running" if state.in_flight("observation", "buffer") else "complete" if state.buffered else "idle")
        reflection: Literal["idle", "running", "complete"] = (
            "running" if state.in_flight("reflection", "buffer") else
            "complete" if state.buffered_reflection else "idle")
        observation_threshold = self.config.observation_tokens if not self.config.share_token_budget else max(
            self.config.message_tokens + self.config.observation_tokens - self.message_threshold(), 1000)
        br = state.buffered_reflection
        return StatusEvent.build(
            record_id=self.record_id, thread_id=thread_id, step_number=self.thread(thread_id).step_number,
            generation_count=state.generation, message_tokens=pending, message_threshold=self.message_threshold(),
            observation_tokens=state.log_tokens, observation_threshold=observation_threshold,
            chunks=len(state.buffered), chunk_message_tokens=min(sum(chunk_tokens), pending),
            projected_removal=projected, chunk_observation_tokens=sum(c.tokens for c in state.buffered),
            buffering=buffering, reflection_input_tokens=br.input_tokens if br else 0,
            reflection_tokens=br.tokens if br else 0, reflection=reflection)
