"""What both drivers do to erase a subject from the content store and the process's caches, and the receipt.

The drivers (``runtime/embedded.py``, ``runtime/worker/erasure.py``) decide *which* records and threads an erase
covers and keep its fence; this module removes them, in the one order that keeps late writers out:

1. the ledger first (``ErasableStore.mark_erased``: the record's incarnation is erased through its epoch). A
   model worker or an indexer that writes for that incarnation checks the ledger after its write: if its check
   comes before this note, its write came before the sweep below, which removes it; if after, it sees the note
   and removes its own write (``runtime/worker/model_calls.py``, ``runtime/recall_service.py``);
2. the sweep: each thread's conversation and records, then each record's observations, generations and cached
   model results (``ErasableStore``), counted as they go;
3. the caches: what ``Effects`` holds of the subject (the store drops its own caches in 2);
4. the read-back: the store is asked whether anything of the subject is left.

The recall index is swept by whoever holds it (``RecallService.erase``): in-process in the embedded runner, by a
model worker in the Kafka deployment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

from om_stream.core.erasure import ErasureCounts, ErasureSaga, record_digest
from om_stream.core.events import ErasedCounts, ErasedEvent
from om_stream.core.state import RecordState
from om_stream.ports import ContentStore
from om_stream.runtime.effects import Effects, message_prefix
from om_stream.runtime.host_ports import StoreRetry

__all__ = ["Sweeper", "Swept", "receipt"]

R = TypeVar("R")


@dataclass(frozen=True)
class Swept:
    """What a sweep removed, whether it found anything, and whether the store held nothing of it afterwards."""

    counts: ErasureCounts
    found: bool
    verified: bool


class Sweeper:
    """Removes records and threads from the content store and the caches (steps 1-4 above). ``ledger_ttl_s``: how
    long the ledger remembers an erased record (the fence window: past it no work of the record can arrive)."""

    def __init__(self, store: ContentStore, effects: Effects, store_retry: StoreRetry, ledger_ttl_s: int) -> None:
        self.store = store
        self.effects = effects
        self.retry = store_retry
        self.ledger_ttl_s = ledger_ttl_s

    async def _call(self, operation: str, call: Callable[[], Awaitable[R]]) -> R:
        return await self.retry(operation, call)

    async def records(self, states: Sequence[RecordState]) -> Swept:
        """Erase whole records: each one's threads' conversations and the record itself (thread scope: a record
        is a thread; resource scope: a resource and all its threads)."""
        for state in states:
            await self._call("write", partial(self.store.mark_erased, record_digest(state.key), state.epoch,
                                              self.ledger_ttl_s))
        counts = ErasureCounts()
        for state in states:
            for thread_id in state.threads:
                counts += await self._call("write", partial(self.store.erase_thread, state.resource_id, thread_id))
            counts += await self._call("write", partial(self.store.erase_record, state.key, state.resource_id))
            counts += ErasureCounts(state_records=1)
            self.effects.forget(state.resource_id, state.threads, [state.record_id])
        verified = True
        for state in states:
            for thread_id in state.threads:
                verified &= not await self._call("read", partial(self.store.holds, state.resource_id, thread_id))
        return Swept(counts, bool(states) or counts.total > 0, verified)

    async def thread(self, resource_id: str, thread_id: str, *, record_key: str | None, epoch: int) -> Swept:
        """Erase one thread held by no record here (thread scope: its record is gone or was never made; pass the
        record key it would have, so its observations go too), or its conversation alone (``record_key`` None)."""
        if record_key is not None:
            await self._call("write", partial(self.store.mark_erased, record_digest(record_key), epoch,
                                              self.ledger_ttl_s))
        counts = await self._call("write", partial(self.store.erase_thread, resource_id, thread_id))
        if record_key is not None:
            counts += await self._call("write", partial(self.store.erase_record, record_key, resource_id))
            self.effects.forget(resource_id, [thread_id], [f"thread:{record_key}"])
        else:
            self.effects.forget(resource_id, [thread_id], [])
        verified = not await self._call("read", partial(self.store.holds, resource_id, thread_id))
        return Swept(counts, counts.total > 0, verified)

    async def resource(self, resource_id: str) -> Swept:
        """Erase whatever the store still holds of a resource once its records are erased (``records``): threads
        no record held. Only where nothing else can be writing for the resource meanwhile (one record holds it:
        resource scope, or the embedded runner under its records' locks)."""
        counts = await self._call("write", partial(self.store.erase_resource, resource_id))
        messages = message_prefix(resource_id)
        self.effects.cache.evict(lambda key, value: key.startswith((messages, "s:", "g:", "c:")))
        verified = not await self._call("read", partial(self.store.holds, resource_id, None))
        return Swept(counts, counts.total > 0, verified)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def receipt(saga: ErasureSaga, *, completed_at: int, verified: bool) -> ErasedEvent:
    """The ``data-om-erased`` event of a finished erase."""
    subject = saga.thread_id if saga.scope == "thread" and saga.thread_id else saga.resource_id or ""
    return ErasedEvent(
        record_id=f"{saga.scope}:{subject}", thread_id=saga.thread_id if saga.scope == "thread" else None,
        erase_id=saga.erase_id, scope=saga.scope, resource_id=saga.resource_id, found=saga.found,
        removed=ErasedCounts(**saga.counts.as_dict()), requested_at=_iso(saga.requested_at),
        completed_at=_iso(completed_at), verified=verified, parts=saga.parts)
