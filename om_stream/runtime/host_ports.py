"""What a driver and the host (``runtime/host.py``) hand each other: the inputs (``Arrival``), what ``decide`` did
with each (``Decided``), and the driver's parts the host calls (its state table, timers, outlet and erasures), with
how store calls meet an outage (``StoreRetry``). The Kafka worker and the embedded ``Memory`` implement these; the
host runs the commit order over them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from opentelemetry.context import Context

from om_stream.core.commands import (
    Command,
    EmitEvent,
    ExpireIndex,
    IndexForRecall,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.erasure import ErasureInput, StrayWrites
from om_stream.core.events import ErasedEvent, OMEvent
from om_stream.core.inputs import Input
from om_stream.core.state import RecordState
from om_stream.errors import StorageError

__all__ = ["Arrival", "Decided", "Erasures", "Outlet", "StateTable", "StoreRetry", "Timers"]

log = logging.getLogger(__name__)
R = TypeVar("R")
S = TypeVar("S")  # the driver's record of an input (the Kafka worker's ``SourceRecord``; None in-process)


@dataclass(frozen=True)
class Arrival(Generic[S]):
    """One input for one record. ``resource_id`` empty: the input (a model result, a timer) only applies to a record
    that exists. ``source``: the driver's own record of it (the Kafka worker's ``SourceRecord``, the embedded
    runner's None), typed by the driver: the host only carries it to the driver's table, outlet and erasures.
    ``trace``: the context of the input's handling span (the driver's ingest span), which the host's spans (decide,
    store writes) and the outlet's (publications) are children of; None when the driver does not trace."""

    key: str
    resource_id: str
    input: Input | ErasureInput
    source: S
    trace: Context | None = None


@dataclass(frozen=True)
class Decided(Generic[S]):
    """What ``decide`` did with one arrival (for the drivers' metrics, and the tests' invariants)."""

    arrival: Arrival[S]
    before: RecordState
    after: RecordState
    commands: list[Command]
    now_ms: int
    seconds: float


class StateTable(Protocol[S]):
    def get(self, arrival: Arrival[S]) -> RecordState | None: ...

    def set(self, arrival: Arrival[S], state: RecordState) -> None:
        """Write through ``arrival`` (the Kafka table writes to the partition of the record it came from)."""
        ...


class Timers(Protocol):
    def track(self, key: str, timers: Mapping[str, int]) -> None:
        """A record's timers after a state write (``RecordState.timers``: the one owner of them)."""
        ...


class Outlet(Protocol[S]):
    """Where what the host decided leaves the process. One outlet serves one batch at a time (``Host.outlets``
    makes one per batch). The methods prepare (phase 1: the Kafka outlet renders what it will send) and nothing
    leaves before ``commit`` (phase 3); ``discard`` drops what was prepared for a batch that may not commit."""

    async def event(self, event: OMEvent, command: EmitEvent, arrival: Arrival[S]) -> None: ...

    async def context(self, command: PublishContext, arrival: Arrival[S], *,
                      folded: Sequence[Arrival[S]] = ()) -> None:
        """The thread's context, once per batch: ``arrival`` is the newest input that published it; ``folded`` the
        thread's earlier inputs in the batch whose publications this one stands for (oldest first), so that
        their traces and latencies end with it too."""
        ...

    async def request(self, command: RequestObservation | RequestReflection, arrival: Arrival[S]) -> None: ...

    async def index(self, command: IndexForRecall, arrival: Arrival[S]) -> None: ...

    async def expire_index(self, command: ExpireIndex, arrival: Arrival[S]) -> None:
        """A retention purge of the recall index (whoever holds the index runs it)."""
        ...

    async def forget(self, resource_id: str, key: str, arrival: Arrival[S]) -> None: ...

    async def forget_context(self, thread_id: str, arrival: Arrival[S]) -> None:
        """An erased thread's context is gone (the Kafka outlet publishes a tombstone for it)."""
        ...

    async def erased(self, event: ErasedEvent, arrival: Arrival[S]) -> None:
        """An erase's receipt."""
        ...

    async def refuse(self, command: RejectInput, arrival: Arrival[S]) -> None: ...

    async def failed(self, arrival: Arrival[S], reason: str, detail: str, error: BaseException) -> None: ...

    async def commit(self) -> None: ...

    def discard(self) -> None: ...


class Erasures(Protocol[S]):
    """How a driver erases (``runtime/erasure.py`` holds what the drivers share)."""

    def fenced(self, arrival: Arrival[S]) -> bool:
        """The input belongs to an erased subject and was published before its erase: it is dropped."""
        ...

    def epoch_floor(self, arrival: Arrival[S]) -> int:
        """The epoch a record made for ``arrival`` starts at: after an erased incarnation of the same key."""
        ...

    async def prepare(self, arrival: Arrival[S], outlet: Outlet[S]) -> list[Callable[[], None]]:
        """Phase 1 of an erasure input (its store work) and its publications prepared on ``outlet``; returns its
        state-table writes, which the host makes in phase 2."""
        ...

    async def undo_if_erased(self, written: Sequence[StrayWrites]) -> None:
        """A batch may not commit after its phase-1 writes (``may_commit`` said no: the group moved on without
        this member, and another may have erased a record of it meanwhile): remove what it wrote of each record
        whose incarnation the erasure ledger says was erased (``runtime.erasure``)."""
        ...


@dataclass(frozen=True)
class StoreRetry:
    """How store calls meet an outage: with ``retry_outages`` (the Kafka worker) a transient error is tried again
    with backoff for as long as it lasts (dropping a write would lose conversation content); without (the embedded
    runner) it reaches the caller. A refusal (``StorageError.transient`` false) is always raised at once."""

    retry_outages: bool = False
    on_error: Callable[[str], None] | None = None  # told the operation ("write", "read") of every failure

    async def __call__(self, operation: str, call: Callable[[], Awaitable[R]]) -> R:
        delay = 0.2
        while True:
            try:
                return await call()
            except StorageError as exc:
                if self.on_error is not None:
                    self.on_error(operation)
                if not exc.transient or not self.retry_outages:
                    raise
                log.warning("content store %s failed, retrying in %.1fs: %s", operation, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
