"""A thread's progress: how far its memory has caught up with its messages, and whether it has settled.

Every message a record takes in gets the next ``seq`` and is from then on either *unobserved* (in
``RecordState.unobserved``) or *observed* (covered by the active observation log). Within a thread the observed
messages are always a prefix in ``seq`` order: buffered chunks and synchronous observations cover the oldest
unobserved messages, and a reflection rewrites the log without uncovering anything. So the thread's observation
cursor (``ThreadState.observed_through_seq``) alone says which of its messages are observed. A clear starts the
cursor over, and the messages are unobserved again.

**Settled.** Memory has *settled through* a message M of a thread when M has been taken in and

1. M is observed: the observation covering it has landed in the active log; or
2. nothing pending would observe M without new input: the record is *quiescent*.

A record is quiescent when none of these holds:

* an Observer call is in flight (buffering, synchronous or manual). One that covers M may land; one that does not
  may still lead to M: when it ends the thresholds are evaluated again, and a buffering held back by the call in
  flight may start;
* a manual ``observe()`` waits for the call in flight to end (``manual_observe_pending``);
* a retry timer is set: ``retry:buffer`` (a failed buffering is tried again) or ``retry:observation`` (a failed
  manual or offline observation);
* chunks are buffered and the idle timer (``idle:observation``, activateAfterIdle) is set: it activates them with no
  new input.

What does not count, and why:

* **unobserved messages under the message threshold** (``messageTokens``), and **buffered chunks waiting for the
  threshold**: only new messages (or a manual observe) move them, so waiting for them would wait for ever. M is then
  settled but not observed, and its status says so (``unobserved`` or ``buffered``);
* a turn waiting for a tool result past the limit: its observation runs once the result (new input) arrives;
* **reflections**, in flight or scheduled: a reflection rewrites the log but covers no message, and its end never
  starts an observation (it can only shrink the log, which can only raise the message threshold, under
  ``shareTokenBudget``). They are reported (``inFlight``) but do not hold ``settled`` back;
* every other timer: ``deadline:`` and ``resend:`` belong to a call in flight (counted above); ``idle:observation``
  without buffered chunks, ``idle:reflection`` and ``retry:reflection`` change no message's coverage. A timer that
  fires makes the thresholds be evaluated again, but they were evaluated on the same state at the end of the last
  input, and the one observation rule that depends on the time (``buffer_retry_at``) has its own timer, counted
  above.

Settled is monotone along a thread's messages (settled through M means settled through every message before M), so
one mark says it: ``settled_through`` is the thread's newest message when nothing is pending, else its cursor.

A message the record cannot place is *unknown*, and not settled: not taken in yet, of another thread, or observed so
long ago that the record no longer names it (it holds every unobserved message, its last ``EngineLimits.recent_ids``
ids, its log's boundaries). For the last case the caller may give the ``seq`` the content store holds for the
message (``stored_seq``, read for this record and thread): a seq the record has reached, of a message not
unobserved, is observed. In resource scope only the unobserved messages, each thread's newest and ``stored_seq``
place a message (the other ids the record keeps do not say which thread they belong to).

Pure: the runtime evaluates these on the states it holds (``GET /v1/threads/{id}/settled``, ``Memory.settled``),
and ``decide`` publishes ``data-om-progress`` with them (:func:`report_changes`, :func:`answer`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from om_stream.core.commands import EmitEvent
from om_stream.core.events import (
    BufferedChunk,
    MessageMark,
    ProgressEvent,
    RunningCycle,
    ThroughMessage,
    UnobservedMessages,
)
from om_stream.core.inputs import ReportProgress
from om_stream.core.messages import iso
from om_stream.core.state import Cycle, MessageRef, RecordState

if TYPE_CHECKING:
    from om_stream.core.step import Step

__all__ = ["MessageStatus", "Place", "answer", "needs_stored_seq", "place", "progress_event", "quiescent",
           "report_changes", "settled", "waiting_for"]

MessageStatus = Literal["unknown", "unobserved", "observing", "buffered", "observed"]
Waiting = Literal["idle-activation", "buffering-retry", "observation-retry"]


@dataclass(frozen=True)
class Place:
    """Where a message stands in its record. ``seq`` is None when the record does not name it (observed long
    ago) or does not know it; ``message_id`` is None when the thread has no message yet."""

    message_id: str | None
    seq: int | None
    status: MessageStatus


def waiting_for(state: RecordState) -> list[Waiting]:
    """The record's timers that will observe or activate without new input (see the module docstring)."""
    found: list[Waiting] = []
    if state.buffered and "idle:observation" in state.timers:
        found.append("idle-activation")
    if "retry:buffer" in state.timers:
        found.append("buffering-retry")
    if "retry:observation" in state.timers:
        found.append("observation-retry")
    return found


