"""Reflection rules: when the Reflector condenses the observation log into a new generation.

* Background reflection starts at ``reflection.bufferActivation`` × observationTokens and condenses the log as it
  stands; at observationTokens the buffered reflection replaces exactly the segments it covered, keeping everything
  appended since.
* Without buffering (or past reflection.blockAfter with nothing buffered) the whole log is reflected
  synchronously: the context waits, and the offline model condenses if every configured model fails.
* An empty, degenerate or non-shrinking reflection is never committed. An answer still over target is condensed
  by the engine (``core.condensation``, in the cycle flow) and said so with ``data-om-condensation``.
* The bound: the log reaching ``reflection.blockAfter`` (the threshold, without background reflection) always
  starts a blocking reflection, so no context is published over it (one published anyway, after a timeout, is
  condensed as rendered).
* No churn: after a failed or unproductive attempt no automatic reflection with the configured Reflector runs until
  the log grows by a tenth of the threshold, doubled for each such attempt in a row (``_growth``), or a back-off
  timer expires after a failure; reaching the bound meanwhile reflects with the offline model, which condenses when
  it cannot do better.
* A reflection that climbed the compression ladder says so as the reference does: for each retry a failed event
  ("did not compress below threshold … retrying at level N") and a start event under a new cycle id; its end
  event carries the last id. In thread scope its hints (current task, suggested response) become the thread's, as
  an Observer's do.
* Buffered observation chunks are untouched by a reflection: they belong to the unobserved messages.
* ``reflection.extract`` values are written to the thread's metadata as soon as the reflection is kept: when it is
  committed, or when a background one is buffered (as a buffered observation's values are); a reflection that is
  overtaken or not kept writes none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from om_stream.core import expiry
from om_stream.core.commands import CommitGeneration, PersistSegment, RequestReflection
from om_stream.core.error_text import cut_error
from om_stream.core.events import (
    ActivationEvent,
    BufferingEndEvent,
    BufferingFailedEvent,
    CondensationEvent,
    ExtractionFailure,
    ObservationEndEvent,
    ObservationFailedEvent,
    ObservationStartEvent,
)
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.model_spec import model_name
from om_stream.core.observation import reported_values, store_extracted
from om_stream.core.state import BufferedReflection, Cycle, CycleKind, SegmentRef, Trigger
from om_stream.core.step import Step
from om_stream.core.ttl import resolve_idle_ms

__all__ = ["compression_start_level", "evaluate", "on_result", "retry_cycle", "start_manual_reflection"]

BACKGROUND_TARGET_RATIO = 0.75
HOLD_GROWTH_RATIO = 0.1
MAX_GROWTH_DOUBLINGS = 4


def compression_start_level(model: str) -> int:
    """gemini-2.5-flash needs firmer instructions to compress; other models start gently."""
    return 2 if "gemini-2.5-flash" in model else 1


def _threshold(step: Step) -> int:
    return step.state.override_observation_tokens or step.config.observation_tokens


def _growth(step: Step, unproductive: int) -> int:
    """How much the log must grow before the next automatic reflection: a tenth of the threshold, doubled for each
    reflection in a row whose answer had to be condensed, or that failed (at most 16 tenths). Reaching the bound
    meanwhile reflects with the offline model instead (``_start_bounded``), so the bound holds and the configured
    Reflector, which could not compress, is called less and less often (mastra-ai/mastra#14110 is the loop this
    prevents)."""
    factor = 2 ** min(max(0, unproductive - 1), MAX_GROWTH_DOUBLINGS) if unproductive else 1
    return max(1, round(_threshold(step) * HOLD_GROWTH_RATIO * factor))


def _held(step: Step) -> bool:
    hold = step.state.reflection_hold_tokens
    return hold is not None and step.state.log_tokens < hold


def evaluate(step: Step, *, idle_check: bool = False, previous_model: str | None = None,
             current_model: str | None = None) -> None:
    state, config = step.state, step.config
    if not config.enabled or not state.log:
        return
    if any(c.operation == "reflection" and c.kind != "buffer" for c in state.cycles):
        return
    threshold = _threshold(step)
    tokens = state.log_tokens
    buffering = state.in_flight("reflection", "buffer")
    if state.buffered_reflection is not None and state.buffered_reflection.generation != state.generation:
        state.buffered_reflection = None  # computed from a generation that no longer exists
    if state.buffered_reflection is not None:
        if tokens >= threshold:
            activate(step, "threshold")
        elif idle_check:
            _maybe_activate_early(step, previous_model, current_model)
        return
    ratio = config.reflection_buffer_activation
    if ratio is not None:
        if tokens >= threshold * ratio and not buffering and not _held(step):
            _start(step, "buffer", "async-buffer")
            buffering = state.in_flight("reflection", "buffer")
        block_after = config.reflection_block_after
        if block_after is not None and tokens >= block_after:
            if buffering:
                step.block_on(buffering[0])
            else:
                _start_bounded(step)
        return
    if tokens >= threshold:
        _start_bounded(step)


def _start_bounded(step: Step) -> None:
    """The log reached its bound: reflect now, whatever the back-off. While backing off, the offline model (which
    condenses when it cannot do better) reflects instead of the configured one: the bound holds without paying
    again for a model that just failed or could not compress; unless the offline cycle itself just failed, in
    which case the retry timer decides (contexts are condensed as rendered meanwhile)."""
    state = step.state
    if not _held(step):
        _start(step, "sync", "turn-sync")
    elif not state.offline_reflection_failed:
        _start(step, "sync", "turn-sync", offline=True)


def _maybe_activate_early(step: Step, previous_model: str | None, current_model: str | None) -> None:
    """reflection.activateAfterIdle / activateOnProviderChange: activate a buffered reflection below threshold,
    unless what it would replace is tiny next to what it leaves."""
    state, config = step.state, step.config
    buffered = state.buffered_reflection
    assert buffered is not None
    trigger: Literal["ttl", "provider_change"] | None = None
    if config.reflection_provider_change and previous_model and current_model and previous_model != current_model:
        trigger = "provider_change"
    idle = resolve_idle_ms(config.reflection_idle, state.last_actor_model, state.last_actor_cache_retention)
    if trigger is None and idle is not None and state.last_assistant_at is not None \
            and step.now - state.last_assistant_at >= idle:
        trigger = "ttl"
    if trigger is None:
        return
    tail = sum(s.tokens for s in state.log[buffered.covers:])
    if tail > buffered.tokens + sum(s.tokens for s in state.log[:buffered.covers]):
        return
    activate(step, trigger, previous_model=previous_model, current_model=current_model)


def _start(step: Step, kind: CycleKind, trigger: Trigger, *, guidance: str | None = None,
           offline: bool = False) -> None:
    state = step.state
    # Every reflection condenses the log as it stands when it starts. A background reflection starts when the log
    # crosses bufferActivation × threshold, so that is about that much; segments appended meanwhile are kept.
    covers = len(state.log)
    segments = state.log[:covers]
    tokens = sum(s.tokens for s in segments)
    thread_ids = tuple(dict.fromkeys(t for s in segments for t in s.thread_ids)) or (step.primary_thread(),)
    cycle = Cycle(id=step.new_id("rbuf" if kind == "buffer" else "refl"), kind=kind,
                  operation="reflection", trigger=trigger, attempt=1, started_at=step.now,
                  deadline_at=step.deadline(kind == "sync"), tokens=tokens, thread_ids=thread_ids,
                  generation=state.generation, covers=covers, blocking=kind == "sync", fallback=offline,
                  guidance=guidance)
    step.start_cycle(cycle)
    request_reflection(step, cycle)


def _target(step: Step, cycle: Cycle) -> int:
    """What the Reflector must come in under: the threshold, or for a background reflection three quarters of
    what it condenses; always less than its input."""
    target = round(cycle.tokens * BACKGROUND_TARGET_RATIO) if cycle.kind == "buffer" else _threshold(step)
    return min(target, max(1, cycle.tokens - 1))


def request_reflection(step: Step, cycle: Cycle) -> None:
    state = step.state
    level = 0 if cycle.kind == "manual" else compression_start_level(model_name(step.config.reflector_model))
    step.add(RequestReflection(
        record_key=state.key, request_id=f"{cycle.id}#{cycle.attempt}", cycle_id=cycle.id, attempt=cycle.attempt,
        kind=cycle.kind, trigger=cycle.trigger, resource_id=state.resource_id, thread_ids=cycle.thread_ids,
        generation=cycle.generation, segment_ids=tuple(s.id for s in state.log[:cycle.covers]),
        input_tokens=cycle.tokens, target_tokens=_target(step, cycle),
        compression_start_level=level, guidance=cycle.guidance, use_offline_model=cycle.fallback,
        deadline_at=cycle.deadline_at, epoch=state.epoch, expire_before=step.expire_before))


def start_manual_reflection(step: Step, guidance: str | None) -> bool:
    """Manual reflect(): condense the whole log now. Refused while another reflection is being committed."""
    state = step.state
    if not state.log or any(c.operation == "reflection" and c.kind != "buffer" for c in state.cycles):
        return False
    _start(step, "manual", "manual", guidance=guidance)
    return True


def activate(step: Step, trigger: Literal["threshold", "ttl", "provider_change", "manual"], *,
             previous_model: str | None = None,
             current_model: str | None = None) -> None:
    state = step.state
    buffered = state.buffered_reflection
    assert buffered is not None
    state.buffered_reflection = None
    input_tokens = sum(s.tokens for s in state.log[:buffered.covers])
    _commit(step, buffered.id, buffered.tokens, buffered.covers, buffered.dated_from)
    step.emit(ActivationEvent(
        record_id=step.record_id, thread_id=step.primary_thread(), cycle_id=buffered.cycle_id,
        operation_type="reflection", activated_at=step.iso_now(), chunks_activated=1, tokens_activated=input_tokens,
        observation_tokens=state.log_tokens, messages_activated=0, generation_count=state.generation,
        observations="", triggered_by=trigger, buffer_cycle_ids=[buffered.cycle_id],
        last_activity_at=state.last_assistant_at if trigger == "ttl" else None,
        ttl_expired_ms=(step.now - state.last_assistant_at
                        if trigger == "ttl" and state.last_assistant_at is not None else None),
        previous_model=previous_model, current_model=current_model, config=step.marker_config()),
        observations_from=(buffered.id,))


def _commit(step: Step, reflection_id: str, tokens: int, covers: int, dated_from: int) -> None:
    """Start a new generation: the reflection replaces exactly the segments it covered; later ones are kept."""
    state = step.state
    covered, kept = state.log[:covers], state.log[covers:]
    reflection = SegmentRef(id=reflection_id, tokens=tokens, kind="reflection",
                            boundary_at=covered[-1].boundary_at, first_message_id=covered[0].first_message_id,
                            last_message_id=covered[-1].last_message_id,
                            message_count=sum(s.message_count for s in covered),
                            thread_ids=tuple(dict.fromkeys(t for s in covered for t in s.thread_ids)),
                            dated_from=dated_from)
    state.log = [reflection, *kept]
    state.log_tokens = sum(s.tokens for s in state.log)
    state.generation += 1
    state.reflection_failures = 0
    state.offline_reflection_failed = False
    # a reflection that could not get under the threshold is kept (it is smaller), but does not re-run at once; after
    # answers the engine had to condense, the configured Reflector waits longer each time (see _growth)
    hold = state.log_tokens + _growth(step, 0) if state.log_tokens >= _threshold(step) else None
    if state.unproductive_reflections:
        hold = max(hold or 0, state.log_tokens + _growth(step, state.unproductive_reflections))
    state.reflection_hold_tokens = hold
    step.add(CommitGeneration(record_key=state.key, generation=state.generation,
                              segment_ids=tuple(s.id for s in state.log), reflection_id=reflection_id,
                              replaced_segment_ids=tuple(s.id for s in covered),
                              observation_tokens=state.log_tokens))
    step.owe_all_threads()


def on_result(step: Step, result: ModelResultArrived, cycle: Cycle) -> None:
    state = step.state
    step.drop_cycle(cycle.id)
    text = result.observations.strip()
    stale = cycle.generation != state.generation or cycle.covers > len(state.log)
    if stale:  # another reflection replaced these segments meanwhile; this one describes a log that is gone
        step.end_overtaken(cycle, f"overtaken: generation {state.generation} was committed before the result of "
                                  f"this reflection of generation {cycle.generation} arrived")
        return
    cycle = _announce_retries(step, cycle, result)
    boundary = state.log[cycle.covers - 1].boundary_at
    source_from = min(s.dated_from or s.boundary_at for s in state.log[:cycle.covers])  # what it was written from
    text = expiry.cut_result(step, text, boundary)  # entries that passed the retention window while it ran
    tokens = step.accountant.count_text(text) if text else 0
    if not result.ok or not text or tokens >= cycle.tokens:
        reason = result.error or ("the Reflector returned nothing" if not text else
                                  f"the reflection ({tokens} tokens) is not smaller than its input "
                                  f"({cycle.tokens} tokens)")
        _on_failure(step, cycle, cut_error(reason), text or None)
        return
    main = step.primary_thread(cycle.thread_ids)
    failures = [ExtractionFailure(slug=s, error=e) for s, e in result.extraction_failures] or None
    if not cycle.fallback:  # the configured Reflector's record: did its answer come in under target on its own?
        state.unproductive_reflections = state.unproductive_reflections + 1 if result.condensed else 0
    if result.condensed:
        step.emit(CondensationEvent(
            record_id=step.record_id, thread_id=main, cycle_id=cycle.id, condensed_at=step.iso_now(),
            reason=result.condensed, tokens_before=result.condensed_from_tokens, tokens_after=tokens,
            target_tokens=_target(step, cycle), observations_folded=result.folded_observations))
    segment_id = step.new_id("seg")
    step.add(PersistSegment(record_key=state.key, segment_id=segment_id, kind="reflection",
                            status="buffered" if cycle.kind == "buffer" else "active", generation=state.generation,
                            text=text, tokens=tokens, cycle_id=cycle.id, thread_ids=cycle.thread_ids,
                            first_message_id=state.log[0].first_message_id,
                            last_message_id=state.log[cycle.covers - 1].last_message_id, message_ids=(),
                            message_tokens=0, boundary_at=state.log[cycle.covers - 1].boundary_at,
                            created_at=step.now, ranges=()))
    dated = expiry.dated_from(text, boundary)
    expiry.note(step, dated)
    if cycle.kind == "buffer":
        state.buffered_reflection = BufferedReflection(id=segment_id, cycle_id=cycle.id, generation=state.generation,
                                                       covers=cycle.covers, input_tokens=cycle.tokens,
                                                       tokens=tokens, buffered_at=step.now, dated_from=dated)
        store_extracted(step, main, cycle.id, result, since=source_from)
        step.emit(BufferingEndEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                    operation_type="reflection", completed_at=step.iso_now(),
                                    duration_ms=max(0, step.now - cycle.started_at), tokens_buffered=cycle.tokens,
                                    buffered_tokens=tokens, observations=text,
                                    extracted_values=reported_values(result),
                                    extraction_failures=failures))
        if cycle.blocking and state.log_tokens >= _threshold(step):
            activate(step, "threshold")
        return
    _commit(step, segment_id, tokens, cycle.covers, dated)
    # the hints the Reflector gives become the thread's, as an Observer's do: the documented built-in values are
    # mirrored into the thread's metadata whichever phase found them (a background reflection is not asked for any).
    # A resource's log mixes its threads' sections, so no one thread's hints are read from it.
    own = step.config.scope == "thread"
    store_extracted(step, main, cycle.id, result, since=source_from,
                    current_task=result.current_task if own else None,
                    suggested_response=result.suggested_response if own else None)
    step.emit(ObservationEndEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                  operation_type="reflection", completed_at=step.iso_now(),
                                  duration_ms=max(0, step.now - cycle.started_at), tokens_observed=cycle.tokens,
                                  observation_tokens=state.log_tokens, observations=text,
                                  suggested_response=result.suggested_response,
                                  extracted_values=reported_values(result), extraction_failures=failures,
                                  fallback_model=result.fallback_model or ("offline" if cycle.fallback else None)))


def _announce_retries(step: Step, cycle: Cycle, result: ModelResultArrived) -> Cycle:
    """Each retry of the compression ladder, as the reference streams it: a failed event for the attempt that did
    not get under target, naming the level asked next, then a start event under a new cycle id (the cycle's later
    events carry the last one). The attempts ran in one call of a model worker, so they are told when its result
    arrives. A background reflection's ladder is not told: it has no one waiting on it."""
    if cycle.kind == "buffer" or not result.attempts:
        return cycle
    main = step.primary_thread(cycle.thread_ids)
    target = _target(step, cycle)
    current = cycle
    for attempt in result.attempts:
        came_to = (f"{attempt.tokens} tokens against a target of {target}" if attempt.tokens
                   else "an empty or degenerate answer")
        step.emit(ObservationFailedEvent(
            record_id=step.record_id, thread_id=main, cycle_id=current.id, operation_type="reflection",
            failed_at=step.iso_now(), duration_ms=max(0, step.now - cycle.started_at), tokens_attempted=cycle.tokens,
            error=f"did not compress below threshold at level {attempt.level} ({came_to}); retrying at level "
                  f"{attempt.next_level}",
            next_action=f"retry at compression level {attempt.next_level}"))
        current = replace(current, id=f"{cycle.id}-L{attempt.next_level}")
        step.emit(ObservationStartEvent(
            record_id=step.record_id, thread_id=main, cycle_id=current.id, operation_type="reflection",
            started_at=step.iso_now(), tokens_to_observe=cycle.tokens, thread_ids=list(cycle.thread_ids),
            config=step.marker_config()))
    return current


