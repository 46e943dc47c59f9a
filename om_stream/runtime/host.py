"""The host: the one place that runs ``decide()`` and executes what it decides, in the one commit order.

The Kafka worker and the embedded ``Memory`` are drivers: each hands the host a batch of inputs (``Arrival``) and
gives it a state table, an outlet for what leaves (events, contexts, model requests, recall-index work, refusals,
failures) and the timers to keep. Commit order for a batch (one input at a time in the embedded runner):

  1. **content-store writes**, awaited: each input's writes in the engine's order as it is decided; the batch's
     message rows together at the end (they depend on nothing). Writes are idempotent (deterministic ids). A store
     that commits writes together (``ports.BatchedWrites``: SQLite) is given the whole batch's writes, in that
     order, once every input is decided: one transaction per batch. Then
     the publications are prepared, in order, through the outlet (the Kafka outlet renders them, reading the
     store): refusals and failures, events (a thread's status and progress once per batch, their newest), model
     requests and recall-index work, contexts (once per thread per batch, the newest; the outlet is handed the
     thread's earlier inputs it stands for too, ``Outlet.context(folded=...)``). Nothing leaves the process yet.
  2. **the state table**: every record's new state, only if the driver still may commit (``may_commit``).
  3. **publications**: ``outlet.commit()`` lets them go, in order (the Kafka outlet queues them on its one
     producer).
  4. **offsets**: the driver's (the Kafka worker commits its inputs' offsets after the producer flush).

``may_commit`` is asked once phase 1 is done, just before the state writes (the Kafka worker checks there that the
group still holds the batch's generation: ``runtime/worker/membership.py``). A batch it refuses has written its
phase 1 already, and the member that took its records over may have erased one of them meanwhile, its sweep done
before these writes landed: the driver's ``Erasures`` is handed what the batch wrote (``undo_if_erased``) and
removes it again for each record whose incarnation the erasure ledger says was erased. (An erasure input's own
phase 1 only removes, or rebuilds a record that is not erased: nothing of it needs undoing.)

Before deciding, a clear is handed the record's conversation (its stored messages, read from the content store),
which comes back to the record as unobserved; a record's retention purge (its ``retention:purge`` timer) is
handed its stored segments and its oldest message left after the cutoff (``core.expiry``). An input that leaves a
record it had to make unchanged (a refused command for a thread no message reached) makes no record.

An erase (``core.erasure``) is an input of its own: the batch is cut at it, so that everything before it is
committed first and everything after it is decided once it is (its fence is in place, its records are gone). The
driver's ``Erasures`` does its store work (phase 1) and prepares its publications on the outlet; the host then
writes what it returns to the state table (phase 2: records deleted, fences) and lets the publications go (phase
3). An input of an erased subject that was published before its erase (the driver's fence says so) is dropped
before it is decided; a record made again for an erased subject starts after the erased incarnation's epoch.

A crash anywhere replays the inputs from the last committed offsets, and every effect tolerates being applied
twice. One input never stops the others: if its handling fails, ``outlet.failed`` is told why (the Kafka worker
dead-letters it) and the batch goes on. When a batch's writes committed together are refused (not an outage), the
batch is decided again input by input, each input's writes on their own, so that only the inputs whose writes the
store refuses fail. A store outage is not such a failure (``StoreRetry``): the Kafka worker
retries until the store is back; in the embedded runner the error reaches the caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Generic, TypeVar

from opentelemetry.trace import Link, get_current_span

from om_stream.core.commands import (
    STORE,
    ClearStored,
    Command,
    CommitGeneration,
    EmitEvent,
    ExpireIndex,
    ExpireStored,
    IndexForRecall,
    PersistMessage,
    PersistSegment,
    PersistThreadMetadata,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.config import ResolvedConfig
from om_stream.core.engine import decide, new_record, retention_cutoff
from om_stream.core.erasure import ErasureInput, StrayWrites
from om_stream.core.events import ProgressEvent, StatusEvent
from om_stream.core.expiry import fires_purge
from om_stream.core.inputs import ClearRecord, ExpiryDue, ReportProgress, TimerFired
from om_stream.core.progress import needs_stored_seq
from om_stream.core.recall.records import StoredMessage
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.errors import StorageError
from om_stream.observability.tracing import Tracing
from om_stream.ports import Clock
from om_stream.runtime.effects import Effects
from om_stream.runtime.host_ports import Arrival, Decided, Erasures, Outlet, StateTable, StoreRetry, Timers
from om_stream.runtime.settled import stored_seq
from om_stream.runtime.spans import recording, traced

__all__ = ["Host"]

log = logging.getLogger(__name__)
S = TypeVar("S")  # the driver's record of an input (the Kafka worker's ``SourceRecord``; None in-process)
# the commands published one by one in the engine's order (the others are folded per batch, or are store writes);
# a tuple made once: ``A | B | ...`` written inside ``isinstance`` builds a union on every call
_PUBLISHED_IN_ORDER = (EmitEvent, RequestObservation, RequestReflection, IndexForRecall, ExpireIndex, RejectInput,
                       ClearStored)


@dataclass
class _Batch(Generic[S]):
    states: dict[str, tuple[RecordState, Arrival[S]]] = field(default_factory=dict)
    messages: list[tuple[PersistMessage, Arrival[S]]] = field(default_factory=list)
    writes: list[Command] = field(default_factory=list)  # held for one commit (a store that batches writes)
    decided: list[Decided[S]] = field(default_factory=list)  # told ``on_decided`` once phase 1's writes are done
    out: list[tuple[Command, Arrival[S]]] = field(default_factory=list)  # phase 3, in order
    statuses: dict[str, tuple[EmitEvent, Arrival[S]]] = field(default_factory=dict)
    progress: dict[str, tuple[EmitEvent, Arrival[S]]] = field(default_factory=dict)  # changes, not answers
    contexts: dict[str, tuple[PublishContext, Arrival[S]]] = field(default_factory=dict)
    folded: dict[str, list[Arrival[S]]] = field(default_factory=dict)  # by thread: the inputs a newer one superseded
    failures: list[tuple[Arrival[S], str, str, BaseException]] = field(default_factory=list)


class Host(Generic[S]):
    """Typed by the driver's record of an input (``S``): its table, its outlets and its erasures take arrivals of
    that record, and the host hands them on without looking at it."""

    def __init__(self, *, config: ResolvedConfig, accountant: TokenAccountant, effects: Effects, table: StateTable[S],
                 outlets: Callable[[], Outlet[S]], timers: Timers, clock: Clock, limits: EngineLimits | None = None,
                 store_retry: StoreRetry | None = None, on_decided: Callable[[Decided[S]], None] | None = None,
                 on_publish_error: Callable[[], None] | None = None, erasures: Erasures[S] | None = None,
                 tracing: Tracing | None = None) -> None:
        self.config = config
        self.accountant = accountant
        self.effects = effects
        self.table = table
        self.outlets = outlets  # an outlet for each batch (the embedded runner applies batches concurrently)
        self.timers = timers
        self.clock = clock
        self.limits = limits or EngineLimits()
        self.store_retry = store_retry or StoreRetry()
        self.on_decided = on_decided
        self.on_publish_error = on_publish_error
        self.erasures = erasures
        self.tracing = tracing or Tracing.off()

    async def apply(self, arrivals: Sequence[Arrival[S]], *,
                    may_commit: Callable[[], Awaitable[bool]] | None = None) -> bool:
        """Decide every arrival and commit the batch in order, an erasure input on its own between the others.
        False: ``may_commit`` said no before the state table was written for a part of the batch (nothing of that
        part or after it was written to the table or published; the parts before it were committed)."""
        run: list[Arrival[S]] = []
        for arrival in arrivals:
            if isinstance(arrival.input, ErasureInput):
                if run and not await self._apply(run, may_commit):
                    return False
                run = []
                if not await self._erase(arrival, may_commit):
                    return False
            else:
                run.append(arrival)
        return await self._apply(run, may_commit) if run else True

    async def _erase(self, arrival: Arrival[S], may_commit: Callable[[], Awaitable[bool]] | None) -> bool:
        outlet = self.outlets()
        try:
            writes: list[Callable[[], None]] = []
            try:
                if self.erasures is None:
                    raise TypeError("this driver cannot erase")
                writes = await self._erasure_prepared(self.erasures, arrival, outlet)
            except StorageError as exc:
                if exc.transient:
                    raise  # only without retry_outages: the store is down, the caller hears of it
                outlet.discard()
                await outlet.failed(arrival, "store_refused", str(exc), exc)
            except Exception as exc:  # one input must never stop the others
                log.exception("erasure input %s for %s could not be handled", type(arrival.input).__name__,
                              arrival.key)
                outlet.discard()
                await outlet.failed(arrival, "processing_error", f"{type(exc).__name__}: {exc}", exc)
            if may_commit is not None and not await may_commit():
                outlet.discard()
                return False
            for write in writes:
                write()
            await outlet.commit()
        except BaseException:
            outlet.discard()
            raise
        return True

    async def _erasure_prepared(self, erasures: Erasures[S], arrival: Arrival[S],
                                outlet: Outlet[S]) -> list[Callable[[], None]]:
        """An erasure input's phase 1, a ``delete_memory`` span (the GenAI conventions' memory deletion) in the
        input's trace when it has one: its store sweep is where an erase spends its time."""
        if not recording(arrival.trace):
            return await erasures.prepare(arrival, outlet)
        with traced(self.tracing.tracer, "delete_memory om-stream", context=arrival.trace, attributes={
                "gen_ai.operation.name": "delete_memory", "gen_ai.memory.store.id": "om-stream",
                "om.erase.step": type(arrival.input).__name__}):
            return await erasures.prepare(arrival, outlet)

    async def decide_on(self, state: RecordState, arrival: Arrival[S], outlet: Outlet[S]) -> RecordState:
        """Decide ``arrival`` on ``state`` (not the table's): its store writes done now, its publications prepared
        on ``outlet``; returns the new state, for the caller to write in its own phase 2. For an erase that changes
        a record rather than removing it (one thread of a resource's record: a clear of what remains)."""
        batch: _Batch[S] = _Batch()
        batch.states[arrival.key] = (state, arrival)
        await self._decide(arrival, batch, hold_writes=False)
        await self._write_messages(batch)
        await self._publish(batch, outlet)
        return batch.states[arrival.key][0]

    async def _apply(self, arrivals: Sequence[Arrival[S]], may_commit: Callable[[], Awaitable[bool]] | None) -> bool:
        if self.erasures is not None:
            arrivals = [a for a in arrivals if not self.erasures.fenced(a)]
        batch = await self._written_together(arrivals) if self.effects.batches_writes else None
        if batch is None:
            batch = await self._decide_all(arrivals, hold_writes=False)
            await self._write_messages(batch)
        if self.on_decided is not None:
            for decided in batch.decided:
                self.on_decided(decided)
        outlet = self.outlets()
        try:
            await self._publish(batch, outlet)
            if may_commit is not None and not await may_commit():
                outlet.discard()
                if self.erasures is not None:
                    await self.erasures.undo_if_erased(_written(batch))
                return False
            # 2. the state table, and the timers the states hold
            for key, (state, arrival) in batch.states.items():
                self.table.set(arrival, state)
                self.timers.track(key, state.timers)
            # 3. the publications, in order
            await outlet.commit()
        except BaseException:  # a store outage the caller hears of, or a cancelled agent: nothing prepared stays
            outlet.discard()
            raise
        return True

    async def _decide_all(self, arrivals: Sequence[Arrival[S]], *, hold_writes: bool) -> _Batch[S]:
        batch: _Batch[S] = _Batch()
        for arrival in arrivals:
            try:
                await self._decide(arrival, batch, hold_writes=hold_writes)
            except StorageError as exc:
                if exc.transient:
                    raise  # only without retry_outages: the store is down, the caller hears of it
                batch.failures.append((arrival, "store_refused", str(exc), exc))
            except Exception as exc:  # one input must never stop the others: the driver is told, and why
                log.exception("input %s for %s could not be handled", type(arrival.input).__name__, arrival.key)
                batch.failures.append((arrival, "processing_error", f"{type(exc).__name__}: {exc}", exc))
        return batch

    async def _written_together(self, arrivals: Sequence[Arrival[S]]) -> _Batch[S] | None:
        """Phase 1 for a store that commits writes together: every input decided, then the batch's writes in one
        commit. None: the store refused them (not an outage), and nothing of the batch was written."""
        batch = await self._decide_all(arrivals, hold_writes=True)
        writes = [*batch.writes, *(m for m, _ in batch.messages)]
        if not writes:
            return batch
        try:
            with self._traced_batch_write(arrivals, writes):
                await self.store_retry("write", partial(self.effects.write_together, writes))
        except StorageError as exc:
            if exc.transient:
                raise  # only without retry_outages: the store is down, the caller hears of it
            refusal: Exception = exc
        except Exception as exc:  # noqa: BLE001 - failed outside the store's errors: as input by input
            refusal = exc
        else:
            return batch
        log.warning("the content store refused a batch of %d inputs' writes (%s: %s); writing them input by input",
                    len(arrivals), type(refusal).__name__, refusal)
        return None

    def _traced_batch_write(self, arrivals: Sequence[Arrival[S]],
                            writes: Sequence[Command]) -> AbstractContextManager[object]:
        """The span of a batch's writes committed together: in the trace of its first traced input, linked to the
        others' (one commit serves them all); nothing when no input of it is traced."""
        traces = [arrival.trace for arrival in arrivals if recording(arrival.trace)]
        if not traces:
            return nullcontext()
        links = [Link(get_current_span(trace).get_span_context()) for trace in traces[1:]]
        return traced(self.tracing.tracer, "om.store write", context=traces[0], links=links, attributes={
            "om.store.operation": "write", "om.store.inputs": len(arrivals),
            "om.store.commands": sorted({type(c).__name__ for c in writes})})

    async def _write_messages(self, batch: _Batch[S]) -> None:
        """Phase 1, end: the message rows, which depend on nothing, written together (one alone needs no task of
        its own); a row the store refuses fails its input."""
        writes = [self._traced_write(m, arrival) for m, arrival in batch.messages]
        outcomes: list[object] = ([await _outcome(writes[0])] if len(writes) == 1 else
                                  list(await asyncio.gather(*writes, return_exceptions=True)))
        for (_, arrival), outcome in zip(batch.messages, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, StorageError) and outcome.transient:
                    raise outcome
                batch.failures.append((arrival, "store_refused", str(outcome), outcome))

    async def _traced_write(self, message: PersistMessage, arrival: Arrival[S]) -> None:
        """One message row written, in its input's trace when it has one."""
        if not recording(arrival.trace):
            await self.store_retry("write", partial(self.effects.write, [message]))
            return
        with traced(self.tracing.tracer, "om.store write", context=arrival.trace,
                    attributes={"om.store.operation": "write", "om.store.commands": ["PersistMessage"]}):
            await self.store_retry("write", partial(self.effects.write, [message]))

    async def _decide(self, arrival: Arrival[S], batch: _Batch[S], *, hold_writes: bool) -> None:
        held = batch.states.get(arrival.key)
        state = held[0] if held is not None else self.table.get(arrival)
        created = state is None
        if state is None:
            if not arrival.resource_id:
                return  # a result or timer for a record not held here
            state = new_record(arrival.key, self.config.scope, arrival.resource_id)
            if self.erasures is not None:
                state.epoch = self.erasures.epoch_floor(arrival)
        event = arrival.input
        assert not isinstance(event, ErasureInput)  # cut out of the batch by ``apply``
        now_ms = self.clock.now_ms()
        if isinstance(event, ClearRecord) and state.holds_conversation:
            event = await self._with_conversation(event, state, batch)
        elif isinstance(event, ReportProgress) and needs_stored_seq(state, event):
            event = await self._with_stored_seq(event, state)
        elif isinstance(event, TimerFired) and fires_purge(state, event):
            event = await self._expiry_due(event, state, now_ms)
        began = time.perf_counter()
        decision = decide(state, event, now_ms, self.config, self.accountant, self.limits)
        decided = Decided(arrival, state, decision.state, decision.commands, now_ms, time.perf_counter() - began)
        if recording(arrival.trace):
            self._trace_decided(decided, began)
        # 1. this input's store writes, in the engine's order (message rows wait for the end of the batch)
        batch.decided.append(decided)
        ordered = [c for c in decision.commands if not isinstance(c, PersistMessage)]
        if hold_writes:
            batch.writes.extend(ordered)
        elif recording(arrival.trace) and any(c.phase == STORE for c in ordered):
            # the span names the kinds of the store's writes (the core's phase says which commands are), no value
            with traced(self.tracing.tracer, "om.store write", context=arrival.trace,
                        attributes={"om.store.operation": "write", "om.store.commands": sorted(
                            {type(c).__name__ for c in ordered if c.phase == STORE})}):
                await self.store_retry("write", lambda: self.effects.write(ordered))
        else:
            await self.store_retry("write", lambda: self.effects.write(ordered))
        # an input that changed nothing (a refusal) makes no record; a question (the record itself handed back)
        # writes nothing
        if decision.state is not state and (not created or decision.state != state):
            batch.states[arrival.key] = (decision.state, arrival)
        for command in decision.commands:
            if isinstance(command, PersistMessage):
                batch.messages.append((command, arrival))
            elif isinstance(command, PublishContext):
                thread_id = command.spec.thread_id
                superseded = batch.contexts.get(thread_id)
                if superseded is not None and superseded[1] is not arrival:
                    batch.folded.setdefault(thread_id, []).append(superseded[1])
                batch.contexts[thread_id] = (command, arrival)
            elif isinstance(command, EmitEvent) and isinstance(command.event, StatusEvent):
                batch.statuses[command.event.thread_id] = (command, arrival)  # a snapshot: the newest says it all
            elif (isinstance(command, EmitEvent) and isinstance(command.event, ProgressEvent)
                  and command.event.request_id is None):
                batch.progress[command.event.thread_id] = (command, arrival)  # likewise (an answer is not)
            elif isinstance(command, _PUBLISHED_IN_ORDER):
                batch.out.append((command, arrival))

    def _trace_decided(self, decided: Decided[S], began: float) -> None:
        """The span of ``decide`` for one input, from its typed output: what came in and what it decided (the kinds of
        commands, never their contents). Decide is pure and synchronous, so its span is written after the fact."""
        began_ns = time.time_ns() - int((time.perf_counter() - began) * 1e9)
        span = self.tracing.tracer.start_span(
            "om.decide", context=decided.arrival.trace, start_time=began_ns,
            attributes={"om.input": type(decided.arrival.input).__name__,
                        "om.commands": sorted({type(c).__name__ for c in decided.commands}),
                        "om.generation": decided.after.generation})
        span.end(began_ns + int(decided.seconds * 1e9))

    async def _expiry_due(self, timer: TimerFired, state: RecordState, now_ms: int) -> TimerFired | ExpiryDue:
        """A purge timer with what the purge reads: the record's stored segments and its oldest message left (the
        batch's message rows, written at its end, are in the state's unobserved list, which the purge reads too)."""
        before = retention_cutoff(self.config, state, now_ms)
        if before is None:
            return timer  # the window was lifted meanwhile: the engine drops the timer
        segments, next_at = await self.store_retry("read", partial(self.effects.expiry_reads, state, before))
        return ExpiryDue(before, tuple(segments), next_at)

    async def _with_conversation(self, event: ClearRecord, state: RecordState, batch: _Batch[S]) -> ClearRecord:
        """A clear with the record's conversation: the messages the store holds, and those of this batch whose
        rows are written at its end."""
        stored = await self.store_retry("read", partial(self.effects.conversation, state))
        pending = [StoredMessage(m.message, m.record_key, m.seq, m.tokens) for m, _ in batch.messages
                   if m.record_key == state.key]
        by_id = {s.message.message_id: s for s in [*stored, *pending]}
        return replace(event, conversation=tuple(sorted(by_id.values(), key=lambda s: s.seq)))

    async def _with_stored_seq(self, event: ReportProgress, state: RecordState) -> ReportProgress:
        """A progress question about a message the record no longer names, with its seq as the store holds it."""
        seq = await self.store_retry("read", partial(stored_seq, self.effects.store, state, event.thread_id,
                                                     event.through_message_id or ""))
        return replace(event, stored_seq=seq)

    async def _publish(self, batch: _Batch[S], outlet: Outlet[S]) -> None:
        for arrival, reason, detail, error in batch.failures:
            await outlet.failed(arrival, reason, detail, error)
        for command, arrival in batch.out:
            await self._isolated(partial(self._publish_one, outlet, command, arrival, batch))
        for status, arrival in [*batch.statuses.values(), *batch.progress.values()]:
            await self._isolated(partial(self._publish_one, outlet, status, arrival, batch))
        for thread_id, (context, arrival) in batch.contexts.items():
            await self._isolated(partial(outlet.context, context, arrival, folded=batch.folded.get(thread_id, ())))

    async def _publish_one(self, outlet: Outlet[S], command: Command, arrival: Arrival[S], batch: _Batch[S]) -> None:
        if isinstance(command, EmitEvent):
            event = await self.store_retry("read", partial(self.effects.event, command))
            await outlet.event(event, command, arrival)
        elif isinstance(command, (RequestObservation, RequestReflection)):
            await outlet.request(command, arrival)
        elif isinstance(command, IndexForRecall):
            await outlet.index(command, arrival)
        elif isinstance(command, ExpireIndex):
            await outlet.expire_index(command, arrival)
        elif isinstance(command, ClearStored):
            await outlet.forget(batch.states[command.record_key][0].resource_id, command.record_key, arrival)
        elif isinstance(command, RejectInput):
            await outlet.refuse(command, arrival)

    async def _isolated(self, publish: Callable[[], Awaitable[None]]) -> None:
        """One publication failing (a defect: a context that cannot be rendered) never stops the others; the
        record's next input publishes again. A store outage that is not retried reaches the caller."""
        try:
            await publish()
        except Exception as exc:
            if isinstance(exc, StorageError) and exc.transient:
                raise
            log.exception("a publication failed; the record's next input publishes again")
            if self.on_publish_error is not None:
                self.on_publish_error()