def quiescent(state: RecordState) -> bool:
    """Nothing in flight or scheduled would observe any of the record's messages without new input."""
    return not (any(c.operation == "observation" for c in state.cycles) or state.manual_observe_pending
                or waiting_for(state))


def place(state: RecordState, thread_id: str, message_id: str | None = None, *,
          stored_seq: int | None = None) -> Place:
    """Where ``message_id`` (the thread's newest message when None) stands; ``stored_seq``: its seq as the content
    store holds it for this record and thread, for a message observed so long ago that the record does not name
    it."""
    thread = state.threads.get(thread_id)
    wanted = message_id if message_id is not None else (thread.last_message_id if thread is not None else None)
    if thread is None or wanted is None:
        return Place(wanted, None, "unknown")
    for message in state.unobserved:
        if message.id == wanted:
            if message.thread_id != thread_id:
                return Place(wanted, None, "unknown")
            return Place(wanted, message.seq, _unobserved_status(state, message))
    # taken in and not unobserved: observed
    if wanted == thread.last_message_id:
        return Place(wanted, thread.observed_through_seq if thread.observed_through_seq >= 0 else None, "observed")
    if state.scope == "thread" and (wanted in state.recent_ids or any(
            wanted in (segment.first_message_id, segment.last_message_id) for segment in state.log)):
        return Place(wanted, None, "observed")
    if stored_seq is not None and 0 < stored_seq <= state.msg_seq:
        return Place(wanted, stored_seq, "observed")
    return Place(wanted, None, "unknown")


def _unobserved_status(state: RecordState, message: MessageRef) -> MessageStatus:
    if any(chunk.first_seq <= message.seq <= chunk.last_seq for chunk in state.buffered):
        return "buffered"
    if any(c.operation == "observation" and message.id in c.message_ids for c in state.cycles):
        return "observing"
    return "unobserved"


def _settled(state: RecordState, where: Place) -> bool:
    if where.status == "unknown":
        return where.message_id is None  # a thread with no message: nothing to wait for
    return where.status == "observed" or quiescent(state)


def settled(state: RecordState, thread_id: str, through_message_id: str | None = None, *,
            stored_seq: int | None = None) -> bool:
    """Memory has settled through ``through_message_id`` (the thread's newest message when None): it was taken in,
    and it is observed or nothing pending would observe it without new input. False for a message the record
    cannot place (not taken in yet); True for the newest message of a thread that has none."""
    return _settled(state, place(state, thread_id, through_message_id, stored_seq=stored_seq))


def needs_stored_seq(state: RecordState, question: ReportProgress) -> bool:
    """The record cannot place the message asked about, although the thread has messages: the content store may
    hold it (observed long ago), so the host reads its seq before deciding."""
    return (question.through_message_id is not None and question.stored_seq is None
            and question.thread_id in state.threads
            and place(state, question.thread_id, question.through_message_id).status == "unknown")


# -- the payload -------------------------------------------------------------------------------------------------


def _observed_id(state: RecordState, thread_id: str) -> str | None:
    """The id of the newest observed message of the thread, when the log names it: the last segment covering the
    thread ends with it, unless that segment covers other threads too (resource scope)."""
    for segment in reversed(state.log):
        if thread_id in segment.thread_ids:
            return segment.last_message_id if segment.thread_ids == (thread_id,) else None
    return None


def _running(cycle: Cycle) -> RunningCycle:
    ids = cycle.message_ids
    return RunningCycle(cycle_id=cycle.id, kind=cycle.kind, operation_type=cycle.operation, attempt=cycle.attempt,
                        started_at=iso(cycle.started_at), tokens=cycle.tokens, messages=len(ids),
                        first_message_id=ids[0] if ids else None, last_message_id=ids[-1] if ids else None,
                        blocking=cycle.blocking)


def progress_event(state: RecordState, thread_id: str, *, through: Place | None = None,
                   request_id: str | None = None) -> ProgressEvent:
    """The thread's ``data-om-progress`` payload; ``through``: the message asked about (:func:`place`)."""
    thread = state.threads.get(thread_id)
    mine = [m for m in state.unobserved if m.thread_id == thread_id]
    latest: MessageMark | None = None
    observed: MessageMark | None = None
    if thread is not None:
        if thread.observed_through_seq >= 0:
            observed = MessageMark(message_id=_observed_id(state, thread_id), seq=thread.observed_through_seq)
        newest = thread.last_message_id
        seq = next((m.seq for m in mine if m.id == newest), None)
        if seq is None and newest is not None and observed is not None:
            seq = observed.seq  # taken in and not unobserved: observed, so the cursor is at it
        if newest is not None and seq is not None:
            latest = MessageMark(message_id=newest, seq=seq)
    pending = bool(mine) and not quiescent(state)
    return ProgressEvent(
        record_id=state.record_id, thread_id=thread_id, latest_message=latest, observed_through=observed,
        settled_through=observed if pending else latest,
        unobserved=UnobservedMessages(messages=len(mine), tokens=sum(m.tokens for m in mine)),
        buffered=[BufferedChunk(cycle_id=c.cycle_id, first_message_id=c.first_message_id,
                                last_message_id=c.last_message_id, first_seq=c.first_seq, last_seq=c.last_seq,
                                messages=c.message_count, message_tokens=c.message_tokens, observation_tokens=c.tokens)
                  for c in state.buffered if thread_id in c.thread_ids],
        in_flight=[_running(c) for c in state.cycles if thread_id in c.thread_ids],
        waiting_for=waiting_for(state), pending=pending, generation_count=state.generation, request_id=request_id,
        through=None if through is None else ThroughMessage(message_id=through.message_id, seq=through.seq,
                                                            status=through.status,
                                                            settled=_settled(state, through)))


