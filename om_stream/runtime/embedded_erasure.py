"""How ``Memory`` erases (the host's ``Erasures`` in process; ``runtime/erasure.py`` holds what both drivers share).

An erase runs whole, under its records' locks (``Memory.erase``), so nothing arrives behind it and nothing needs
fencing; what runs in the background for those records (model calls, indexing) is cancelled before anything is
removed. A record made again for an erased key starts after the erased epoch (kept by digest for the fence window).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Protocol

from om_stream.core.config import ResolvedConfig
from om_stream.core.erasure import EraseRequested, ErasureCounts, ErasureSaga, StrayWrites, record_digest
from om_stream.core.inputs import ClearRecord
from om_stream.core.state import RecordState
from om_stream.ports import Clock, ContentStore
from om_stream.runtime.effects import Effects
from om_stream.runtime.embedded_background import BackgroundWork
from om_stream.runtime.erasure import Sweeper, receipt
from om_stream.runtime.host import Host
from om_stream.runtime.host_ports import Arrival, Outlet, StoreRetry
from om_stream.runtime.recall_service import RecallService

__all__ = ["EmbeddedErasures", "ErasingMemory"]


class ErasingMemory(Protocol):
    """What an erase uses of its ``Memory`` (named here, not imported: the runner imports this module)."""

    config: ResolvedConfig
    store: ContentStore
    effects: Effects
    clock: Clock
    host: Host[None]
    recall_service: RecallService | None
    _states: dict[str, RecordState]

    def _erased_keys(self, erase: EraseRequested) -> list[str]: ...

    background: BackgroundWork


class EmbeddedErasures:
    """The host's ``Erasures`` for one ``Memory`` (see the module's docstring)."""

    def __init__(self, memory: ErasingMemory) -> None:
        self.memory = memory
        self.sweeper = Sweeper(memory.store, memory.effects, StoreRetry(), ledger_ttl_s=8 * 86_400)
        self._epochs: dict[str, int] = {}  # record key digest -> the erased epoch

    def fenced(self, arrival: Arrival[None]) -> bool:
        return False

    def epoch_floor(self, arrival: Arrival[None]) -> int:
        erased = self._epochs.get(record_digest(arrival.key))
        return erased + 1 if erased is not None else 0

    async def undo_if_erased(self, written: Sequence[StrayWrites]) -> None:
        # Nothing to undo: the embedded runner hands the host no ``may_commit`` (no group can move on without it),
        # so no batch is refused after its writes, and an erase waits for its records' locks, behind every batch.
        return None

    async def prepare(self, arrival: Arrival[None], outlet: Outlet[None]) -> list[Callable[[], None]]:
        memory = self.memory
        erase = arrival.input
        assert isinstance(erase, EraseRequested)
        keys = memory._erased_keys(erase)
        await memory.background.cancel(keys)
        states = [state for key in keys if (state := memory._states.get(key)) is not None]
        resource = erase.resource_id or (states[0].resource_id if states else None)
        if resource is None and erase.thread_id is not None:
            resource = await memory.store.resource_of(erase.thread_id)
        writes: list[Callable[[], None]] = []
        counts, found, verified = ErasureCounts(), bool(states), True
        whole = [s for s in states if not self._one_thread_of(erase, s)]
        if whole:
            swept = await self.sweeper.records(whole)
            counts, verified = swept.counts, swept.verified
            for state in whole:
                writes.append(functools.partial(self._drop, state))
                for thread_id in state.threads:
                    await outlet.forget_context(thread_id, arrival)
                counts += ErasureCounts(contexts=len(state.threads))
        for state in states:
            if self._one_thread_of(erase, state):
                counts += await self._thread_of_resource(state, erase.thread_id or "", arrival, outlet, writes)
        if resource is not None:
            rest = (await self.sweeper.resource(resource) if erase.scope == "resource" else
                    await self.sweeper.thread(resource, erase.thread_id or "", epoch=0, record_key=(
                        erase.thread_id if memory.config.scope == "thread" else None))
                    if not states else None)
            if rest is not None:
                counts, verified, found = counts + rest.counts, verified and rest.verified, found or rest.found
            if memory.recall_service is not None:
                removed, remaining = await memory.recall_service.erase(
                    resource, erase.thread_id if erase.scope == "thread" else None)
                counts += ErasureCounts(recall_points=removed)
                verified = verified and remaining == 0
        saga = ErasureSaga(erase.erase_id, erase.scope, resource, erase.thread_id, erase.requested_at, parts=1,
                           counts=counts, found=found or counts.total > 0, verified=verified)
        await outlet.erased(receipt(saga, completed_at=memory.clock.now_ms(), verified=verified), arrival)
        return writes

    @staticmethod
    def _one_thread_of(erase: EraseRequested, state: RecordState) -> bool:
        """A thread erased out of a resource's record (resource scope) that holds other threads too."""
        return (erase.scope == "thread" and state.scope == "resource" and erase.thread_id in state.threads
                and len(state.threads) > 1)

    async def _thread_of_resource(self, state: RecordState, thread_id: str, arrival: Arrival[None],
                                  outlet: Outlet[None], writes: list[Callable[[], None]]) -> ErasureCounts:
        """One thread of a resource's record: its conversation goes, the record's log is rebuilt from the rest."""
        memory = self.memory
        swept = await self.sweeper.thread(state.resource_id, thread_id, record_key=None, epoch=state.epoch)
        observations = await memory.store.erase_record(state.key, state.resource_id)
        remaining = dataclasses.replace(state, threads={t: s for t, s in state.threads.items() if t != thread_id},
                                        unobserved=[m for m in state.unobserved if m.thread_id != thread_id])
        cleared = await memory.host.decide_on(remaining, Arrival(state.key, state.resource_id, ClearRecord(None), None),
                                              outlet)
        writes.append(functools.partial(memory._states.__setitem__, state.key, cleared))
        await outlet.forget_context(thread_id, arrival)
        return swept.counts + observations + ErasureCounts(contexts=1)

    def _drop(self, state: RecordState) -> None:
        self.memory._states.pop(state.key, None)
        self._epochs[record_digest(state.key)] = state.epoch
