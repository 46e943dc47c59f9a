"""Observation rules: background buffering, activation, synchronous observation, results (taking messages in is
``core.intake``).

The promises kept here (each has a test):
* a context never holds more unobserved message tokens than the limit (blockAfter, or messageTokens without
  buffering) plus the message that just arrived: past the limit the context waits for a synchronous observation,
  and when every configured model fails the offline model observes instead. The one exception is a turn waiting
  for a tool result: the agent's model is not called before the result arrives, so (as in the reference) no
  synchronous observation runs until it does, and the context is not held back meanwhile;
* once the threshold is crossed with chunks buffered, at least one chunk is activated;
* every buffering cycle ends with ``buffering-end`` or ``buffering-failed``, also when its messages were observed
  another way before its result arrived;
* every message is observed exactly once: buffered chunks cover disjoint runs of the oldest unobserved messages,
  a synchronous observation covers only messages no chunk or buffering cycle covers;
* a cycle never separates a tool call from its result (the agent's context stays valid for providers);
* the current turn's user message stays in the raw context even once observed, until the agent's reply answers it;
* activation keeps the continuation hints unless the activated chunk brings new ones;
* the observation cursor never moves backwards.
"""

from __future__ import annotations

from typing import Literal

from om_stream.core import expiry
from om_stream.core.commands import (
    ActivateChunks,
    IndexForRecall,
    PersistSegment,
    PersistThreadMetadata,
    RequestObservation,
    ThreadPrior,
)
from om_stream.core.error_text import cut_error
from om_stream.core.events import (
    ActivationEvent,
    BufferingEndEvent,
    BufferingFailedEvent,
    ExtractionFailure,
    ObservationEndEvent,
    ObservationFailedEvent,
    ThreadUpdateEvent,
)
from om_stream.core.extractors import WORKING_MEMORY_SLUG
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.labels import thread_label
from om_stream.core.messages import Message
from om_stream.core.recall.groups import observation_ranges
from om_stream.core.state import ChunkRef, Cycle, CycleKind, MessageRef, SegmentRef, ThreadState, Trigger
from om_stream.core.step import Step
from om_stream.core.thresholds import minimum_remaining, select_chunks, should_trigger_buffer, sync_cut
from om_stream.core.ttl import resolve_idle_ms

__all__ = ["activate_chunks", "awaiting_tool_results", "evaluate", "on_result", "reported_values",
           "start_manual_observation", "store_extracted"]

OFFLINE_MODEL = "offline"
ActivationTrigger = Literal["threshold", "ttl", "provider_change", "manual"]


# -- the thresholds ----------------------------------------------------------------------------------------------

def evaluate(step: Step) -> None:
    """Apply the message thresholds after any change: activate, buffer, or observe synchronously."""
    state, config = step.state, step.config
    if not config.enabled or any(c.operation == "observation" and c.kind != "buffer" for c in state.cycles):
        return
    threshold = step.message_threshold()
    if state.buffered and step.pending() >= threshold:
        activate_chunks(step, "threshold")
    pending = step.pending()
    if pending >= config.message_limit or (pending >= threshold and not config.async_buffering):
        if state.buffered:
            activate_chunks(step, "threshold", everything=True)
        waiting = {tid for tid, thread in state.threads.items() if awaiting_tool_results(thread)}
        if not waiting or state.scope == "resource":
            buffering = state.in_flight("observation", "buffer")
            if buffering:
                # the context waits for the chunk already being computed rather than observing its messages twice
                step.block_on(buffering[0])
                return
            _start_sync(step, "sync", "turn-sync", waiting=waiting)
            return
        # a tool call of this turn is waiting for its result: the observation runs once the result arrives
    if config.async_buffering:
        _maybe_buffer(step, threshold)


def awaiting_tool_results(thread: ThreadState) -> bool:
    """The thread's current turn made a tool call whose result has not arrived yet.

    The agent calls its model again only once the result is in, so a synchronous observation waits for it (the
    reference does not observe while a call is pending). A call left open by an earlier turn does not count: the
    turn that made it is over.
    """
    if not thread.open_tool_calls:
        return False
    turn = thread.turn_message
    return turn is None or turn.safe_cut  # no call was open when this turn began: every open call is its own