def _written(batch: _Batch[S]) -> list[StrayWrites]:
    """What a batch wrote to the content store, by record, with the epoch of the incarnation it decided on (the
    lowest: a clear in the batch starts a later one, whose writes still come of the record the batch began
    with)."""
    written: dict[str, StrayWrites] = {}
    for decided in batch.decided:
        before = decided.before
        held = written.get(before.key)
        messages, segments, generations, threads = (
            (list(held.message_ids), list(held.segment_ids), list(held.generations), list(held.thread_ids))
            if held is not None else ([], [], [], []))
        for command in decided.commands:
            if isinstance(command, PersistMessage):
                messages.append(command.message.message_id)
            elif isinstance(command, PersistSegment):
                segments.append(command.segment_id)
            elif isinstance(command, ExpireStored):
                segments.extend(r.new_id for r in command.rewrites)
            elif isinstance(command, CommitGeneration):
                generations.append(command.generation)
            elif isinstance(command, PersistThreadMetadata):
                threads.append(command.thread_id)
        epoch = before.epoch if held is None else min(held.epoch, before.epoch)
        written[before.key] = StrayWrites(
            before.key, before.record_id, before.resource_id, epoch, tuple(dict.fromkeys(messages)),
            tuple(dict.fromkeys(segments)), tuple(dict.fromkeys(generations)), tuple(dict.fromkeys(threads)))
    return [w for w in written.values() if w.message_ids or w.segment_ids or w.generations or w.thread_ids]


async def _outcome(call: Awaitable[object]) -> object:
    """What ``asyncio.gather(..., return_exceptions=True)`` gives for one awaitable: its result or its error."""
    try:
        return await call
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, which sorts transient from refused
        return exc
