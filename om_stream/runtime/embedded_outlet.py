"""Where what ``Memory``'s host decides goes (the host's ``Outlet`` in process): events to the listeners, contexts to
the callers waiting for them, model requests and recall-index work to background tasks, refusals and failures to
the caller of ``Memory._apply``. Nothing is delivered before the batch commits."""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from opentelemetry.context import Context

from om_stream.core.commands import (
    EmitEvent,
    ExpireIndex,
    IndexForRecall,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.events import ErasedEvent, OMEvent
from om_stream.runtime.embedded_background import BackgroundWork, RecallIndexWork
from om_stream.runtime.host_ports import Arrival

__all__ = ["EmbeddedOutlet", "OutletTarget"]

log = logging.getLogger(__name__)


class OutletTarget(Protocol):
    """What the outlet delivers to, of its ``Memory`` (named here, not imported: the runner imports this module)."""

    rejections: deque[RejectInput]
    rejected: int
    _cycle_retries: int
    _receipts: dict[str, ErasedEvent]
    _refusals: dict[int, list[RejectInput]]
    _failures: list[tuple[Arrival[None], BaseException]]

    @property
    def _indexing(self) -> bool: ...

    async def _emit(self, event: OMEvent, command: EmitEvent) -> None: ...

    async def _publish(self, command: PublishContext) -> None: ...

    def _spawn(self, key: str, resource_id: str, request: RequestObservation | RequestReflection,
               asker: Context | None) -> None: ...

    background: BackgroundWork
    index_work: RecallIndexWork | None  # None without a recall service

    def _forget_thread(self, thread_id: str) -> None: ...


class EmbeddedOutlet:
    """One batch's publications, delivered in-process once it commits: events to listeners, contexts to the waiting
    callers, model requests and recall-index work to background tasks, refusals and failures to the caller of
    ``_apply``. (The host prepares them before it writes the states; each batch has its own outlet.)"""

    def __init__(self, memory: OutletTarget) -> None:
        self.memory = memory
        self._deliveries: list[Callable[[], Awaitable[None] | None]] = []

    async def event(self, event: OMEvent, command: EmitEvent, arrival: Arrival[None]) -> None:
        self._deliveries.append(functools.partial(self.memory._emit, event, command))

    async def context(self, command: PublishContext, arrival: Arrival[None], *,
                      folded: Sequence[Arrival[None]] = ()) -> None:
        # nothing to do for the folded inputs: their callers wait by message seq, which this context answers too
        self._deliveries.append(functools.partial(self.memory._publish, command))

    async def request(self, command: RequestObservation | RequestReflection, arrival: Arrival[None]) -> None:
        self._deliveries.append(functools.partial(self._request, command, arrival))

    def _request(self, command: RequestObservation | RequestReflection, arrival: Arrival[None]) -> None:
        self.memory._cycle_retries += command.attempt > 1
        self.memory._spawn(arrival.key, arrival.resource_id or command.resource_id, command, arrival.trace)

    async def index(self, command: IndexForRecall, arrival: Arrival[None]) -> None:
        self._index_work(lambda work: work.index(command), f"om-index-{command.segment_id}", arrival.key)

    async def expire_index(self, command: ExpireIndex, arrival: Arrival[None]) -> None:
        self._index_work(lambda work: work.expire(command), f"om-expire-{command.record_key}", arrival.key)

    async def forget(self, resource_id: str, key: str, arrival: Arrival[None]) -> None:
        self._index_work(lambda work: work.forget(resource_id, key), f"om-forget-{key}", key)

    def _index_work(self, call: Callable[[RecallIndexWork], Coroutine[Any, Any, None]], name: str, key: str) -> None:
        """Recall-index work, as a background task of record ``key`` once the batch commits (none without search)."""
        work = self.memory.index_work
        if work is not None and self.memory._indexing:
            self._deliveries.append(lambda: self.memory.background.start(call(work), name, key))

    async def forget_context(self, thread_id: str, arrival: Arrival[None]) -> None:
        self._deliveries.append(functools.partial(self.memory._forget_thread, thread_id))

    async def erased(self, event: ErasedEvent, arrival: Arrival[None]) -> None:
        self._deliveries.append(functools.partial(self._receipt, event))

    async def _receipt(self, event: ErasedEvent) -> None:
        self.memory._receipts[event.erase_id] = event
        await self.memory._emit(event, EmitEvent(event.record_id, event, f"erased-{event.erase_id}"))

    async def refuse(self, command: RejectInput, arrival: Arrival[None]) -> None:
        self._deliveries.append(functools.partial(self._refused, command, arrival))

    def _refused(self, command: RejectInput, arrival: Arrival[None]) -> None:
        memory = self.memory
        memory.rejections.append(command)
        memory.rejected += 1
        waiting = memory._refusals.get(id(arrival))
        if waiting is not None:
            waiting.append(command)
        log.warning("input refused for %s: %s (%s)", command.record_key, command.reason, command.detail)

    async def failed(self, arrival: Arrival[None], reason: str, detail: str, error: BaseException) -> None:
        self._deliveries.append(functools.partial(self.memory._failures.append, (arrival, error)))

    async def commit(self) -> None:
        deliveries, self._deliveries = self._deliveries, []
        for deliver in deliveries:
            delivered = deliver()
            if delivered is not None:
                await delivered

    def discard(self) -> None:
        """The embedded runner never fences a batch off; nothing prepared is kept."""
        self._deliveries.clear()