def check_idle_triggers(step: Step, message: Message | None) -> None:
    """activateAfterIdle / activateOnProviderChange: activate buffered chunks below the threshold."""
    state, config = step.state, step.config
    if not state.buffered:
        return
    previous_model = state.last_actor_model
    if message is not None and message.model and previous_model and config.observation_provider_change \
            and _model_changed(previous_model, message.model):
        activate_chunks(step, "provider_change", previous_model=previous_model, current_model=message.model)
        return
    idle = resolve_idle_ms(config.observation_idle, previous_model, state.last_actor_cache_retention)
    if idle is not None and state.last_assistant_at is not None and step.now - state.last_assistant_at >= idle:
        activate_chunks(step, "ttl", last_activity_at=state.last_assistant_at,
                        idle_ms=step.now - state.last_assistant_at, ttl_ms=idle)


def _model_changed(previous: str, current: str) -> bool:
    prev_provider, _, prev_model = previous.rpartition("/")
    cur_provider, _, cur_model = current.rpartition("/")
    if prev_model != cur_model:
        return True
    return bool(prev_provider and cur_provider and prev_provider.split(".")[0] != cur_provider.split(".")[0])


def _unbuffered(step: Step) -> list[MessageRef]:
    """Unobserved messages after every buffered chunk and buffering cycle, up to the last safe boundary."""
    state = step.state
    after = max([c.last_seq for c in state.buffered] + [c.last_seq for c in state.cycles
                                                         if c.operation == "observation"], default=-1)
    candidates = [m for m in state.unobserved if m.seq > after]
    cut = max((i for i, m in enumerate(candidates, start=1) if m.safe_cut), default=0)
    return candidates[:cut]


def _maybe_buffer(step: Step, threshold: int, *, idle: bool = False) -> None:
    state, config = step.state, step.config
    buffer_tokens = config.buffer_tokens
    if buffer_tokens is None or state.in_flight("observation"):
        return
    if state.buffer_retry_at is not None and step.now < state.buffer_retry_at:
        return
    pending = step.pending()
    candidates = _unbuffered(step)
    tokens = sum(m.tokens for m in candidates)
    if not candidates or (not idle and tokens < buffer_tokens / 2):
        return
    in_band = pending >= threshold  # between the threshold and blockAfter only buffering and activation run
    if not (idle or in_band or should_trigger_buffer(pending, state.last_buffered_at_tokens, buffer_tokens,
                                                     threshold)):
        return
    state.last_buffered_at_tokens = pending
    _start_cycle(step, "buffer", "async-buffer", candidates)


def buffer_on_idle(step: Step) -> None:
    """observation.bufferOnIdle: the agent's turn ended; buffer what is pending without waiting for a threshold."""
    if step.config.buffer_on_idle:
        _maybe_buffer(step, step.message_threshold(), idle=True)


def _start_sync(step: Step, kind: CycleKind, trigger: Trigger, *, offline: bool = False,
                waiting: set[str] | frozenset[str] = frozenset()) -> Cycle | None:
    """A blocking observation of the unobserved messages (in resource scope, of the threads not ``waiting`` for a
    tool result)."""
    state = step.state
    if state.scope == "resource":
        return _start_resource_sync(step, kind, trigger, offline=offline, waiting=waiting)
    keep = minimum_remaining(step.config.retention_floor) if kind == "sync" else 0
    count = sync_cut(state.unobserved, keep)
    if count == 0:
        return None
    return _start_cycle(step, kind, trigger, state.unobserved[:count], offline=offline)


