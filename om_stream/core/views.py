"""What a record's state looks like from outside: the context spec of a thread and its ``data-om-status``.

Used by the engine when it publishes, and by the runtime to answer HTTP reads from the table state.
"""

from __future__ import annotations

from typing import Literal

from om_stream.core.commands import ContextSpec
from om_stream.core.config import ResolvedConfig
from om_stream.core.events import StatusEvent
from om_stream.core.state import RecordState
from om_stream.core.thresholds import select_chunks

__all__ = ["context_spec", "near_block_after", "pending_tokens", "status_event"]

NEAR_BLOCK_AFTER = 0.9  # share of the blocking limit from which a record counts as about to block its agent


def near_block_after(state: RecordState, config: ResolvedConfig) -> bool:
    """The record's unobserved messages are close to the limit past which its agent waits for an observation
    (``om_threads_near_block_after``)."""
    return state.unobserved_tokens >= NEAR_BLOCK_AFTER * config.message_limit


def pending_tokens(state: RecordState, conversation_overhead: int) -> int:
    """Unobserved message tokens as the agent's model counts them (conversation overhead included)."""
    tokens = state.unobserved_tokens
    return tokens + conversation_overhead if tokens else 0


def context_spec(state: RecordState, thread_id: str, config: ResolvedConfig, version: int) -> ContextSpec:
    """The thread's context: the active log, then the unobserved messages; while the current turn is open, its user
    message comes first among them even once observed (as in the reference, the question the agent's model is
    answering is never left to the log alone). Once the agent's reply has answered it, an observed one is in the log
    only: every message is then in the context exactly once."""
    thread = state.threads[thread_id]
    raw = [m for m in state.unobserved if m.thread_id == thread_id]
    ids = [m.id for m in raw]
    tokens = sum(m.tokens for m in raw)
    pinned = None if thread.turn_answered else thread.turn_message
    if pinned is not None and pinned.id not in ids:
        ids.insert(0, pinned.id)
        tokens += pinned.tokens
    others: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if state.scope == "resource":
        grouped: dict[str, list[str]] = {}
        for message in state.unobserved:
            if message.thread_id != thread_id:
                grouped.setdefault(message.thread_id, []).append(message.id)
        others = tuple((tid, tuple(mids)) for tid, mids in grouped.items())
    return ContextSpec(
        record_key=state.key, thread_id=thread_id, resource_id=state.resource_id, version=version,
        through_message_id=thread.last_message_id, generation=state.generation,
        segment_ids=tuple(s.id for s in state.log), segment_boundaries=tuple(s.boundary_at for s in state.log),
        message_ids=tuple(ids), message_tokens=tokens, observation_tokens=state.log_tokens,
        current_task=thread.current_task, suggested_response=thread.suggested_response, thread_title=thread.title,
        other_threads=others, obscure_thread_ids=config.obscure_thread_ids,
        observation_limit=config.observation_limit)


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