# -- what decide publishes ---------------------------------------------------------------------------------------


def _record_signature(state: RecordState) -> tuple[object, ...]:
    """Everything the threads' signatures (below) are made of, for the whole record: when it did not change, no
    thread's did (most decisions: a message taken in that starts nothing), and that is found at the cost of two
    small tuples."""
    unobserved: object = bool(state.unobserved) if state.scope == "thread" else \
        frozenset(m.thread_id for m in state.unobserved)
    return (state.epoch, state.generation, state.manual_observe_pending, tuple(waiting_for(state)),
            tuple((c.id, c.thread_ids) for c in state.buffered),
            tuple((c.id, c.attempt, c.blocking, c.thread_ids) for c in state.cycles),
            tuple((t, thread.observed_through_seq) for t, thread in state.threads.items()), unobserved)


def _signatures(state: RecordState, thread_ids: list[str]) -> dict[str, tuple[object, ...]]:
    """Per thread, everything its progress payload says except what taking a message in changes by itself (its
    newest message, its unobserved counts, and ``settledThrough`` when nothing is pending): the payload changed
    iff this did."""
    waiting = tuple(waiting_for(state))
    quiet = quiescent(state)
    if state.scope == "thread":
        with_unobserved = set(state.threads) if state.unobserved else set()
    else:
        with_unobserved = {m.thread_id for m in state.unobserved}
    out: dict[str, tuple[object, ...]] = {}
    for thread_id in thread_ids:
        thread = state.threads.get(thread_id)
        out[thread_id] = (
            state.epoch, state.generation, thread.observed_through_seq if thread is not None else -1,
            tuple(c.id for c in state.buffered if thread_id in c.thread_ids),
            tuple((c.id, c.attempt, c.blocking) for c in state.cycles if thread_id in c.thread_ids),
            waiting, thread_id in with_unobserved and not quiet)
    return out


def _key_hash(state: RecordState) -> str:
    return _short_hash(state.record_id)


@lru_cache(maxsize=4096)
def _short_hash(record_id: str) -> str:
    return hashlib.sha1(record_id.encode()).hexdigest()[:8]  # as Step.new_id


def report_changes(step: Step, before: RecordState) -> None:
    """A ``data-om-progress`` for each thread whose progress this decision changed (not by taking a message in
    alone: the context says that).

    Its id is derived, not drawn from the record's id sequence (which would shift every later id): the record's
    counters when it was decided and a digest of the thread's new progress. Two of a thread's progress events never
    share one: between two decisions with the same counters only timers fired, and a timer that fires without
    drawing an id only takes a reason to wait away (the progress never comes back to where it was)."""
    after = step.state
    if not after.threads or _record_signature(after) == _record_signature(before):
        return
    threads = list(after.threads)
    old, new = _signatures(before, threads), _signatures(after, threads)
    for thread_id in threads:
        if new[thread_id] != old[thread_id]:
            digest = hashlib.sha1(repr((thread_id, new[thread_id])).encode()).hexdigest()[:12]
            event_id = f"evt-{_key_hash(after)}-{after.epoch}-{after.id_seq}.{after.msg_seq}-p{digest}"
            step.add(EmitEvent(after.key, progress_event(after, thread_id), event_id))


def answer(state: RecordState, question: ReportProgress) -> EmitEvent:
    """The answer to a ``progress`` command: the thread's progress and where the message asked about stands. Its id
    is derived from the request's, so a replayed answer repeats it."""
    where = place(state, question.thread_id, question.through_message_id, stored_seq=question.stored_seq)
    request = hashlib.sha1(question.request_id.encode()).hexdigest()[:16]
    return EmitEvent(state.key, progress_event(state, question.thread_id, through=where,
                                               request_id=question.request_id),
                     f"evt-{_key_hash(state)}-{state.epoch}-progress-{request}")