def _start_resource_sync(step: Step, kind: CycleKind, trigger: Trigger, *, offline: bool,
                         waiting: set[str] | frozenset[str]) -> Cycle | None:
    """Resource scope: the largest threads first until the threshold is covered, in batches of whole threads."""
    state, config = step.state, step.config
    by_thread: dict[str, list[MessageRef]] = {}
    for message in state.unobserved:
        if message.thread_id not in waiting:
            by_thread.setdefault(message.thread_id, []).append(message)
    observable: dict[str, list[MessageRef]] = {}
    for thread_id, messages in by_thread.items():
        count = sync_cut(messages, 0)
        if count:
            observable[thread_id] = messages[:count]
    ranked = sorted(observable.items(), key=lambda item: (-sum(m.tokens for m in item[1]), item[1][0].seq))
    chosen: list[tuple[str, list[MessageRef]]] = []
    total = 0
    for thread_id, messages in ranked:
        if kind == "sync" and total >= step.message_threshold():
            break
        chosen.append((thread_id, messages))
        total += sum(m.tokens for m in messages)
    chosen.sort(key=lambda item: item[1][0].seq)
    batches: list[list[MessageRef]] = []
    batch_tokens = 0
    for _thread_id, messages in chosen:
        tokens = sum(m.tokens for m in messages)
        if not batches or batch_tokens + tokens > config.max_tokens_per_batch:
            batches.append([])
            batch_tokens = 0
        batches[-1].extend(messages)
        batch_tokens += tokens
    first: Cycle | None = None
    for batch in batches:
        cycle = _start_cycle(step, kind, trigger, sorted(batch, key=lambda m: m.seq), offline=offline)
        first = first or cycle
    return first


def _start_cycle(step: Step, kind: CycleKind, trigger: Trigger, messages: list[MessageRef], *,
                 offline: bool = False) -> Cycle:
    tokens = sum(m.tokens for m in messages)
    thread_ids = tuple(dict.fromkeys(m.thread_id for m in messages))
    cycle = Cycle(id=step.new_id("obs" if kind != "buffer" else "buf"), kind=kind,
                  operation="observation", trigger=trigger, attempt=1,
                  started_at=step.now, deadline_at=step.deadline(kind == "sync"), tokens=tokens,
                  message_ids=tuple(m.id for m in messages), last_seq=messages[-1].seq, thread_ids=thread_ids,
                  blocking=kind == "sync", fallback=offline)
    step.start_cycle(cycle)
    request_observation(step, cycle)
    return cycle


def request_observation(step: Step, cycle: Cycle) -> None:
    state = step.state
    thread = step.thread(step.primary_thread(cycle.thread_ids))
    step.add(RequestObservation(
        record_key=state.key, request_id=f"{cycle.id}#{cycle.attempt}", cycle_id=cycle.id, attempt=cycle.attempt,
        kind=cycle.kind, trigger=cycle.trigger, resource_id=state.resource_id, thread_ids=cycle.thread_ids,
        message_ids=cycle.message_ids, message_tokens=cycle.tokens,
        previous_segment_ids=tuple(s.id for s in state.log),
        buffered_segment_ids=tuple(c.id for c in state.buffered) if cycle.kind == "buffer" else (),
        prior_current_task=thread.current_task, prior_suggested_response=thread.suggested_response,
        prior_thread_title=thread.title, want_hints=step.config.observation_hints,
        use_offline_model=cycle.fallback, deadline_at=cycle.deadline_at,
        thread_priors=_thread_priors(step, cycle.thread_ids) if state.scope == "resource" else (),
        epoch=state.epoch, expire_before=step.expire_before))


def _thread_priors(step: Step, thread_ids: tuple[str, ...]) -> tuple[ThreadPrior, ...]:
    priors = []
    for thread_id in thread_ids:
        thread = step.thread(thread_id)
        priors.append(ThreadPrior(thread_id=thread_id, current_task=thread.current_task,
                                  suggested_response=thread.suggested_response, title=thread.title))
    return tuple(priors)


def start_manual_observation(step: Step) -> None:
    """Manual observe(): everything buffered is activated and the rest observed now, whatever the thresholds."""
    state = step.state
    if state.buffered:
        activate_chunks(step, "manual", everything=True)
    if state.in_flight("observation"):
        state.manual_observe_pending = True
        return
    state.manual_observe_pending = False
    _start_sync(step, "manual", "manual")


# -- activation ----------------------------------------------------------------------------------------------------

