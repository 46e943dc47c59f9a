"""Erasure in the Kafka worker: the fences, the parts of an erase and its coordinator (``core.erasure``).

**The fence.** An erase is handled by the owner of each partition it concerns, in order with that partition's
other inputs. When a part is handled, the worker reads the end offset of ``om.messages`` on its partition from the
brokers (in resource scope, the end offsets of every partition of ``om.messages``, since a resource's threads are
spread over them and its inputs are re-keyed onto one partition of ``om.records``): every message of the subject
below it was appended to the log before the erase was handled. Those already handled are in the stores and are
swept now; those not handled yet (lagging behind, or read again after a crash) are dropped when they arrive
(:meth:`WorkerErasures.fenced`). A message appended afterwards is a new conversation: it starts a fresh record,
whose epoch continues after the erased one's, so none of its ids, cycle ids and model requests included, is ever
an erased incarnation's. The offsets are read once per part and kept in the ledger before anything is removed:
a part handled again (a crash before its input's offset was committed) reuses them, and does not sweep again once
its counts are in the ledger, so nothing handled after the erase is ever removed by a replay of it.

Model results and timers need no fence: they only act on a record that exists, and a fresh record's cycles have
other ids. Work sent before the erase to the model workers (an Observer call, indexing) is fenced by the ledger's
note of the erased epoch (``runtime/erasure.py``). Fences live in a table of their own (``om_erasures``, a
changelog like the record table's, on the same partitions) until the input topics' retention has removed every
record below them (``retention.fence_window_ms``).

**The parts.** A thread (and anything in resource scope: one record holds a resource) is erased by one part, on
its home partition. A resource in thread scope has threads on every partition: the owner of the resource key's
partition, the *coordinator*, sends an ``ErasePart`` to every partition of the results topic (each handled by its
owner like any input), each part erases the resource's records it holds and reports ``ErasePartDone`` back. Then
the coordinator asks a model worker to sweep the recall index (``EraseIndexed`` → ``EraseIndexDone``: the index is
the model workers'), and publishes the receipt.

**Contexts by reference** (``OM_CONTEXT_WIRE=v2``). Each part also reads its erased threads' partitions of
``om.context.blocks`` and tombstones every block of theirs the topic holds (``context_sweep.ContextSweep``), sent and
acknowledged before the part's counts go to the ledger: a replay after that row finds them already out.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from om_stream.core.erasure import (
    EraseIndexDone,
    ErasePart,
    ErasePartDone,
    EraseRequested,
    ErasureCounts,
    ErasureSaga,
    Fence,
    PartRecord,
    StrayWrites,
    record_digest,
    subject_digest,
)
from om_stream.core.inputs import MessageAppended
from om_stream.core.state import RecordState
from om_stream.observability.metrics import Metrics
from om_stream.ports import Clock, ContentStore
from om_stream.runtime.effects import message_prefix
from om_stream.runtime.erasure import Sweeper, receipt
from om_stream.runtime.host_ports import Arrival, Outlet, StoreRetry
from om_stream.runtime.internal_codec import EraseIndexed
from om_stream.runtime.worker.context_sweep import ContextSweep
from om_stream.runtime.worker.faust_internals import in_event
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.outlet import KafkaOutlet
from om_stream.runtime.worker.state_table import RecordTable, record_event
from om_stream.settings import KafkaSettings

__all__ = ["COMPLETED_PART", "ERASURE_TABLE", "ErasureTable", "WorkerErasures", "source_position"]

log = logging.getLogger(__name__)

ERASURE_TABLE = "om_erasures"
COMPLETED_PART = -1  # the ledger row that says an erase is done: its counts are the receipt's
EndOffsets = Callable[[str, list[int]], Awaitable[dict[int, int] | None]]
Writes = list[Callable[[], None]]


def source_position(record: SourceRecord, messages_topic: str) -> tuple[int, int] | None:
    """Where a message input sits in ``om.messages`` (partition, offset): its own position, or the one the ingest
    agent copied into the headers when it re-keyed it (resource scope). None: not a message of that topic."""
    if record.topic == messages_topic:
        return record.partition, record.offset
    headers = dict(record.headers)
    partition, offset = headers.get("om_source_partition"), headers.get("om_source_offset")
    if partition is None or offset is None:
        return None
    try:
        return int(partition), int(offset)
    except ValueError:
        return None


class ErasureTable:
    """``om_erasures``: fences (``fence:<partition>:<digest>``) and coordinators' progress (``erase:<erase id>``),
    JSON, each on the changelog partition of the input it was written for (as the record table)."""

    def __init__(self, app: Any, *, partitions: int, changelog_config: Mapping[str, str] | None = None) -> None:
        # changelog_config: the lifecycle settings' configuration of a changelog (retention.changelog_config)
        self.table = app.Table(ERASURE_TABLE, default=None, partitions=partitions, use_partitioner=False,
                               key_type=bytes, value_type=bytes, extra_topic_configs=dict(changelog_config or {}))

    def get(self, arrival: Arrival[SourceRecord], key: str) -> dict[str, Any] | None:
        with in_event(record_event(arrival)):
            raw = self.table.get(key.encode())
        return json.loads(raw) if isinstance(raw, bytes) else None

    def set(self, arrival: Arrival[SourceRecord], key: str, value: dict[str, Any]) -> None:
        with in_event(record_event(arrival)):
            self.table[key.encode()] = json.dumps(value, separators=(",", ":")).encode()

    def delete(self, arrival: Arrival[SourceRecord], key: str) -> None:
        with in_event(record_event(arrival)):
            if key.encode() in self.table:
                del self.table[key.encode()]

    def expired_fences(self, partition: int, now_ms: int) -> list[str]:
        """Keys of the fences of ``partition`` past their expiry (a scan of what this worker holds)."""
        prefix = f"fence:{partition}:".encode()
        found = []
        for raw_key, raw in list(self.table.data.items()):
            if isinstance(raw_key, bytes) and raw_key.startswith(prefix) and isinstance(raw, bytes) \
                    and Fence.from_dict(json.loads(raw)).expired(now_ms):
                found.append(raw_key.decode())
        return found


class WorkerErasures:
    """The host's ``Erasures`` for the Kafka worker."""

    def __init__(self, *, kafka: KafkaSettings, scope: str, records: RecordTable, table: ErasureTable,
                 store: ContentStore, sweeper: Sweeper, end_offsets: EndOffsets, clock: Clock, metrics: Metrics,
                 store_retry: StoreRetry, fence_ttl_s: int, indexing: bool,
                 decide_clear: Callable[[RecordState, Arrival[SourceRecord], KafkaOutlet],
                                        Awaitable[RecordState]],
                 context_sweep: ContextSweep | None = None) -> None:
        self.kafka = kafka
        self.scope = scope
        self.records = records
        self.table = table
        self.store = store
        self.sweeper = sweeper
        self.end_offsets = end_offsets
        self.clock = clock
        self.metrics = metrics
        self.retry = store_retry
        self.fence_ttl_s = fence_ttl_s
        self.indexing = indexing  # a recall index is kept: the model workers sweep it
        # resource scope, one thread erased: the record's log cleared and rebuilt without it (``Host.decide_on``)
        self.decide_clear = decide_clear
        # OM_CONTEXT_WIRE=v2: the erased threads' blocks, index and cursor, read from the topics and tombstoned
        self.context_sweep = context_sweep

    # -- the host's Erasures -----------------------------------------------------------------------------------------

    def fenced(self, arrival: Arrival[SourceRecord]) -> bool:
        event = arrival.input
        source = arrival.source
        if not isinstance(event, MessageAppended):
            return False
        position = source_position(source, self.kafka.topic_messages)
        if position is None:
            return False
        message = event.message
        now = self.clock.now_ms()
        for kind, subject in (("thread", message.thread_id), ("resource", message.resource_id)):
            fence = self._fence(arrival, kind, subject)
            if fence is not None and not fence.expired(now) and fence.covers(*position):
                self.metrics.erasure_fenced_inputs.inc()
                log.info("a message published before an erase of its %s was dropped (%s[%d]@%d)", kind,
                         source.topic, source.partition, source.offset)
                return True
        return False

    def epoch_floor(self, arrival: Arrival[SourceRecord]) -> int:
        fence = self._fence(arrival, self._record_kind, arrival.key)
        return fence.epoch_through + 1 if fence is not None else 0

    @property
    def _record_kind(self) -> str:
        """What a record of this deployment is: a thread, or a resource (resource scope)."""
        return "resource" if self.scope == "resource" else "thread"

    def _fence(self, arrival: Arrival[SourceRecord], kind: str, subject: str) -> Fence | None:
        found = self.table.get(arrival, _fence_key(arrival.source.partition, kind, subject))
        return Fence.from_dict(found) if found is not None else None

    async def prepare(self, arrival: Arrival[SourceRecord], outlet: Outlet[SourceRecord]) -> Writes:
        if not isinstance(outlet, KafkaOutlet):  # the memory agent's host makes its outlets (``new_outlet``)
            raise TypeError(f"the worker's erasures publish on its Kafka outlet, not {outlet!r}")
        event = arrival.input
        writes: Writes = [partial(self.table.delete, arrival, key)
                          for key in self.table.expired_fences(arrival.source.partition, self.clock.now_ms())]
        if isinstance(event, EraseRequested):
            writes += await self._requested(arrival, event, outlet)
        elif isinstance(event, ErasePart):
            writes += await self._part(arrival, event, outlet)
        elif isinstance(event, ErasePartDone):
            writes += await self._part_done(arrival, event, outlet)
        elif isinstance(event, EraseIndexDone):
            writes += await self._index_done(arrival, event, outlet)
        return writes

    async def undo_if_erased(self, written: Sequence[StrayWrites]) -> None:
        # The group moved on while this batch was in its phase 1 (a store stalled for this member alone): the new
        # owner of a record may have handled an erase of it meanwhile, and swept before these writes landed. The
        # new owner notes the erased epoch in the ledger before its sweep, and these writes are durable before
        # ``may_commit`` was asked: either the sweep came after them and removed them, or this read sees the note.
        # The thread metadata the batch wrote goes whole, even if a later incarnation of the thread wrote to it since
        # (its row is the thread's, not an incarnation's): every field of it is derived by the Observer, which that
        # incarnation's next observation writes again, while keeping the row could keep the erased conversation's
        # title, task or working memory.
        for writes in written:
            through = await self._ledger(partial(self.store.erased_through, record_digest(writes.record_key)))
            if through is None or through < writes.epoch:
                continue  # not erased, or erased before the incarnation this batch decided on
            counts = await self._ledger(partial(self.store.erase_writes, writes))
            self._forget(writes)
            self.metrics.erasure_writes_undone.labels("refused_batch").inc(counts.total)
            log.info("a refused batch's writes of an erased record were removed again: %s", counts.as_dict())

    def _forget(self, writes: StrayWrites) -> None:
        """What this process's cache holds of what was removed: the messages by id, the record's segment texts
        and every condensed log (``Effects.forget``)."""
        effects = self.sweeper.effects
        messages = {message_prefix(writes.resource_id) + i for i in writes.message_ids}
        effects.cache.evict(lambda key, _: key in messages)
        effects.forget(writes.resource_id, writes.thread_ids, [writes.record_id])

    # -- the inputs --------------------------------------------------------------------------------------------------

    async def _requested(self, arrival: Arrival[SourceRecord], event: EraseRequested, outlet: KafkaOutlet) -> Writes:
        here = arrival.source.partition
        saga = ErasureSaga(event.erase_id, event.scope, event.resource_id, event.thread_id, event.requested_at,
                           parts=1)
        done = await self._ledger(partial(self.store.erasure_part, event.erase_id, COMPLETED_PART))
        if done is not None:  # handled again after it finished: the receipt again (the same event id), nothing more
            await self._receipt(arrival, outlet, replace(saga, counts=done.counts or ErasureCounts(),
                                                         found=done.found, done=(here,)),
                                completed_at=done.completed_at or 0)
            return []
        if event.scope == "resource" and self.scope == "thread":
            assert event.resource_id is not None  # the wire contract: a resource erase names its resource
            known = self.table.get(arrival, _saga_key(event.erase_id))
            saga = ErasureSaga.from_dict(known) if known else replace(saga, parts=self.kafka.partitions)
            for partition in range(saga.parts):
                outlet.internal(self.kafka.topic_model_results, _saga_key(event.erase_id),
                                ErasePart(event.erase_id, event.resource_id, here, saga.parts,
                                               event.requested_at), partition)
            return [partial(self.table.set, arrival, _saga_key(event.erase_id), saga.to_dict())]
        # one part, here: a thread in thread scope; a thread or a resource in resource scope
        counts, found, verified, writes = await self._erase_here(arrival, event, outlet)
        saga = saga.part_done(here, counts, found, verified)
        if event.resource_id is None and event.scope == "thread":
            saga = replace(saga, resource_id=await self._subject_resource(arrival, event))
        return writes + await self._after_parts(arrival, saga, outlet)

    async def _part(self, arrival: Arrival[SourceRecord], event: ErasePart, outlet: KafkaOutlet) -> Writes:
        """One partition's share of a resource erase (thread scope): the resource's records held here."""
        here = arrival.source.partition
        row, offsets = await self._begin(event.erase_id, here, [here])
        held = [r.state for r in self.records.on_partition(here, event.resource_id)]
        writes: Writes = []
        if row is not None and row.counts is not None:
            # swept before (a crash came before this input's offset was committed): nothing more is removed but
            # the erased incarnations' records, if their deletion was not committed; the report goes again
            counts, found, verified = row.counts, row.found, True
            for state in held:
                if await self._erased_before(state):
                    writes += self._drop_record(arrival, state, offsets)
        else:
            swept = await self.sweeper.records(held)
            counts, found, verified = swept.counts, swept.found, swept.verified
            counts += await self._forget_contexts(arrival, held, outlet)
            for state in held:
                writes += self._drop_record(arrival, state, offsets)
            await self._ledger(partial(self.store.put_erasure_part,
                                       PartRecord(event.erase_id, here, offsets, counts, found), self.fence_ttl_s))
        fence = Fence(event.erase_id, offsets, 0, self.clock.now_ms(), self._expiry())
        writes.append(partial(self.table.set, arrival, _fence_key(here, "resource", event.resource_id),
                              fence.to_dict()))
        outlet.internal(self.kafka.topic_model_results, _saga_key(event.erase_id),
                        ErasePartDone(event.erase_id, here, counts.as_dict(), found, verified), event.coordinator)
        return writes

    async def _part_done(self, arrival: Arrival[SourceRecord], event: ErasePartDone,
                         outlet: KafkaOutlet) -> Writes:
        known = self.table.get(arrival, _saga_key(event.erase_id))
        if known is None:
            return []  # finished already (a report seen again), or never started here
        saga = ErasureSaga.from_dict(known).part_done(event.part, ErasureCounts.from_dict(event.counts),
                                                      event.found, event.verified)
        if not saga.parts_done:
            return [partial(self.table.set, arrival, _saga_key(event.erase_id), saga.to_dict())]
        return await self._after_parts(arrival, saga, outlet)

    async def _index_done(self, arrival: Arrival[SourceRecord], event: EraseIndexDone,
                          outlet: KafkaOutlet) -> Writes:
        known = self.table.get(arrival, _saga_key(event.erase_id))
        if known is None:
            return []
        return await self._finish(arrival, outlet,
                                  ErasureSaga.from_dict(known).index_done(event.removed, event.remaining))

    # -- the steps ---------------------------------------------------------------------------------------------------

    async def _after_parts(self, arrival: Arrival[SourceRecord], saga: ErasureSaga, outlet: KafkaOutlet) -> Writes:
        """Every part is done: the recall index next (the model workers hold it), or the receipt."""
        resource = saga.resource_id
        if not self.indexing or resource is None:
            return await self._finish(arrival, outlet, saga)
        saga = replace(saga, index_pending=True)
        outlet.internal(self.kafka.topic_model_requests, _saga_key(saga.erase_id),
                        EraseIndexed(saga.erase_id, resource, saga.thread_id if saga.scope == "thread" else None),
                        arrival.source.partition)
        return [partial(self.table.set, arrival, _saga_key(saga.erase_id), saga.to_dict())]

    async def _finish(self, arrival: Arrival[SourceRecord], outlet: KafkaOutlet, saga: ErasureSaga) -> Writes:
        completed_at = self.clock.now_ms()
        await self._ledger(partial(self.store.put_erasure_part, PartRecord(
            saga.erase_id, COMPLETED_PART, (), saga.counts, saga.found, completed_at), self.fence_ttl_s))
        await self._receipt(arrival, outlet, saga, completed_at=completed_at)
        return [partial(self.table.delete, arrival, _saga_key(saga.erase_id))]

    async def _receipt(self, arrival: Arrival[SourceRecord], outlet: KafkaOutlet, saga: ErasureSaga, *,
                       completed_at: int) -> None:
        await outlet.erased(receipt(saga, completed_at=completed_at, verified=saga.verified), arrival)
        log.info("erase %s (%s) done: %s", saga.erase_id, saga.scope, saga.counts.as_dict())

    async def _erase_here(self, arrival: Arrival[SourceRecord], event: EraseRequested,
                          outlet: KafkaOutlet) -> tuple[ErasureCounts, bool, bool, Writes]:
        """The whole erase on this partition: a thread (thread scope), or a thread or a resource in its record
        (resource scope). Returns what it removed, whether it found anything, whether the store read back empty,
        and its table writes."""
        here = arrival.source.partition
        # resource scope: the resource's threads write to every partition of om.messages (re-keyed onto this one)
        partitions = list(range(self.kafka.partitions)) if self.scope == "resource" else [here]
        row, offsets = await self._begin(event.erase_id, here, partitions)
        held = self.records.lookup(arrival.key)
        state = held.state if held is not None and held.partition == here else None
        if row is not None and row.counts is not None:  # swept before: see ``_part``
            writes: Writes = []
            if state is not None and self._whole_record(event, state) and await self._erased_before(state):
                writes += self._drop_record(arrival, state, offsets)
            writes.append(self._subject_fence(arrival, event, offsets, state))
            return row.counts, row.found, True, writes
        if state is not None and not self._whole_record(event, state):
            counts, verified, writes = await self._thread_of_resource(arrival, state, event.thread_id or "", outlet)
        elif state is not None:
            swept = await self.sweeper.records([state])
            counts, verified = swept.counts, swept.verified
            if event.scope == "resource":  # resource scope: anything of the resource no record held
                rest = await self.sweeper.resource(state.resource_id)
                counts, verified = counts + rest.counts, verified and rest.verified
            counts += await self._forget_contexts(arrival, [state], outlet)
            writes = self._drop_record(arrival, state, offsets)
        else:  # no record here: what the stores hold of the subject, if anything
            resource = await self._subject_resource(arrival, event)
            subject = event.thread_id if event.scope == "thread" else resource
            if resource is None or subject is None:
                swept_counts, verified = ErasureCounts(), True
            elif event.scope == "thread":
                record = arrival.key if self.scope == "thread" else None
                swept = await self.sweeper.thread(resource, subject, record_key=record, epoch=0)
                swept_counts, verified = swept.counts, swept.verified
            else:
                swept = await self.sweeper.resource(resource)
                swept_counts, verified = swept.counts, swept.verified
            # v2: a thread no record holds may still have blocks (one published before a record's erase that came
            # before this sweep was built, or by a member the group had dropped): the topic says
            if event.scope == "thread" and event.thread_id and await self._sweep_contexts([event.thread_id]):
                swept_counts += ErasureCounts(contexts=1)
            counts, writes = swept_counts, []
        found = state is not None or counts.total > 0
        writes.append(self._subject_fence(arrival, event, offsets, state))
        await self._ledger(partial(self.store.put_erasure_part,
                                   PartRecord(event.erase_id, here, offsets, counts, found), self.fence_ttl_s))
        return counts, found, verified, writes

    def _whole_record(self, event: EraseRequested, state: RecordState) -> bool:
        """The erase removes the record itself (not one thread of a resource's record that has others)."""
        return not (self.scope == "resource" and event.scope == "thread" and event.thread_id in state.threads
                    and len(state.threads) > 1)

    async def _subject_resource(self, arrival: Arrival[SourceRecord], event: EraseRequested) -> str | None:
        if event.resource_id is not None:
            return event.resource_id
        held = self.records.lookup(arrival.key)
        if held is not None:
            return held.state.resource_id
        found: str | None = await self._ledger(partial(self.store.resource_of, arrival.key))
        return found

    async def _thread_of_resource(self, arrival: Arrival[SourceRecord], state: RecordState, thread_id: str,
                                  outlet: KafkaOutlet) -> tuple[ErasureCounts, bool, Writes]:
        """Resource scope: one thread of a resource's record. Its conversation goes; the record's observations
        (which mix its threads) are cleared and rebuilt from the other threads' messages, as ``clear`` does."""
        swept = await self.sweeper.thread(state.resource_id, thread_id, record_key=None, epoch=state.epoch)
        observations = await self._ledger(partial(self.store.erase_record, state.key, state.resource_id))
        remaining = replace(state, threads={t: s for t, s in state.threads.items() if t != thread_id},
                            unobserved=[m for m in state.unobserved if m.thread_id != thread_id])
        cleared = await self.decide_clear(remaining, arrival, outlet)
        await outlet.forget_context(thread_id, arrival)
        await self._sweep_contexts([thread_id])
        counts = swept.counts + observations + ErasureCounts(contexts=1)
        return counts, swept.verified, [partial(self.records.set, arrival, cleared)]

    async def _forget_contexts(self, arrival: Arrival[SourceRecord], states: list[RecordState],
                               outlet: KafkaOutlet) -> ErasureCounts:
        threads = [thread_id for state in states for thread_id in state.threads]
        for thread_id in threads:
            await outlet.forget_context(thread_id, arrival)
        await self._sweep_contexts(threads)
        return ErasureCounts(contexts=len(threads))

    async def _sweep_contexts(self, threads: list[str]) -> int:
        """v2: every block the topic holds of ``threads``, their indexes and cursors tombstoned and acknowledged
        (``context_sweep``), before the caller writes the part's ledger row; the number of blocks found."""
        if self.context_sweep is None:
            return 0
        return await self.context_sweep.sweep(threads)

    def _subject_fence(self, arrival: Arrival[SourceRecord], event: EraseRequested,
                       offsets: tuple[tuple[int, int], ...],
                       state: RecordState | None) -> Callable[[], None]:
        """The fence of the erased subject on this partition. It carries the record's epoch when the record goes
        (a record made again for the subject starts after it)."""
        subject = (event.thread_id if event.scope == "thread" else event.resource_id) or arrival.key
        epoch = state.epoch if state is not None and self._whole_record(event, state) else 0
        fence = Fence(event.erase_id, offsets, epoch, self.clock.now_ms(), self._expiry())
        return partial(self.table.set, arrival, _fence_key(arrival.source.partition, event.scope, subject),
                       fence.to_dict())

    def _drop_record(self, arrival: Arrival[SourceRecord], state: RecordState,
                     offsets: tuple[tuple[int, int], ...]) -> Writes:
        """The record deleted from the table (a tombstone in its changelog), and a fence of its own that keeps its
        epoch."""
        fence = Fence("", offsets, state.epoch, self.clock.now_ms(), self._expiry())
        return [partial(self.records.delete, arrival, state.key),
                partial(self.table.set, arrival, _fence_key(arrival.source.partition, self._record_kind, state.key),
                        fence.to_dict())]

    async def _erased_before(self, state: RecordState) -> bool:
        """The record is an incarnation the ledger says was erased (its deletion was not committed)."""
        through = await self._ledger(partial(self.store.erased_through, record_digest(state.key)))
        return through is not None and state.epoch <= through

    async def _begin(self, erase_id: str, part: int,
                     partitions: list[int]) -> tuple[PartRecord | None, tuple[tuple[int, int], ...]]:
        """The part's ledger row and its fence offsets: those written when it was first handled, or the end
        offsets of ``om.messages`` now, written before anything is removed."""
        row: PartRecord | None = await self._ledger(partial(self.store.erasure_part, erase_id, part))
        if row is not None:
            return row, row.offsets
        offsets = await self._end_offsets(partitions)
        await self._ledger(partial(self.store.put_erasure_part, PartRecord(erase_id, part, offsets),
                                   self.fence_ttl_s))
        return None, offsets

    async def _end_offsets(self, partitions: list[int]) -> tuple[tuple[int, int], ...]:
        """The brokers' end offsets of ``om.messages`` partitions. Without them the erase cannot be fenced, so it
        waits for the brokers (as a store outage is waited for), and says so."""
        delay = 0.2
        while True:
            found = await self.end_offsets(self.kafka.topic_messages, partitions)
            if found is not None and all(p in found for p in partitions):
                return tuple((p, found[p]) for p in partitions)
            log.warning("an erase waits for the end offsets of %s from the brokers (retrying in %.1fs)",
                        self.kafka.topic_messages, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)

    async def _ledger(self, call: Callable[[], Awaitable[Any]]) -> Any:
        return await self.retry("write", call)

    def _expiry(self) -> int:
        return self.clock.now_ms() + self.fence_ttl_s * 1000


def _fence_key(partition: int, kind: str, subject: str) -> str:
    return f"fence:{partition}:{subject_digest(kind, subject)}"


def _saga_key(erase_id: str) -> str:
    return f"erase:{erase_id}"
