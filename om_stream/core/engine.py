"""``decide(state, input, now, config, accountant) -> Decision(state, commands)``: the only place OM rules run.

Pure: no I/O, no clock (``now`` is an argument, epoch ms), ids derived from the record and its counters, so
replaying the same inputs from the same state yields the same commands. The input state is never mutated.
"""

from __future__ import annotations

from typing import NamedTuple

from om_stream.core import expiry, intake, observation, progress, reflection
from om_stream.core.commands import ClearStored, Command, PersistRetention, RejectInput
from om_stream.core.config import ResolvedConfig
from om_stream.core.inputs import (
    ClearRecord,
    ExpiryDue,
    Input,
    MessageAppended,
    ModelResultArrived,
    ObserveNow,
    OverrideThresholds,
    ReflectNow,
    ReportProgress,
    RestoreRecord,
    TimerFired,
)
from om_stream.core.restore import restore_record
from om_stream.core.retention import DAY_MS, MAX_RETENTION_DAYS, cutoff
from om_stream.core.state import RecordState, ThreadState
from om_stream.core.step import EngineLimits, Step
from om_stream.core.tokens import TokenAccountant
from om_stream.core.ttl import actor_cache_retention
from om_stream.errors import ConfigError

__all__ = ["Decision", "decide", "new_record", "record_config", "record_key", "retention_cutoff"]

_DEFAULT_LIMITS = EngineLimits()
_config_cache: dict[tuple[int, int | None, int | None, int | None], tuple[ResolvedConfig, ResolvedConfig]] = {}


class Decision(NamedTuple):
    state: RecordState
    commands: list[Command]


def record_key(scope: str, thread_id: str, resource_id: str) -> str:
    """Thread scope keys records by thread; resource scope by resource (all its threads share one log)."""
    return resource_id if scope == "resource" else thread_id


def new_record(key: str, scope: str, resource_id: str) -> RecordState:
    return RecordState(key=key, scope=scope, resource_id=resource_id)  # type: ignore[arg-type]


def record_config(config: ResolvedConfig, state: RecordState) -> ResolvedConfig:
    """The record's configuration: the deployment's, with the record's overrides (validated when set): its
    thresholds, and its retention window when shorter than the deployment's (``core.expiry``)."""
    days = state.override_retention_days
    if state.override_message_tokens is None and state.override_observation_tokens is None and days is None:
        return config
    key = (id(config), state.override_message_tokens, state.override_observation_tokens, days)
    cached = _config_cache.get(key)
    if cached is None or cached[0] is not config:
        if len(_config_cache) > 256:
            _config_cache.clear()
        resolved = config.with_overrides(state.override_message_tokens, state.override_observation_tokens)
        if days is not None and (config.retention_ms is None or days * DAY_MS < config.retention_ms):
            resolved = resolved.with_retention(days)
        cached = _config_cache[key] = (config, resolved)
    return cached[1]


def retention_cutoff(config: ResolvedConfig, state: RecordState, now_ms: int) -> int | None:
    """The record's retention cutoff at ``now_ms`` (None: it keeps everything); what the host reads a purge by."""
    return cutoff(now_ms, record_config(config, state).retention_ms)


def decide(state: RecordState, event: Input, now: int, config: ResolvedConfig, accountant: TokenAccountant,
           limits: EngineLimits = _DEFAULT_LIMITS) -> Decision:
    if isinstance(event, ReportProgress):  # a question: answered, and the record left as it is
        return Decision(state, [progress.answer(state, event)])
    step = Step(state.clone(), now, record_config(config, state), accountant, limits, base=config)
    if isinstance(event, RestoreRecord):  # the state another deployment held: settled there, not settled again
        restore_record(step, event, lambda restored: record_config(config, restored))
        return Decision(step.state, _ordered(step.commands))
    expiry.drop_expired(step)
    if isinstance(event, MessageAppended):
        _on_message(step, event)
    elif isinstance(event, ModelResultArrived):
        _on_model_result(step, event)
    elif isinstance(event, TimerFired):
        _on_timer(step, event)
    elif isinstance(event, ObserveNow):
        _on_observe(step, event)
    elif isinstance(event, ReflectNow):
        if not step.config.enabled:
            step.add(RejectInput(state.key, "reflection_unavailable", "observational memory is off"))
        elif not reflection.start_manual_reflection(step, event.guidance):
            step.add(RejectInput(state.key, "reflection_unavailable",
                                 "nothing to reflect, or a reflection is already being committed"))
    elif isinstance(event, OverrideThresholds):
        _on_override(step, event)
    elif isinstance(event, ClearRecord):
        _on_clear(step, event)
    elif isinstance(event, ExpiryDue):
        expiry.purge(step, event)
    _settle(step)
    progress.report_changes(step, state)
    return Decision(step.state, _ordered(step.commands))