def activate_chunks(step: Step, trigger: ActivationTrigger, *, everything: bool = False,
                    previous_model: str | None = None,
                    current_model: str | None = None, last_activity_at: int | None = None,
                    idle_ms: int | None = None, ttl_ms: int | None = None) -> None:
    """Move leading buffered chunks into the log, and report each under the ``cycleId`` that buffered it.

    ``idle_ms`` (ttl trigger): time since the last activity; ``ttl_ms``: the idle time that was resolved for it.
    """
    state, config = step.state, step.config
    if not state.buffered:
        return
    if everything or trigger in ("manual",):
        count = len(state.buffered)
    else:
        count = select_chunks([c.message_tokens for c in state.buffered], step.pending(),
                              config.retention_floor, config.block_after).count
    if count == 0:
        return
    chunks, state.buffered = state.buffered[:count], state.buffered[count:]
    last_seq = chunks[-1].last_seq
    removed = [m for m in state.unobserved if m.seq <= last_seq]
    _remove_observed(step, removed)
    position = len(state.log)
    for chunk in chunks:
        state.log.append(SegmentRef(id=chunk.id, tokens=chunk.tokens, kind="observation",
                                    boundary_at=chunk.last_message_at, first_message_id=chunk.first_message_id,
                                    last_message_id=chunk.last_message_id, message_count=chunk.message_count,
                                    thread_ids=chunk.thread_ids, dated_from=chunk.dated_from))
        state.log_tokens += chunk.tokens
    step.add(ActivateChunks(state.key, state.generation, tuple(c.id for c in chunks), position))
    for chunk in chunks:
        step.add(IndexForRecall(state.key, state.resource_id, chunk.thread_ids, chunk.id, state.epoch,
                                    retention_ms=step.config.retention_ms))
    for thread_id in dict.fromkeys(t for c in chunks for t in c.thread_ids):
        hinted = [c for c in chunks if thread_id in c.thread_ids]
        since = min((m.created_at for m in removed if m.thread_id == thread_id),
                    default=min(c.dated_from or c.last_message_at for c in hinted))
        _apply_hints(step, thread_id, hinted[-1].current_task, hinted[-1].suggested_response,
                     next((c.thread_title for c in reversed(hinted) if c.thread_title), None), hinted[-1].cycle_id,
                     {}, since=since)
    state.last_buffered_at_tokens = step.pending()
    marker = step.marker_config()
    if ttl_ms is not None:  # "auto" is reported as the idle time it resolved to
        marker = marker.model_copy(update={"activate_after_idle": ttl_ms})
    after = -1
    for chunk in chunks:
        messages = sum(1 for m in removed if after < m.seq <= chunk.last_seq)
        after = chunk.last_seq
        step.emit(ActivationEvent(
            record_id=step.record_id, thread_id=step.primary_thread(chunk.thread_ids), cycle_id=chunk.cycle_id,
            operation_type="observation", activated_at=step.iso_now(), chunks_activated=1,
            tokens_activated=chunk.message_tokens, observation_tokens=chunk.tokens, messages_activated=messages,
            generation_count=state.generation, observations="", triggered_by=trigger,
            buffer_cycle_ids=[chunk.cycle_id], last_activity_at=last_activity_at, ttl_expired_ms=idle_ms,
            previous_model=previous_model, current_model=current_model, config=marker),
            observations_from=(chunk.id,))
    step.owe_all_threads()


def _remove_observed(step: Step, removed: list[MessageRef]) -> None:
    state = step.state
    gone = {m.id for m in removed}
    state.unobserved = [m for m in state.unobserved if m.id not in gone]
    state.unobserved_tokens -= sum(m.tokens for m in removed)
    state.total_observed_messages += len(removed)
    for message in removed:
        thread = step.thread(message.thread_id)
        thread.observed_through_seq = max(thread.observed_through_seq, message.seq)