def _on_failure(step: Step, cycle: Cycle, error: str, partial: str | None) -> None:
    state = step.state
    main = step.primary_thread(cycle.thread_ids)
    state.reflection_failures += 1
    state.offline_reflection_failed = cycle.fallback
    if not cycle.fallback:
        state.unproductive_reflections += 1
    state.reflection_hold_tokens = state.log_tokens + _growth(step, state.unproductive_reflections)
    if state.reflection_failures <= step.limits.max_reflection_failures:
        step.schedule("retry:reflection", step.now + step.backoff(state.reflection_failures))
    if cycle.kind == "buffer":
        step.emit(BufferingFailedEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                       operation_type="reflection", failed_at=step.iso_now(),
                                       duration_ms=max(0, step.now - cycle.started_at), tokens_attempted=cycle.tokens,
                                       error=error, observations=partial))
        return
    offline = cycle.kind == "sync" and not cycle.fallback
    step.emit(ObservationFailedEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                     operation_type="reflection", failed_at=step.iso_now(),
                                     duration_ms=max(0, step.now - cycle.started_at), tokens_attempted=cycle.tokens,
                                     error=error, observations=partial,
                                     next_action="reflect with the offline model" if offline else "retry later"))
    if offline:
        _start(step, "sync", "turn-sync", offline=True)
    step.owe_all_threads()


def release_hold(step: Step) -> None:
    """The back-off after a failed reflection expired: automatic reflection may try again."""
    step.state.reflection_hold_tokens = None
    step.state.offline_reflection_failed = False


def retry_cycle(step: Step, cycle: Cycle) -> None:
    step.retry_cycle(cycle, lambda failed: on_result(step, failed, cycle),
                     lambda again: request_reflection(step, again))
