"""The working context of one ``decide`` call: the state being changed, the commands produced, and small helpers
(deterministic ids, events, timers, owed contexts) shared by the observation and reflection rules."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from om_stream.core.commands import Command, EmitEvent, PublishContext
from om_stream.core.config import ResolvedConfig
from om_stream.core.events import (
    BufferingFailedEvent,
    BufferingStartEvent,
    CondensationEvent,
    MarkerConfig,
    ObservationFailedEvent,
    ObservationStartEvent,
    OMEvent,
    StatusEvent,
)
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.messages import iso
from om_stream.core.retention import cutoff
from om_stream.core.state import Cycle, RecordState, ThreadState
from om_stream.core.tokens import TokenAccountant
from om_stream.core.views import context_spec, pending_tokens, status_event

__all__ = ["EngineLimits", "Step", "record_hash"]


@lru_cache(maxsize=4096)
def record_hash(record_id: str) -> str:
    """The short hash every id a record makes carries (``Step.new_id``): ``scope:key``. Memoised: every decision
    of a record needs it, and a record keeps its id."""
    return hashlib.sha1(record_id.encode()).hexdigest()[:8]


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
    purge_gap_ms: int = 3_600_000  # a record's retention purges run at least this far apart (``core.expiry``)


@dataclass
class Step:
    state: RecordState
    now: int
    config: ResolvedConfig
    accountant: TokenAccountant
    limits: EngineLimits
    base: ResolvedConfig  # the configuration before per-record overrides
    commands: list[Command] = field(default_factory=list)
    owed: set[str] = field(default_factory=set)  # threads whose context changed: published under a new version
    # threads whose context is sent again as it stands, under its version: an input the record had taken in already
    # (read again after a crash) changes nothing, but what it published may have been lost with the crash
    resent: set[str] = field(default_factory=set)
    _key_hash: str = ""

    def __post_init__(self) -> None:
        self._key_hash = record_hash(self.state.record_id)

    # -- ids -----------------------------------------------------------------------------------------------------

    def new_id(self, prefix: str) -> str:
        """Deterministic and unique per record: replaying the same inputs yields the same ids."""
        self.state.id_seq += 1
        return f"{prefix}-{self._key_hash}-{self.state.epoch}-{self.state.id_seq}"

    # -- commands ------------------------------------------------------------------------------------------------

    def add(self, command: Command) -> None:
        self.commands.append(command)

    def emit(self, event: OMEvent, observations_from: tuple[str, ...] = (), *, expiry_of: str | None = None) -> None:
        self.add(EmitEvent(self.state.key, event, self.new_id("evt"), observations_from,
                           expire_before=self.expire_before if observations_from else None, expiry_of=expiry_of))

    def start_cycle(self, cycle: Cycle) -> None:
        """Record a new Observer/Reflector cycle and announce it (``buffering-start`` in the background,
        ``observation-start`` otherwise; reflections use the same events with ``operationType: reflection``)."""
        self.add_cycle(cycle)
        main = self.primary_thread(cycle.thread_ids)
        if cycle.kind == "buffer":
            self.emit(BufferingStartEvent(record_id=self.record_id, thread_id=main, cycle_id=cycle.id,
                                          operation_type=cycle.operation, started_at=self.iso_now(),
                                          tokens_to_buffer=cycle.tokens, thread_ids=list(cycle.thread_ids),
                                          config=self.marker_config()))
        else:
            self.emit(ObservationStartEvent(record_id=self.record_id, thread_id=main, cycle_id=cycle.id,
                                            operation_type=cycle.operation, started_at=self.iso_now(),
                                            tokens_to_observe=cycle.tokens, thread_ids=list(cycle.thread_ids),
                                            config=self.marker_config()))

    def end_overtaken(self, cycle: Cycle, reason: str) -> None:
        """A cycle overtaken by a change to what it covered (a newer generation or messages observed another way
        before its result arrived, the record cleared while it ran) is discarded, but still ends: its start gets a
        failed event saying why. Not a model failure: nothing is retried or backed off."""
        main = self.primary_thread(cycle.thread_ids)
        duration = max(0, self.now - cycle.started_at)
        if cycle.kind == "buffer":
            self.emit(BufferingFailedEvent(record_id=self.record_id, thread_id=main, cycle_id=cycle.id,
                                           operation_type=cycle.operation, failed_at=self.iso_now(),
                                           duration_ms=duration, tokens_attempted=cycle.tokens, error=reason))
        else:
            self.emit(ObservationFailedEvent(record_id=self.record_id, thread_id=main, cycle_id=cycle.id,
                                             operation_type=cycle.operation, failed_at=self.iso_now(),
                                             duration_ms=duration, tokens_attempted=cycle.tokens, error=reason,
                                             next_action="none: the result is discarded"))

    def retry_cycle(self, cycle: Cycle, fail: Callable[[ModelResultArrived], None],
                    ask: Callable[[Cycle], None]) -> None:
        """A cycle's deadline passed without a result (e.g. a model worker crashed): ``ask`` again, or ``fail`` it
        after the last attempt. An agent waiting on a blocking cycle is not made to wait for another attempt: the
        cycle fails over to the offline model at once."""
        if cycle.attempt >= self.limits.max_cycle_attempts or (cycle.blocking and not cycle.fallback):
            fail(ModelResultArrived(cycle_id=cycle.id, attempt=cycle.attempt, operation=cycle.operation, ok=False,
                                    error=f"no result after {cycle.attempt} attempts", error_kind="timeout"))
            return
        again = replace(cycle, attempt=cycle.attempt + 1, deadline_at=self.deadline(cycle.blocking))
        self.state.cycles = [again if c.id == cycle.id else c for c in self.state.cycles]
        self.schedule(f"deadline:{cycle.id}", again.deadline_at)
        ask(again)

    def schedule(self, timer: str, due_at: int) -> None:
        """The state holds its timers; the host hands it to the runner's timers when it writes it."""
        self.state.timers[timer] = due_at

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
        return pending_tokens(self.state, self.accountant.conversation_overhead)

    def message_threshold(self) -> int:
        return self.config.message_threshold(self.state.log_tokens)

    def marker_config(self) -> MarkerConfig:
        return MarkerConfig(message_tokens=self.message_threshold(),
                            observation_tokens=self.config.observation_tokens,
                            scope=self.config.scope, activate_after_idle=self.config.observation_idle)

    def iso_now(self) -> str:
        return iso(self.now)

    @property
    def expire_before(self) -> int | None:
        """The retention cutoff now: what is older is past the record's window (None: no window)."""
        return cutoff(self.now, self.config.retention_ms)

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

    def resend_all_threads(self) -> None:
        self.resent.update(self.state.threads)

    # -- context -------------------------------------------------------------------------------------------------

    def publish_owed(self) -> None:
        """Publish the contexts owed, unless a blocking cycle holds them back (they stay owed in the state), and
        send again the ones to resend.

        A context sent again keeps its version and takes no id: an input read again (at-least-once delivery)
        leaves the state as it found it, so a record replayed from any point after a crash numbers its contexts,
        cycles and segments as the first time, and one version of a thread's context is one content. (Were a
        replay to number anew, a context read again from an older state would reuse the version the lost one
        was published under, with other content, and an agent that keeps the newest version would take it.)"""
        state = self.state
        if state.blocking_cycle() is not None:
            # held back; when the cycle ends every thread's context is published
            state.owed_threads = sorted(set(state.owed_threads) | self.owed)
            self.owed.clear()
            self.resent.clear()
            return
        owed = self.owed | set(state.owed_threads)
        state.owed_threads = []
        for thread_id in sorted(owed):
            if thread_id in state.threads:
                self._publish(thread_id)
        for thread_id in sorted(self.resent - owed):
            if thread_id in state.threads and state.context_version:
                self.add(PublishContext(context_spec(state, thread_id, self.config, state.context_version, self.now)))
        self.owed.clear()
        self.resent.clear()

    def _publish(self, thread_id: str) -> None:
        self.state.context_version += 1
        spec = context_spec(self.state, thread_id, self.config, self.state.context_version, self.now)
        self.add(PublishContext(spec))
        if spec.observation_limit is not None and spec.observation_tokens > spec.observation_limit:
            # nothing holds the context back and the log is over its bound (the reflection meant to bring it under
            # failed, or timed out): the renderer condenses it (runtime/effects.py); say so
            self.emit(CondensationEvent(record_id=self.record_id, thread_id=thread_id, cycle_id=None,
                                        condensed_at=self.iso_now(), reason="context_over_bound",
                                        tokens_before=spec.observation_tokens,
                                        target_tokens=spec.observation_limit))
        self.emit(self.status(thread_id))

    def status(self, thread_id: str) -> StatusEvent:
        return status_event(self.state, thread_id, self.config, self.accountant.conversation_overhead)