def _apply_hints(step: Step, thread_id: str, current_task: str | None, suggested_response: str | None,
                 title: str | None, cycle_id: str, extracted: dict[str, object],
                 working_memory: object = None, *, since: int) -> bool:
    """New hints replace old ones only when present: an observation without hints keeps the previous ones.
    Extracted values are merged over the stored ones; a working memory replaces the stored one. ``since``: the
    oldest message what is written was made from (retention dates the thread's metadata by it). True when the
    thread's metadata was written (a context may show it differently)."""
    thread = step.thread(thread_id)
    changed = False
    if current_task and current_task != thread.current_task:
        thread.current_task, changed = current_task, True
    if suggested_response and suggested_response != thread.suggested_response:
        thread.suggested_response, changed = suggested_response, True
    new_title = _valid_title(title) if step.config.thread_title else None
    if new_title and new_title != thread.title:
        step.emit(ThreadUpdateEvent(record_id=step.record_id, thread_id=thread_id, cycle_id=cycle_id,
                                    old_title=thread.title, new_title=new_title, timestamp=step.iso_now()))
        thread.title, changed = new_title, True
    if changed or extracted or working_memory is not None:
        thread.derived_from = since if thread.derived_from is None else min(thread.derived_from, since)
        step.add(PersistThreadMetadata(thread_id=thread_id, resource_id=step.state.resource_id, title=thread.title,
                                       current_task=thread.current_task,
                                       suggested_response=thread.suggested_response,
                                       extracted_values=dict(extracted),
                                       last_observed_message_id=_last_observed_id(step, thread_id),
                                       working_memory=working_memory))
        return True
    return False


def store_extracted(step: Step, thread_id: str, cycle_id: str, result: ModelResultArrived, *, since: int,
                    current_task: str | None = None, suggested_response: str | None = None) -> None:
    """A cycle's extracted values and working memory written to the thread's metadata, with the hints given (a
    committed reflection's), the title left as it is (a reflection's values; ``since``: the oldest entry of what it
    condensed)."""
    _apply_hints(step, thread_id, current_task, suggested_response, None, cycle_id, result.extracted_values,
                 result.working_memory, since=since)


def reported_values(result: ModelResultArrived) -> dict[str, object] | None:
    """The values a cycle's end event reports: the extracted values, and the updated working memory under its
    slug (it is kept apart from the ``extracted`` metadata, so the event is where an agent learns of it)."""
    values: dict[str, object] = dict(result.extracted_values)
    if result.working_memory is not None:
        values[WORKING_MEMORY_SLUG] = result.working_memory
    return values or None


def _valid_title(title: str | None) -> str | None:
    if not title:
        return None
    cleaned = " ".join(title.split()).strip("\"'")
    return cleaned[:120] if len(cleaned) >= 3 else None


def _last_observed_id(step: Step, thread_id: str) -> str | None:
    for segment in reversed(step.state.log):
        if thread_id in segment.thread_ids:
            return segment.last_message_id
    return None


# -- results -------------------------------------------------------------------------------------------------------

def on_result(step: Step, result: ModelResultArrived, cycle: Cycle) -> None:
    if not result.ok or not result.observations.strip():
        _on_failure(step, result, cycle)
    elif cycle.kind == "buffer":
        _on_buffered(step, result, cycle)
    else:
        _on_observed(step, result, cycle)
    if result.ok:
        step.state.observe_failures = 0
    if step.state.manual_observe_pending and not step.state.in_flight("observation") \
            and "retry:observation" not in step.state.timers:
        start_manual_observation(step)


def _covered(step: Step, cycle: Cycle) -> list[MessageRef]:
    wanted = set(cycle.message_ids)
    return [m for m in step.state.unobserved if m.id in wanted]


def _observation_text(step: Step, result: ModelResultArrived, cycle: Cycle, boundary_at: int) -> str:
    """The observations to keep, as the record shows them; entries past the retention window cut out (a call that
    covered messages expiring while it ran: ``expiry.cut_result``)."""
    return expiry.cut_result(step, _sections(step, result, cycle), boundary_at)


def _sections(step: Step, result: ModelResultArrived, cycle: Cycle) -> str:
    if step.state.scope != "resource":
        return result.observations.strip()
    sections = result.per_thread or {}
    if not sections and len(cycle.thread_ids) == 1:
        sections = {cycle.thread_ids[0]: result.observations}
    if not sections:
        return result.observations.strip()
    blocks = []
    for thread_id in cycle.thread_ids:
        text = (sections.get(thread_id) or "").strip()
        if text:
            label = thread_label(thread_id, step.config.obscure_thread_ids)
            blocks.append(f'<thread id="{label}">\n{text}\n</thread>')
    return "\n".join(blocks)