def _ordered(commands: list[Command]) -> list[Command]:
    """Store writes first, then publications (stable within each phase)."""
    return sorted(commands, key=lambda c: c.phase)


def _settle(step: Step) -> None:
    observation.evaluate(step)
    reflection.evaluate(step)
    expiry.keep_timer(step)
    step.publish_owed()


def _on_message(step: Step, event: MessageAppended) -> None:
    message = event.message
    state = step.state
    if message.resource_id != state.resource_id:
        if state.msg_seq or state.unobserved or state.log:
            # a thread belongs to one resource: a message naming another one must not read or join its memory
            step.add(RejectInput(state.key, "resource_mismatch",
                                 f"thread {message.thread_id!r} belongs to another resource than "
                                 f"{message.resource_id!r}; message {message.message_id!r} was not recorded"))
            return
        state.resource_id = message.resource_id  # a record made by a command before any message: adopt it
    if expiry.refuse_expired(step, message):
        return  # the fence: past the retention window already, it is not recorded
    if message.message_id in state.recent_ids or any(m.id == message.message_id for m in state.unobserved):
        # a replay (crash recovery) or an agent re-sending: nothing changes, but the agent still gets its context
        step.resent.add(message.thread_id)
        return
    if not step.config.enabled:
        intake.pass_through(step, message)
        if message.model:
            state.last_actor_model = message.model
        return
    previous_model = state.last_actor_model
    if message.role == "user":
        observation.check_idle_triggers(step, message)
    intake.append_message(step, message)
    if message.model:
        state.last_actor_model = message.model
    state.last_actor_cache_retention = actor_cache_retention(message, state.last_actor_cache_retention)
    reflection.evaluate(step, idle_check=message.role == "user", previous_model=previous_model,
                        current_model=message.model)
    if message.role == "assistant" and not message.tool_call_ids():
        observation.buffer_on_idle(step)


def _on_model_result(step: Step, event: ModelResultArrived) -> None:
    cycle = step.state.cycle(event.cycle_id)
    if cycle is None or cycle.operation != event.operation or event.attempt > cycle.attempt:
        # late, duplicate or cleared: the cycle was already resolved, maybe by this very result, read again after
        # a crash that kept the state it made and lost what it published. As for a message taken in twice, its
        # threads get their contexts again (an agent may be waiting for the one this result released)
        step.resend_all_threads()
        return
    if cycle.operation == "observation":
        observation.on_result(step, event, cycle)
    else:
        reflection.on_result(step, event, cycle)


def _on_timer(step: Step, event: TimerFired) -> None:
    state = step.state
    if event.due_at is not None and state.timers.get(event.timer) != event.due_at:
        # a schedule the record no longer holds: this firing was taken in already (it is read again after a crash)
        # or the timer was moved since. It must not take the newer schedule with it (a cycle's next deadline would
        # be lost); what it published may have been lost with the crash, so the threads get their contexts again
        step.resend_all_threads()
        return
    due = state.timers.pop(event.timer, None)
    kind, _, ref = event.timer.partition(":")
    if kind == "resend":
        # the runtime lost track of this call (a worker restarted, partitions moved): ask again, same request id;
        # if the first answer still comes, the second is ignored
        cycle = state.cycle(ref)
        if cycle is not None:
            (observation.request_observation if cycle.operation == "observation"
             else reflection.request_reflection)(step, cycle)
    elif kind == "deadline":
        cycle = state.cycle(ref)
        if cycle is not None and (due is None or step.now >= cycle.deadline_at):
            (observation.retry_cycle if cycle.operation == "observation" else reflection.retry_cycle)(step, cycle)
    elif event.timer == "idle:observation":
        observation.check_idle_triggers(step, None)
    elif event.timer == "idle:reflection":
        reflection.evaluate(step, idle_check=True)
    elif event.timer == "retry:buffer":
        state.buffer_retry_at = None
    elif event.timer == "retry:reflection":
        reflection.release_hold(step)
    elif event.timer == "retry:observation" and state.manual_observe_pending:
        observation.start_manual_observation(step)


