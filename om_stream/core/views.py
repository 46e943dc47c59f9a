"""What a record's state looks like from outside: the context spec of a thread and its ``data-om-status``.

Used by the engine when it publishes, and by the runtime to answer HTTP reads from the table state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from om_stream.core.commands import ContextSpec
from om_stream.core.config import ResolvedConfig
from om_stream.core.events import StatusEvent
from om_stream.core.retention import cutoff, segment_expired
from om_stream.core.state import RecordState, ThreadState
from om_stream.core.thresholds import select_chunks

__all__ = ["context_spec", "message_run", "metadata_expired", "narrowed", "near_block_after", "pending_tokens",
           "status_event"]

NEAR_BLOCK_AFTER = 0.9  # share of the blocking limit from which a record counts as about to block its agent


def near_block_after(state: RecordState, config: ResolvedConfig) -> bool:
    """The record's unobserved messages are close to the limit past which its agent waits for an observation
    (``om_threads_near_block_after``)."""
    return state.unobserved_tokens >= NEAR_BLOCK_AFTER * config.message_limit


def pending_tokens(state: RecordState, conversation_overhead: int) -> int:
    """Unobserved message tokens as the agent's model counts them (conversation overhead included)."""
    tokens = state.unobserved_tokens
    return tokens + conversation_overhead if tokens else 0


def metadata_expired(thread: ThreadState, before: int | None) -> bool:
    """The thread's derived metadata passed the window: it was written from a message older than the cutoff
    (``ThreadState.derived_from``; a state written before it was kept: the thread's newest message)."""
    if before is None:
        return False
    since = thread.derived_from if thread.derived_from is not None else (
        thread.last_message_at if thread.title or thread.current_task or thread.suggested_response else None)
    return since is not None and since < before


def context_spec(state: RecordState, thread_id: str, config: ResolvedConfig, version: int,
                 now_ms: int | None = None) -> ContextSpec:
    """The thread's context: the active log, then the unobserved messages; while the current turn is open, its user
    message comes first among them even once observed (as in the reference, the question the agent's model is
    answering is never left to the log alone). Once the agent's reply has answered it, an observed one is in the log
    only: every message is then in the context exactly once.

    With a retention window (``config.retention_ms``; ``now_ms`` is then required) nothing past it is in the
    context, whether or not the record's purge has run: messages created before the cutoff and segments whose
    newest message is are left out, the renderer cuts the expired entries of the others (``expire_before``), and a
    thread whose derived metadata passed the window shows no hints, title or extracted values."""
    before = cutoff(now_ms, config.retention_ms) if now_ms is not None else None
    thread = state.threads[thread_id]
    # a record of one thread without a window (the usual case; this runs for every published context): every
    # unobserved message is this thread's (taking one in makes its thread) and none has expired, nothing to filter
    if before is None and len(state.threads) == 1:
        raw = state.unobserved
    else:
        raw = [m for m in state.unobserved
               if m.thread_id == thread_id and (before is None or m.created_at >= before)]
    ids = [m.id for m in raw]
    tokens = sum([m.tokens for m in raw])
    pinned = None if thread.turn_answered else thread.turn_message
    pinned_id = None
    if pinned is not None and pinned.id not in ids and (before is None or pinned.created_at >= before):
        ids.insert(0, pinned.id)
        tokens += pinned.tokens
        pinned_id = pinned.id
    others: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if state.scope == "resource":
        grouped: dict[str, list[str]] = {}
        for message in state.unobserved:
            if message.thread_id != thread_id and (before is None or message.created_at >= before):
                grouped.setdefault(message.thread_id, []).append(message.id)
        others = tuple((tid, tuple(mids)) for tid, mids in grouped.items())
    log = state.log if before is None else [s for s in state.log if not segment_expired(s.boundary_at, before)]
    expired = metadata_expired(thread, before)
    return ContextSpec(
        record_key=state.key, thread_id=thread_id, resource_id=state.resource_id, version=version,
        through_message_id=thread.last_message_id, generation=state.generation,
        segment_ids=tuple([s.id for s in log]), segment_boundaries=tuple([s.boundary_at for s in log]),
        message_ids=tuple(ids), message_tokens=tokens,
        observation_tokens=state.log_tokens if len(log) == len(state.log) else sum(s.tokens for s in log),
        current_task=None if expired else thread.current_task,
        suggested_response=None if expired else thread.suggested_response,
        thread_title=None if expired else thread.title, other_threads=others,
        obscure_thread_ids=config.obscure_thread_ids, observation_limit=config.observation_limit,
        expire_before=before, segment_dated_from=tuple(s.dated_from for s in log) if before is not None else (),
        metadata_expired=expired, pinned_message_id=pinned_id, epoch=state.epoch)


