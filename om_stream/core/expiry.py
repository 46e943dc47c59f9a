"""Retention on a record: the fence on arriving messages, the purge timer, and the purge itself (``decide`` runs
these; ``core.retention`` dates and cuts the texts).

The window in force is the deployment's (``ResolvedConfig.retention_ms``), or the record's override when it is
shorter (``engine.record_config``): an override can only shorten the operator's promise, never lengthen it.

* **Fence**: a message already past the window when it arrives (lagging, replayed, imported) is not recorded. It is
  refused without being copied anywhere (``RejectInput.keep_input`` false): dead-lettering it would put the
  personal data the window removes on a log that cannot be edited, so the refusal is counted and logged (never
  its content), and ``Memory`` tells its caller.
* **Timer**: the record's state keeps ``retention:purge``, due when its oldest content passes the window: a message
  (its ``created_at``), an observation entry (a segment's ``dated_from``), a thread's derived metadata (the oldest
  message it was written from). New content moves it earlier; the purge sets it exactly from what is left, and
  never sooner than ``EngineLimits.purge_gap_ms`` (an hour) after itself, so a busy record is purged at most once
  a gap (reads do not wait for the purge: everything past the window is left out as it is read).
* **Purge** (``ExpiryDue``, the timer with what the host read from the store): the state drops what expired
  (unobserved messages, the pinned turn message, log segments, buffered chunks and reflection, entries cut out of
  the rest under new segment ids) and the store is told to do the same (``ExpireStored``) and to drop what the
  state does not track (observed messages, segments earlier generations left behind, cached model results,
  derived thread metadata); the recall index likewise (``ExpireIndex``); then every thread's context is published
  again and the receipt, ``data-om-expired``, counts what went.
* **Late writers**: a model call that covered an expired message may answer after the purge; its result's entries
  dated before the cutoff are cut when it is applied (``cut_result``), a reflection whose input the purge changed
  is overtaken, and an observation whose messages all expired finds nothing left to cover.

Derived metadata (title, hints, extracted values, working memory) summarises the conversation and is rewritten as it
goes; it cannot be dated entry by entry. It is dated, all of it together, by the oldest message any of it was
written from (``ThreadState.derived_from``): when that passes the window the thread's metadata goes whole, and the
next observation writes it afresh from what is left. A long conversation therefore loses its working memory once
a window; keeping it would keep what its oldest sources said.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from om_stream.core.commands import (
    ExpireIndex,
    ExpireStored,
    IndexForRecall,
    RejectInput,
    SegmentRewrite,
)
from om_stream.core.config import ResolvedConfig
from om_stream.core.events import ExpiredCounts, ExpiredEvent
from om_stream.core.inputs import ExpiryDue, TimerFired
from om_stream.core.messages import Message, iso
from om_stream.core.retention import DAY_MS, SegmentText, cut_text, oldest_entry, segment_expired
from om_stream.core.state import BufferedReflection, ChunkRef, RecordState, SegmentRef
from om_stream.core.step import Step
from om_stream.core.views import metadata_expired

__all__ = ["PURGE_TIMER", "cut_result", "dated_from", "drop_expired", "fires_purge", "held_segments", "holds_expired",
           "keep_timer", "left_behind_expired", "note", "purge", "purge_missing", "refuse_expired"]

PURGE_TIMER = "retention:purge"


def refuse_expired(step: Step, message: Message) -> bool:
    """The fence: True (and refused, not copied) when ``message`` is already past the window."""
    before = step.expire_before
    if before is None or message.created_at_ms >= before:
        return False
    days = (step.config.retention_ms or 0) // DAY_MS
    step.add(RejectInput(step.state.key, "expired",
                         f"message {message.message_id!r} was created at {message.created_at.isoformat()}, more "
                         f"than the retention window ({days} days) ago: it was not recorded", keep_input=False))
    return True


def drop_expired(step: Step) -> None:
    """Before any input: unobserved messages that passed the window leave the state at once (they are neither
    counted against a threshold nor sent to the Observer); the purge removes them from the store."""
    before = step.expire_before
    if before is not None:
        _drop_messages(step, before)


def note(step: Step, at: int) -> None:
    """New content dated ``at`` (a message's creation, a segment's oldest entry): the purge is due when it expires,
    if that comes before the purge already due."""
    window = step.config.retention_ms
    if window is None:
        return
    due = step.state.timers.get(PURGE_TIMER)
    if due is None or _expires(at, window) < due:
        step.schedule(PURGE_TIMER, _expires(at, window))


def _expires(at: int, window: int) -> int:
    """When content dated ``at`` is past the window: the first moment its date is before the cutoff."""
    return at + window + 1


def keep_timer(step: Step) -> None:
    """After every input: no window, no purge timer; a window and content that will expire but no timer (the window
    was just set, or the record was made before retention was on), a purge now, which sets it exactly. A purge that
    left nothing to expire leaves no timer: the next message sets one."""
    if step.config.retention_ms is None:
        step.cancel(PURGE_TIMER)
    elif PURGE_TIMER not in step.state.timers and _dates(step.state):
        step.schedule(PURGE_TIMER, step.now)


def fires_purge(state: RecordState, timer: TimerFired) -> bool:
    """The firing of the record's purge timer as it is scheduled now (one read again after a crash, or overtaken by
    a new schedule, is the engine's to ignore: no purge is read for it)."""
    return timer.timer == PURGE_TIMER and (timer.due_at is None or state.timers.get(PURGE_TIMER) == timer.due_at)


