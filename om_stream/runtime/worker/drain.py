"""The calls a worker runs beside its agents (model calls, recall indexing, recall answers), and their drain on a stop.

A graceful stop (SIGTERM) must neither cut off a model call that is about to answer (paid for, and the next owner
would pay again) nor wait for one that stalls. So, before the consumer leaves the group:

1. the agents that start calls stop taking requests (:meth:`InFlight.serve`): a request taken once the drain has
   begun is not run and stays unacknowledged, so the partition's next owner reads it again; and Faust's stop, which
   waits for every request taken to be acknowledged, is told not to wait for it (before, it waited until the
   worker's deadline ended the process: a graceful leave took drain + shutdown and left as a crash would);
2. the calls running may finish for at most ``timeout_s`` (``OM_WORKER_DRAIN_TIMEOUT_S``); a finished model call
   has stored and published its result, which the record's next owner applies;
3. the rest are cancelled: a cancelled model call gives up its lease (``model_calls``), so the next owner, which
   asks again for every cycle still in flight when it takes the record over, calls the model at once.

It never commits offsets or touches the state table: the memory agent's inputs are the offset ledger's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import EventT

from om_stream.runtime.worker.faust_internals import leave_unacknowledged

__all__ = ["Drained", "InFlight"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Drained:
    finished: int  # calls that ended within the drain window
    handed_back: int  # calls cancelled at its end
    seconds: float


class InFlight:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = asyncio.Event()

    @property
    def open(self) -> bool:
        """False once a drain has begun: no new call may start."""
        return not self._closed.is_set()

    async def serve(self, stream: faust.StreamT[bytes], slots: asyncio.Semaphore,
                    call: Callable[[EventT[bytes]], Coroutine[Any, Any, None]]) -> AsyncIterator[None]:
        """An agent's body: each request of ``stream`` becomes ``call(event)`` running beside the next ones, at most
        as many at once as ``slots`` (the call releases its slot when it ends). A request is taken only once a slot
        is free and acknowledged as soon as its call starts, so a rebalance, which waits for every request taken to
        be acknowledged, never waits for one queued behind a slow model. Once a drain began, the request in hand is
        left to the next owner (unacknowledged, and Faust's stop told not to wait for it) and nothing more is taken;
        the agent waits there until the app stops it."""
        await slots.acquire()
        async for event in stream.events():
            if not self.open:
                slots.release()
                leave_unacknowledged(event)
                await asyncio.Future()
            self.start(call(event))
            await stream.ack(event)
            yield None
            await slots.acquire()

    def start(self, call: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(call)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout_s: float) -> Drained:
        """Close, let the running calls finish for at most ``timeout_s``, then cancel the rest and wait for their
        cleanup (a lease given back)."""
        began = time.monotonic()
        self._closed.set()
        running = set(self._tasks)
        if not running:
            return Drained(0, 0, 0.0)
        log.info("draining %d calls in flight (at most %.1fs)", len(running), timeout_s)
        _, late = await asyncio.wait(running, timeout=timeout_s) if timeout_s > 0 else (set(), running)
        for task in late:
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
        drained = Drained(len(running) - len(late), len(late), time.monotonic() - began)
        log.info("drained in %.1fs: %d calls finished, %d handed back to the next owner", drained.seconds,
                 drained.finished, drained.handed_back)
        return drained
