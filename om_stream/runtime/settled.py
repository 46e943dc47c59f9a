"""Waiting for a thread's memory to settle: ``GET /v1/threads/{id}/settled`` and ``Memory.settled``.

What *settled* means is the core's (``core/progress.py``); this module waits for it on the states a driver holds,
without polling: the driver's state table tells a :class:`StateWatch` of every state it writes (the host's phase 2),
and a waiter looks again only then. A state is written after the content-store writes of its batch (phase 1), so
when a waiter sees a message observed, the observation is in the store and the thread's context (rendered from the
state and the store) holds it.

A message the record no longer names (observed long ago) is looked up in the content store (:func:`stored_seq`),
at most once per message the record takes in meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable

from om_stream.core.events import ProgressEvent
from om_stream.core.progress import place, progress_event
from om_stream.core.state import RecordState
from om_stream.ports import ContentStore, MessageQueries

__all__ = ["MAX_WAIT_S", "StateWatch", "Unavailable", "stored_seq", "wait_settled"]

MAX_WAIT_S = 300.0  # the longest wait a caller may ask for: a long-poll is held open no longer


class Unavailable(enum.Enum):
    """Why a driver cannot hand a waiter the record's state: it does not hold the record (any more), or it is
    recovering its states (wait for the next change)."""

    NOT_HELD = "not_held"
    RECOVERING = "recovering"


class StateWatch:
    """Wakes whoever waits for a record's state to be written. The driver calls :meth:`changed` after every state
    write (and :meth:`changed_all` when the records it holds change: a rebalance, a recovery done)."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}

    def next_change(self, key: str) -> asyncio.Future[None]:
        """A future resolved by the next write of the record's state. Take it *before* reading the state, so a
        write between the read and the wait is not missed; give it back with :meth:`forget`."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, set()).add(future)
        return future

    def forget(self, key: str, future: asyncio.Future[None]) -> None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.discard(future)
            if not waiting:
                del self._waiting[key]

    def changed(self, key: str) -> None:
        for future in self._waiting.pop(key, ()):
            if not future.done():
                future.set_result(None)

    def changed_all(self) -> None:
        for key in list(self._waiting):
            self.changed(key)

    @property
    def waiters(self) -> int:
        return sum(len(futures) for futures in self._waiting.values())


async def stored_seq(store: ContentStore, state: RecordState, thread_id: str, message_id: str) -> int | None:
    """The seq the content store holds for ``message_id``, a message of this record and thread (None: it holds no
    such message). A store that answers message queries is asked for the one message; any other store for the
    thread's conversation."""
    if isinstance(store, MessageQueries):
        found = await store.get_message(state.resource_id, message_id)
        candidates = [found] if found is not None else []
    else:
        candidates = await store.get_record_messages(state.key, resource_id=state.resource_id,
                                                     thread_ids=(thread_id,), through_seq=state.msg_seq)
    for stored in candidates:
        message = stored.message
        if message.message_id == message_id and message.thread_id == thread_id and stored.record_key == state.key:
            return stored.seq
    return None


async def wait_settled(read: Callable[[], RecordState | Unavailable], watch: StateWatch, *, key: str,
                       thread_id: str, through: str | None, timeout: float | None,
                       store: ContentStore | None = None) -> ProgressEvent | None:
    """Wait until the record (``read``: its state as held now) has settled through ``through`` (the thread's
    newest message when the wait began, when None), for at most ``timeout`` seconds (None: no limit). Returns the
    thread's progress with ``through`` (``through.settled`` false: the time ran out), or None when the record is
    not held here (any more), or could not be read before the time ran out (recovering)."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + max(timeout, 0.0)
    asked = through
    seq: int | None = None
    looked_up_at = -1  # the record's msg_seq when the store was last asked
    last: ProgressEvent | None = None
    while True:
        change = watch.next_change(key)
        try:
            state = read()
            if state is Unavailable.NOT_HELD:
                return None
            if isinstance(state, RecordState):
                thread = state.threads.get(thread_id)
                if asked is None and thread is not None:
                    asked = thread.last_message_id  # the newest message when the wait began: a fixed target
                where = place(state, thread_id, asked, stored_seq=seq)
                if (where.status == "unknown" and asked is not None and thread is not None and store is not None
                        and state.msg_seq != looked_up_at):
                    looked_up_at = state.msg_seq
                    seq = await stored_seq(store, state, thread_id, asked)
                    where = place(state, thread_id, asked, stored_seq=seq)
                last = progress_event(state, thread_id, through=where)
                if last.through is not None and last.through.settled:
                    return last
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return last
            with contextlib.suppress(TimeoutError):  # out of time: one more look, then the answer
                await asyncio.wait_for(asyncio.shield(change), remaining)
        finally:
            watch.forget(key, change)