def message_run(state: RecordState, thread_id: str, first: str, through: str) -> tuple[str, ...] | None:
    """The ids of the thread's messages ``first`` through ``through`` in position order, when the record still
    holds them: a context's run (its unobserved messages) or its pin (the open turn's message); None when it does
    not (observed since: the content store has them)."""
    thread = state.threads.get(thread_id)
    if thread is not None and thread.turn_message is not None and first == through == thread.turn_message.id:
        return (first,)
    own = [m.id for m in state.unobserved if m.thread_id == thread_id]
    if first not in own or through not in own:
        return None
    start, end = own.index(first), own.index(through)
    return tuple(own[start:end + 1])


def narrowed(spec: ContextSpec, before: int) -> ContextSpec:
    """A context published earlier, as it may be read at a later retention cutoff ``before`` (when it cannot be
    made again from the state: a blocking cycle holds the record's contexts back). Segments whose newest message
    passed the cutoff are left out, the renderer cuts the rest and leaves out the messages created before it."""
    if spec.expire_before is not None and spec.expire_before >= before:
        return spec
    keep = [i for i, at in enumerate(spec.segment_boundaries) if at >= before]
    dated = spec.segment_dated_from if len(spec.segment_dated_from) == len(spec.segment_ids) else ()
    return replace(spec, segment_ids=tuple(spec.segment_ids[i] for i in keep),
                   segment_boundaries=tuple(spec.segment_boundaries[i] for i in keep),
                   segment_dated_from=tuple(dated[i] for i in keep) if dated else (), expire_before=before)


def status_event(state: RecordState, thread_id: str, config: ResolvedConfig, conversation_overhead: int) -> StatusEvent:
    chunk_tokens = [c.message_tokens for c in state.buffered]
    pending = pending_tokens(state, conversation_overhead)
    threshold = config.message_threshold(state.log_tokens)
    projected = (select_chunks(chunk_tokens, pending, config.retention_floor, None).tokens if chunk_tokens else 0)
    buffering: Literal["idle", "running", "complete"] = (
        "running" if state.in_flight("observation", "buffer") else "complete" if state.buffered else "idle")
    reflection: Literal["idle", "running", "complete"] = (
        "running" if state.in_flight("reflection", "buffer") else "complete" if state.buffered_reflection else "idle")
    observation_threshold = config.observation_tokens if not config.share_token_budget else max(
        config.message_tokens + config.observation_tokens - threshold, 1000)
    buffered = state.buffered_reflection
    thread = state.threads.get(thread_id)
    return StatusEvent.build(
        record_id=state.record_id, thread_id=thread_id, step_number=thread.step_number if thread else 0,
        generation_count=state.generation, message_tokens=pending, message_threshold=threshold,
        observation_tokens=state.log_tokens, observation_threshold=observation_threshold,
        chunks=len(state.buffered), chunk_message_tokens=min(sum(chunk_tokens), pending),
        projected_removal=projected, chunk_observation_tokens=sum(c.tokens for c in state.buffered),
        buffering=buffering, reflection_input_tokens=buffered.input_tokens if buffered else 0,
        reflection_tokens=buffered.tokens if buffered else 0, reflection=reflection)
