"""Taking messages in: each new message is counted, persisted and made unobserved, its tool calls and its thread's
turn tracked, and a temporal marker added before a user message after a long gap; OM off, a message only passes
through; after a clear, the stored conversation is unobserved again."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from om_stream.core import expiry
from om_stream.core.commands import PersistMessage
from om_stream.core.events import TemporalMarkerEvent
from om_stream.core.messages import Message, TextPart
from om_stream.core.recall.records import StoredMessage
from om_stream.core.state import MessageRef
from om_stream.core.step import Step
from om_stream.core.temporal import GAP_THRESHOLD_MS, gap_text, marker_id, marker_text
from om_stream.core.ttl import actor_cache_retention, resolve_idle_ms

__all__ = ["append_message", "pass_through", "restore_conversation"]


def append_message(step: Step, message: Message) -> None:
    """Take a new message in: persist it, count it, track tool calls and turns, add a temporal marker if due."""
    state = step.state
    thread = step.thread(message.thread_id)
    at = message.created_at_ms
    previous_at = thread.last_message_at
    if (step.config.temporal_markers and message.role == "user" and previous_at is not None
            and at - previous_at >= GAP_THRESHOLD_MS):
        gap = at - previous_at
        marker = Message(message_id=marker_id(message.message_id), thread_id=message.thread_id,
                         resource_id=message.resource_id, role="system",
                         created_at=message.created_at, parts=(TextPart(text=marker_text(gap, at)),),
                         metadata={"reminderType": "temporal-gap", "gapMs": gap,
                                   "precedesMessageId": message.message_id})
        _add(step, marker, at)
        step.emit(TemporalMarkerEvent(record_id=step.record_id, thread_id=message.thread_id,
                                      message_id=marker.message_id, precedes_message_id=message.message_id,
                                      gap_ms=gap, gap_text=gap_text(gap), text=marker.text))
    ref = _add(step, message, at)
    _follow_turn(step, ref, message)
    if message.role == "assistant":
        retention = actor_cache_retention(message, state.last_actor_cache_retention)
        idle = resolve_idle_ms(step.config.observation_idle, message.model or state.last_actor_model, retention)
        if idle is not None:
            step.schedule("idle:observation", at + idle)
        refl_idle = resolve_idle_ms(step.config.reflection_idle, message.model or state.last_actor_model, retention)
        if refl_idle is not None:
            step.schedule("idle:reflection", at + refl_idle)
    step.owed.add(message.thread_id)


def _add(step: Step, message: Message, at: int) -> MessageRef:
    state = step.state
    tokens = step.accountant.message_tokens(message, message.model or state.last_actor_model or "")
    state.msg_seq += 1
    ref = _take_in(step, message, at, state.msg_seq, tokens)
    step.add(PersistMessage(state.key, message, ref.seq, tokens))
    return ref


def _take_in(step: Step, message: Message, at: int, seq: int, tokens: int) -> MessageRef:
    """Count a message as unobserved: track its tool calls, its thread's newest message, duplicate detection."""
    state = step.state
    thread = step.thread(message.thread_id)
    # a user message ends the turn before it: a call of that turn still without its result was abandoned (the agent
    # answered or moved on without it), and must not keep every later message from being a boundary
    open_calls = set(thread.open_tool_calls) if message.role != "user" else set()
    open_calls.update(message.tool_call_ids())
    open_calls.difference_update(message.tool_result_ids())
    thread.open_tool_calls = sorted(open_calls)
    ref = MessageRef(id=message.message_id, thread_id=message.thread_id, seq=seq, created_at=at,
                     tokens=tokens, role=message.role, safe_cut=not open_calls)
    state.unobserved.append(ref)
    state.unobserved_tokens += tokens
    state.recent_ids.append(message.message_id)
    del state.recent_ids[:-step.limits.recent_ids]
    thread.last_message_id = message.message_id
    thread.last_message_at = at
    expiry.note(step, at)
    return ref


def pass_through(step: Step, message: Message) -> None:
    """OM off: the message is stored and counted, and stays in its thread's context as it came. Nothing observes
    it (no threshold, no temporal marker, no idle timer); if OM is turned on later, it is unobserved like any."""
    _follow_turn(step, _add(step, message, message.created_at_ms), message)
    step.owed.add(message.thread_id)


def restore_conversation(step: Step, conversation: Sequence[StoredMessage]) -> None:
    """After a clear, the record's stored messages are unobserved again, oldest first: back in the context, and
    the next observation covers them. They keep their sequence numbers and token counts; nothing is stored again."""
    for stored in sorted(conversation, key=attrgetter("seq")):
        message = stored.message
        _follow_turn(step, _take_in(step, message, message.created_at_ms, stored.seq, stored.tokens), message)


def _follow_turn(step: Step, ref: MessageRef, message: Message) -> None:
    """A user message opens its thread's turn; every other message is a step of it, and the agent's reply (an
    assistant message that calls no tool) answers it. While the turn is open its user message stays raw in the
    context even once observed: the agent's model is answering it. Once answered, an observed one is in the log only,
    so the context holds each message once (``core.views.context_spec``)."""
    thread = step.thread(ref.thread_id)
    if ref.role == "user":
        thread.turn_message, thread.step_number, thread.turn_answered = ref, 0, False
        return
    thread.step_number += 1
    if ref.role == "assistant":
        step.state.last_assistant_at = ref.created_at
        if not message.tool_call_ids():
            thread.turn_answered = True