def _failures(result: ModelResultArrived) -> list[ExtractionFailure] | None:
    return [ExtractionFailure(slug=s, error=e) for s, e in result.extraction_failures] or None


def _on_buffered(step: Step, result: ModelResultArrived, cycle: Cycle) -> None:
    state = step.state
    step.drop_cycle(cycle.id)
    covered = _covered(step, cycle)
    if len(covered) < len(cycle.message_ids):
        # some of its messages were observed another way meanwhile: a chunk must cover exactly what it describes
        step.end_overtaken(cycle, f"overtaken: {len(cycle.message_ids) - len(covered)} of its "
                                  f"{len(cycle.message_ids)} messages were observed before its result arrived")
        return
    boundary = max(m.created_at for m in covered)
    text = _observation_text(step, result, cycle, boundary)
    if not text:
        step.end_overtaken(cycle, "overtaken: every observation it made passed the retention window")
        return
    tokens = step.accountant.count_text(text)
    chunk = ChunkRef(id=step.new_id("seg"), cycle_id=cycle.id, first_seq=covered[0].seq, last_seq=covered[-1].seq,
                     first_message_id=covered[0].id, last_message_id=covered[-1].id, message_count=len(covered),
                     message_tokens=sum(m.tokens for m in covered), tokens=tokens,
                     last_message_at=boundary, buffered_at=step.now,
                     thread_ids=cycle.thread_ids, current_task=result.current_task,
                     suggested_response=result.suggested_response, thread_title=result.thread_title,
                     dated_from=expiry.dated_from(text, boundary))
    expiry.note(step, chunk.dated_from)
    state.buffered.append(chunk)
    state.buffer_failures = 0
    state.buffer_retry_at = None
    step.add(_segment_command(step, chunk.id, "buffered", text, tokens, cycle, covered))
    main = step.primary_thread(cycle.thread_ids)
    # titles, extracted values and the working memory are applied as soon as they are known; hints wait for
    # activation. A buffered chunk is in no context until it is activated, so the threads are owed a context only
    # when one of those changed what a context shows (the reference reports its status once per agent step, not
    # at a buffering end; a context under a new version with the same content is bytes and a status for nothing)
    shown = _apply_hints(step, main, None, None, result.thread_title, cycle.id, result.extracted_values,
                         result.working_memory, since=min(m.created_at for m in covered))
    step.emit(BufferingEndEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                operation_type="observation", completed_at=step.iso_now(),
                                duration_ms=max(0, step.now - cycle.started_at), tokens_buffered=cycle.tokens,
                                buffered_tokens=tokens, observations=text,
                                extracted_values=reported_values(result),
                                extraction_failures=_failures(result)))
    if shown:
        step.owe_all_threads()


def _segment_command(step: Step, segment_id: str, status: Literal["buffered", "active"], text: str, tokens: int,
                     cycle: Cycle,
                     covered: list[MessageRef]) -> PersistSegment:
    return PersistSegment(record_key=step.state.key, segment_id=segment_id, kind="observation",
                          status=status, generation=step.state.generation, text=text,
                          tokens=tokens, cycle_id=cycle.id, thread_ids=cycle.thread_ids,
                          first_message_id=covered[0].id, last_message_id=covered[-1].id,
                          message_ids=tuple(m.id for m in covered), message_tokens=sum(m.tokens for m in covered),
                          boundary_at=max(m.created_at for m in covered), created_at=step.now,
                          ranges=observation_ranges([(m.id, m.thread_id, m.seq) for m in covered]))