def _on_observe(step: Step, event: ObserveNow) -> None:
    """Manual observe(): as the reference's, it observes only once the unobserved messages reach the message
    threshold (below it: nothing, and no Observer call); ``force`` observes now whatever the threshold. With OM
    off nothing is ever observed."""
    if not step.config.enabled:
        return
    if event.force or step.pending() >= step.message_threshold():
        observation.start_manual_observation(step)
        step.owe_all_threads()


def _on_override(step: Step, event: OverrideThresholds) -> None:
    """Overrides merge field by field into the record's (``replace``: they become exactly these). A record no
    message reached is no thread's memory: the override is refused rather than making one. A retention window may
    only be shorter than the deployment's: the operator's promise is a ceiling no agent can lift."""
    state = step.state
    if not state.holds_conversation:
        step.add(RejectInput(state.key, "unknown_thread",
                             f"no message reached thread {event.thread_id or state.key!r}: there is no memory to "
                             f"override (send its messages first)"))
        return
    message_tokens = (event.message_tokens if event.replace or event.message_tokens is not None
                      else state.override_message_tokens)
    observation_tokens = (event.observation_tokens if event.replace or event.observation_tokens is not None
                          else state.override_observation_tokens)
    retention = (event.retention_days if event.replace or event.retention_days is not None
                 else state.override_retention_days)
    try:
        step.base.with_overrides(message_tokens, observation_tokens)
        _check_retention(step.base, retention)
    except ConfigError as exc:
        step.add(RejectInput(state.key, "invalid_override", str(exc)))
        return
    state.override_message_tokens = message_tokens
    state.override_observation_tokens = observation_tokens
    if retention != state.override_retention_days:
        state.override_retention_days = retention
        step.add(PersistRetention(state.key, state.resource_id, retention))
        step.cancel(expiry.PURGE_TIMER)  # set again at once: the next purge reads the new window
    step.config = record_config(step.base, state)
    step.owe_all_threads()


def _check_retention(base: ResolvedConfig, days: int | None) -> None:
    if days is None:
        return
    if isinstance(days, bool) or not 0 < days <= MAX_RETENTION_DAYS:
        raise ConfigError("retentionDays", f"override must be a whole number of days from 1 to "
                                           f"{MAX_RETENTION_DAYS}, got {days!r}")
    if base.retention_ms is not None and days * DAY_MS > base.retention_ms:
        raise ConfigError("retentionDays", f"this deployment keeps data at most {base.retention_ms // DAY_MS} days; "
                                           f"an override can only shorten that, not make it {days} days")


def _on_clear(step: Step, event: ClearRecord) -> None:
    """Forget what OM made of the conversation, not the conversation: the messages the record took in (handed
    over by the host from the content store) are unobserved again, and the thresholds apply to them at once as to
    any message (past blockAfter the context waits for them to be observed again: it stays bounded). Ids and
    message numbers keep counting up, so nothing of the cleared epoch is ever reused. A record no message reached
    has nothing to forget.

    A cycle still running is dropped with the record, but still ends: its start gets a failed event saying the
    record was cleared, and its result, when it comes, finds no cycle to resolve (it is discarded, silently)."""
    old = step.state
    if not old.holds_conversation:
        return
    fresh = new_record(old.key, old.scope, old.resource_id)
    fresh.epoch = old.epoch + 1
    fresh.context_version = old.context_version
    fresh.id_seq = old.id_seq
    fresh.msg_seq = old.msg_seq
    fresh.last_actor_model = old.last_actor_model
    fresh.last_actor_cache_retention = old.last_actor_cache_retention
    fresh.override_retention_days = old.override_retention_days  # a privacy promise, not an OM tuning: it stays
    fresh.timers = {t: due for t, due in old.timers.items() if t == expiry.PURGE_TIMER}
    # the store keeps a thread's extracted values and working memory through a clear: their date stays with them
    fresh.threads = {tid: ThreadState(tid, last_message_id=t.last_message_id, last_message_at=t.last_message_at,
                                     derived_from=t.derived_from) for tid, t in old.threads.items()}
    step.state = fresh
    step.add(ClearStored(old.key, fresh.epoch))
    for cycle in old.cycles:
        step.end_overtaken(cycle, "overtaken: the record was cleared before its result arrived")
    before = step.expire_before
    intake.restore_conversation(step, [stored for stored in event.conversation
                                            if stored.record_key == old.key and stored.seq <= old.msg_seq
                                            and (before is None or stored.message.created_at_ms >= before)])
    step.owe_all_threads()