def purge_missing(state: RecordState, config: ResolvedConfig) -> bool:
    """A record that should have a purge timer and has none: retention was turned on (or shortened) while it sat
    idle. A runtime taking the record over fires one at once, so its purge sets the timer (``keep_timer`` does the
    same at the record's next input)."""
    return config.retention_ms is not None and PURGE_TIMER not in state.timers and bool(_dates(state))


def dated_from(text: str, boundary_at: int) -> int:
    """When a new segment's oldest entry starts (a text without entries: its newest message's time)."""
    oldest = oldest_entry(text, boundary_at)
    return boundary_at if oldest is None else min(oldest, boundary_at)


def cut_result(step: Step, text: str, boundary_at: int) -> str:
    """A model's answer as it may be kept: without the entries dated before the cutoff (a call that covered
    messages expiring while it ran must not bring them back)."""
    return cut_text(text, step.expire_before, boundary_at).text


# -- the purge -------------------------------------------------------------------------------------------------------


@dataclass
class _Purge:
    """What one purge does, gathered as it goes."""

    before: int
    texts: dict[str, SegmentText]
    deletes: list[str] = field(default_factory=list)
    rewrites: list[SegmentRewrite] = field(default_factory=list)
    entries: int = 0
    changed: set[str] = field(default_factory=set)  # ids of log segments dropped or rewritten

    def judge(self, step: Step, segment_id: str, boundary_at: int) -> tuple[str, int, int] | None:
        """A segment at the cutoff: None when it goes whole; else (its id, its tokens, when its oldest entry
        starts), a new id when entries were cut out of it. Tokens -1: unchanged."""
        stored = self.texts.get(segment_id)
        if stored is None or segment_expired(boundary_at, self.before):
            # without its text (the store lost it, or a purge that removed it was interrupted) it cannot be cut
            self.deletes.append(segment_id)
            self.changed.add(segment_id)
            return None
        cut = cut_text(stored.text, self.before, boundary_at)
        if not cut.changed:
            return segment_id, -1, dated_from(stored.text, boundary_at)
        self.entries += cut.removed
        self.changed.add(segment_id)
        if not cut.kept:
            self.deletes.append(segment_id)
            return None
        new_id = step.new_id("seg")
        tokens = step.accountant.count_text(cut.text)
        self.rewrites.append(SegmentRewrite(segment_id, new_id, cut.text, tokens))
        return new_id, tokens, dated_from(cut.text, boundary_at)