def _on_observed(step: Step, result: ModelResultArrived, cycle: Cycle) -> None:
    state = step.state
    step.drop_cycle(cycle.id)
    covered = _covered(step, cycle)
    if not covered:
        step.end_overtaken(cycle, "overtaken: its messages were observed before its result arrived")
        return
    boundary = max(m.created_at for m in covered)
    text = _observation_text(step, result, cycle, boundary)
    if not text:
        # every entry it wrote is dated past the retention window (its messages are at its edge): they are
        # observed, into nothing, rather than asked again until they expire
        _remove_observed(step, covered)
        step.end_overtaken(cycle, "overtaken: every observation it made passed the retention window")
        step.owe_all_threads()
        return
    tokens = step.accountant.count_text(text)
    segment = SegmentRef(id=step.new_id("seg"), tokens=tokens, kind="observation", boundary_at=boundary,
                         first_message_id=covered[0].id, last_message_id=covered[-1].id, message_count=len(covered),
                         thread_ids=cycle.thread_ids, dated_from=expiry.dated_from(text, boundary))
    expiry.note(step, segment.dated_from)
    step.add(_segment_command(step, segment.id, "active", text, tokens, cycle, covered))
    _remove_observed(step, covered)
    state.log.append(segment)
    state.log_tokens += tokens
    state.last_buffered_at_tokens = step.pending()
    main = step.primary_thread(cycle.thread_ids)
    since = min(m.created_at for m in covered)
    if result.thread_metadata:  # a multi-thread observation: each thread its own hints, title and values
        for thread_id in cycle.thread_ids:
            update = result.thread_metadata.get(thread_id)
            if update is not None:
                _apply_hints(step, thread_id, update.current_task, update.suggested_response, update.thread_title,
                             cycle.id, update.extracted_values, update.working_memory,
                             since=min((m.created_at for m in covered if m.thread_id == thread_id), default=since))
    else:
        single = len(cycle.thread_ids) == 1
        _apply_hints(step, main, result.current_task if single else None,
                     result.suggested_response if single else None, result.thread_title if single else None,
                     cycle.id, result.extracted_values, result.working_memory, since=since)
    step.add(IndexForRecall(state.key, state.resource_id, cycle.thread_ids, segment.id, state.epoch,
                            retention_ms=step.config.retention_ms))
    step.emit(ObservationEndEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                  operation_type="observation", completed_at=step.iso_now(),
                                  duration_ms=max(0, step.now - cycle.started_at), tokens_observed=cycle.tokens,
                                  observation_tokens=tokens, observations=text, current_task=result.current_task,
                                  suggested_response=result.suggested_response,
                                  extracted_values=reported_values(result),
                                  extraction_failures=_failures(result),
                                  fallback_model=result.fallback_model or (OFFLINE_MODEL if cycle.fallback
                                                                           else None)))
    step.owe_all_threads()


def _on_failure(step: Step, result: ModelResultArrived, cycle: Cycle) -> None:
    state = step.state
    error = cut_error(result.error or "the Observer returned no observations")
    main = step.primary_thread(cycle.thread_ids)
    step.drop_cycle(cycle.id)
    partial = result.observations.strip() or None
    if cycle.kind == "buffer":
        state.buffer_failures += 1
        retry_at = step.now + step.backoff(state.buffer_failures)
        state.buffer_retry_at = retry_at
        step.schedule("retry:buffer", retry_at)
        step.emit(BufferingFailedEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                       operation_type="observation", failed_at=step.iso_now(),
                                       duration_ms=max(0, step.now - cycle.started_at),
                                       tokens_attempted=cycle.tokens, error=error, observations=partial))
        if cycle.blocking:  # the agent already waited for this chunk: the offline model observes at once
            _start_sync(step, "sync", "turn-sync", offline=True)
        return
    retry_offline = cycle.kind == "sync" and not cycle.fallback
    step.emit(ObservationFailedEvent(record_id=step.record_id, thread_id=main, cycle_id=cycle.id,
                                     operation_type="observation", failed_at=step.iso_now(),
                                     duration_ms=max(0, step.now - cycle.started_at), tokens_attempted=cycle.tokens,
                                     error=error, observations=partial,
                                     next_action="observe with the offline model" if retry_offline
                                     else "retry later"))
    if retry_offline:
        # every configured model failed past the limit: the offline model keeps the context bounded
        _start_sync(step, "sync", "turn-sync", offline=True)
    else:
        # a manual observe() is not forgotten: it runs again after a back-off
        state.manual_observe_pending = cycle.kind == "manual" or state.manual_observe_pending
        state.observe_failures += 1
        step.schedule("retry:observation", step.now + step.backoff(state.observe_failures))
        step.owe_all_threads()


def retry_cycle(step: Step, cycle: Cycle) -> None:
    step.retry_cycle(cycle, lambda failed: on_result(step, failed, cycle),
                     lambda again: request_observation(step, again))