def purge(step: Step, due: ExpiryDue) -> None:
    state = step.state
    step.cancel(PURGE_TIMER)
    window = step.config.retention_ms
    if window is None:
        return
    work = _Purge(due.cutoff, {s.segment_id: s for s in due.segments})
    old_log = list(state.log)
    known = held_segments(state)
    _drop_messages(step, work.before)
    _cut_log(step, work)
    _cut_chunks(step, work)
    _cut_buffered_reflection(step, work, old_log)
    _overtake_reflections(step, work, old_log)
    for stored in due.segments:  # segments earlier generations left behind, kept for recall: whole or not at all
        if stored.segment_id not in known and left_behind_expired(stored, work.before):
            work.deletes.append(stored.segment_id)
    threads = _expire_metadata(step, work.before)
    expiry_id = step.new_id("exp")
    step.add(ExpireStored(
        record_key=state.key, resource_id=state.resource_id, expiry_id=expiry_id, before=work.before,
        thread_ids=tuple(state.threads), deletes=tuple(dict.fromkeys(work.deletes)), rewrites=tuple(work.rewrites),
        threads=threads, keep_cycles=tuple(c.id for c in state.cycles)))
    step.add(ExpireIndex(state.key, state.resource_id, tuple(state.threads), work.before,
                         tuple(dict.fromkeys([*work.deletes, *(r.old_id for r in work.rewrites)]))))
    rewritten = {r.new_id for r in work.rewrites}
    for segment in state.log:
        if segment.id in rewritten and segment.kind == "observation":
            step.add(IndexForRecall(state.key, state.resource_id, segment.thread_ids, segment.id, state.epoch,
                                    messages=False, retention_ms=window))
    next_at = _next_purge(step, due.next_message_at)
    if next_at is not None:
        step.schedule(PURGE_TIMER, next_at)
    step.emit(ExpiredEvent(
        record_id=step.record_id, thread_id=step.primary_thread(), expiry_id=expiry_id,
        thread_ids=list(state.threads), retention_days=max(1, window // DAY_MS), cutoff=iso(work.before),
        expired_at=step.iso_now(), removed=ExpiredCounts(messages=0, observations=0, rewritten=0,
                                                          entries=work.entries, threads=0, cycle_results=0),
        next_purge_at=iso(next_at) if next_at is not None else None), expiry_of=expiry_id)
    step.owe_all_threads()


def held_segments(state: RecordState) -> set[str]:
    """The segments the state itself holds (its log, its buffered chunks and reflection): the purge cuts these
    entry by entry; the record's other stored segments are those earlier generations left behind."""
    held = {s.id for s in state.log} | {c.id for c in state.buffered}
    if state.buffered_reflection is not None:
        held.add(state.buffered_reflection.id)
    return held


def left_behind_expired(stored: SegmentText, before: int) -> bool:
    """A segment earlier generations left behind (kept for recall, never rendered) goes whole, not cut: when its
    newest message or any of its entries passed the window."""
    return segment_expired(stored.boundary_at, before) or cut_text(stored.text, before, stored.boundary_at).changed


def holds_expired(state: RecordState, before: int) -> bool:
    """Something the state holds (a message, an entry of a segment, a thread's derived metadata) is dated before
    the cutoff: a purge at it would change the state."""
    pinned = [t.turn_message.created_at for t in state.threads.values() if t.turn_message is not None]
    return any(at < before for at in [*_dates(state), *pinned]) or any(
        metadata_expired(thread, before) for thread in state.threads.values())


def _drop_messages(step: Step, before: int) -> None:
    state = step.state
    expired = [m for m in state.unobserved if m.created_at < before]
    if expired:
        gone = {m.id for m in expired}
        state.unobserved = [m for m in state.unobserved if m.id not in gone]
        state.unobserved_tokens -= sum(m.tokens for m in expired)
        state.last_buffered_at_tokens = min(state.last_buffered_at_tokens, step.pending())
    for thread in state.threads.values():
        if thread.turn_message is not None and thread.turn_message.created_at < before:
            thread.turn_message = None


def _cut_log(step: Step, work: _Purge) -> None:
    state = step.state
    log: list[SegmentRef] = []
    for segment in state.log:
        verdict = work.judge(step, segment.id, segment.boundary_at)
        if verdict is None:
            continue
        segment_id, tokens, dated = verdict
        log.append(replace(segment, id=segment_id, tokens=segment.tokens if tokens < 0 else tokens,
                           dated_from=dated))
    state.log = log
    state.log_tokens = sum(s.tokens for s in log)


def _cut_chunks(step: Step, work: _Purge) -> None:
    """A buffered chunk keeps covering its messages that are left (their counts with them), or goes with them; one
    that lost messages loses the hints written from them."""
    state = step.state
    chunks: list[ChunkRef] = []
    for chunk in state.buffered:
        left = [m for m in state.unobserved if chunk.first_seq <= m.seq <= chunk.last_seq]
        verdict = work.judge(step, chunk.id, chunk.last_message_at) if left else None
        if verdict is None:
            if left == [] and chunk.id not in work.deletes:
                work.deletes.append(chunk.id)
            continue
        chunk_id, tokens, dated = verdict
        kept = replace(chunk, id=chunk_id, tokens=chunk.tokens if tokens < 0 else tokens, dated_from=dated,
                       first_seq=left[0].seq, first_message_id=left[0].id, message_count=len(left),
                       message_tokens=sum(m.tokens for m in left))
        if len(left) < chunk.message_count:
            # its hints and title were written from every message it covered: the oldest of them went, so they go
            # too (derived metadata is dated by its oldest source); activating it then keeps the thread's own
            kept = replace(kept, current_task=None, suggested_response=None, thread_title=None)
        chunks.append(kept)
    state.buffered = chunks


def _cut_buffered_reflection(step: Step, work: _Purge, old_log: list[SegmentRef]) -> None:
    """A buffered reflection replaces the leading segments it condensed: those the purge removed are no longer
    among them; its own text is cut like any segment's."""
    state = step.state
    buffered = state.buffered_reflection
    if buffered is None:
        return
    covered = old_log[:buffered.covers]
    covers = sum(1 for s in covered if s.id not in work.deletes)
    verdict = work.judge(step, buffered.id, covered[-1].boundary_at) if covered and covers else None
    if verdict is None:
        if buffered.id not in work.deletes:
            work.deletes.append(buffered.id)
        state.buffered_reflection = None
        return
    segment_id, tokens, dated = verdict
    state.buffered_reflection = BufferedReflection(
        id=segment_id, cycle_id=buffered.cycle_id, generation=buffered.generation, covers=covers,
        input_tokens=sum(s.tokens for s in state.log[:covers]), tokens=buffered.tokens if tokens < 0 else tokens,
        buffered_at=buffered.buffered_at, dated_from=dated)


def _overtake_reflections(step: Step, work: _Purge, old_log: list[SegmentRef]) -> None:
    """A reflection still running over segments the purge changed describes a log that is gone."""
    for cycle in step.state.in_flight("reflection"):
        if any(s.id in work.changed for s in old_log[:cycle.covers]):
            step.drop_cycle(cycle.id)
            step.end_overtaken(cycle, "overtaken: observations it condenses passed the retention window")


def _expire_metadata(step: Step, before: int) -> tuple[str, ...]:
    """Threads whose derived metadata passed the window: it goes (from the state here, from the store with
    ``ExpireStored.threads``); the next observation of the thread writes it afresh."""
    expired = []
    for thread_id, thread in step.state.threads.items():
        if not metadata_expired(thread, before):
            continue
        thread.title = thread.current_task = thread.suggested_response = None
        thread.derived_from = None
        expired.append(thread_id)
    if expired:
        # a buffered chunk's hints were written with the thread's hints of then before the Observer (and may carry
        # them on): they go with them, or activating the chunk would bring them back
        gone = set(expired)
        step.state.buffered = [replace(c, current_task=None, suggested_response=None, thread_title=None)
                               if gone.intersection(c.thread_ids) else c for c in step.state.buffered]
    return tuple(expired)


def _next_purge(step: Step, next_message_at: int | None) -> int | None:
    """When the next thing left expires (None: nothing will), and never within the gap after this purge."""
    window = step.config.retention_ms
    assert window is not None
    dates = _dates(step.state)
    if next_message_at is not None:
        dates.append(next_message_at)
    if not dates:
        return None
    return max(_expires(min(dates), window), step.now + step.limits.purge_gap_ms)


def _dates(state: RecordState) -> list[int]:
    """The dates of what the state holds that will expire (stored messages the state no longer lists aside)."""
    dates = [m.created_at for m in state.unobserved]
    dates += [min(s.dated_from, s.boundary_at) for s in state.log]
    dates += [min(c.dated_from, c.last_message_at) for c in state.buffered]
    if state.buffered_reflection is not None:
        dates.append(state.buffered_reflection.dated_from)
    dates += [t.derived_from for t in state.threads.values() if t.derived_from is not None]
    return dates
