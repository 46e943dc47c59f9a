"""A thread's message writes made at the same moment, sent to Cassandra as one unlogged batch.

The worker writes an input batch's messages at once (``runtime.host``: a ``put_message`` each, all together), and
under load an input batch holds several messages of a thread. Their statements share partitions (the thread's
bucket of ``messages``, its bucket list, its resource's listing, its record) and only the newest and the oldest of
their times matter to the listing. So the writes of one thread that arrive in the same turn of the event loop go
together: one request instead of one per message, which pays the driver's per-request work (the request message, its
query plan and timestamp, the I/O loop's queue, the answer, the wake-up of the event loop) once, and each row of the
bucket list, the listing and the record once.

A batch stays within what one message's batch could reach: at most :data:`MAX_BODY_CHARS` of message bodies (each
is written twice; Cassandra warns above 5 KiB per batch) and :data:`MAX_PARTITIONS` partitions (it warns above 10
for an unlogged batch). A message alone at its moment (one writer per thread) is sent as before. A batch Cassandra
refuses (not an outage) is sent again message by message, so that only the message at fault fails. No write waits
on a task of its own: the first write of each batch sends it, and a batch whose sender is cancelled is sent on for
the others. Every statement is idempotent, as before; only writes made concurrently are grouped, and their order
was never defined.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from om_stream.errors import StorageError

__all__ = ["MAX_BODY_CHARS", "MAX_PARTITIONS", "MessageBatches", "Write", "merged"]

Write = tuple[str, Sequence[Any]]  # a statement's name (``queries.WRITES``) and its values
MAX_BODY_CHARS = 2_000
MAX_PARTITIONS = 10
# where each statement of a message names its partition (its values' slice); the thread times are cells of one row
_PARTITION = {"put_message": slice(0, 3), "put_message_by_id": slice(0, 1), "put_bucket": slice(0, 2),
              "thread_updated": slice(3, 4), "thread_created": slice(3, 4), "record_resource": slice(1, 2)}
_THREAD_TIMES = frozenset({"thread_updated", "thread_created"})  # timestamped by their values: the highest wins


@dataclass
class _Waiting:
    writes: Sequence[Write]
    body_chars: int
    # how a write that joined a group learns its part: the chunk it must send itself (so sending takes no task of
    # its own), or None once another write sent its statements (or the error that sending raised)
    turn: asyncio.Future[list[_Waiting] | None] | None = field(default=None)


def _partitions(writes: Sequence[Write]) -> set[tuple[Any, ...]]:
    return {(name, *params[_PARTITION[name]]) if name in _PARTITION else (name, *params) for name, params in writes}


def merged(messages: Sequence[Sequence[Write]]) -> list[Write]:
    """The statements of several messages as one batch: each row once, and of each thread-time cell only the write
    with the highest timestamp (the one that would win anyway)."""
    out: list[Write] = []
    seen: set[tuple[Any, ...]] = set()
    times: dict[tuple[Any, ...], int] = {}  # (name, resource, thread) -> its place in ``out``
    for writes in messages:
        for name, params in writes:
            if name in _THREAD_TIMES:
                cell = (name, params[3], params[4])
                at = times.get(cell)
                if at is None:
                    times[cell] = len(out)
                    out.append((name, params))
                elif params[0] > out[at][1][0]:
                    out[at] = (name, params)
                continue
            key = (name, *params)
            if key not in seen:
                seen.add(key)
                out.append((name, params))
    return out


def _chunks(group: list[_Waiting]) -> list[list[_Waiting]]:
    """The group in order, cut where a batch would pass :data:`MAX_BODY_CHARS` or :data:`MAX_PARTITIONS`."""
    chunks: list[list[_Waiting]] = []
    chunk: list[_Waiting] = []
    chars = 0
    partitions: set[tuple[Any, ...]] = set()
    for waiting in group:
        more = _partitions(waiting.writes)
        if chunk and (chars + waiting.body_chars > MAX_BODY_CHARS or len(partitions | more) > MAX_PARTITIONS):
            chunks.append(chunk)
            chunk, chars, partitions = [], 0, set()
        chunk.append(waiting)
        chars += waiting.body_chars
        partitions |= more
    chunks.append(chunk)
    return chunks


def _settle(chunk: Sequence[_Waiting], outcomes: Sequence[BaseException | None]) -> None:
    for waiting, outcome in zip(chunk, outcomes, strict=True):
        turn = waiting.turn
        if turn is not None and not turn.done():  # the sender itself, or a caller cancelled meanwhile: skipped
            if outcome is None:
                turn.set_result(None)
            else:
                turn.set_exception(outcome)


class MessageBatches:
    """``await batches.write(thread, writes, body_chars)`` returns once the writes are applied (or raises what
    writing them raised); ``send`` writes statements as one unlogged batch."""

    def __init__(self, send: Callable[[Sequence[Write]], Awaitable[None]]) -> None:
        self._send = send
        self._gathering: dict[Hashable, list[_Waiting]] = {}
        self._orphans: set[asyncio.Task[None]] = set()

    async def write(self, thread: Hashable, writes: Sequence[Write], body_chars: int) -> None:
        group = self._gathering.get(thread)
        if group is not None:  # another write of the thread is gathering the writes made at this moment
            turn: asyncio.Future[list[_Waiting] | None] = asyncio.get_running_loop().create_future()
            group.append(_Waiting(writes, body_chars, turn))
            try:
                chunk = await turn
            except asyncio.CancelledError:
                dealt = turn.result() if turn.done() and not turn.cancelled() and not turn.exception() else None
                if dealt is not None and len(dealt) > 1:  # cancelled once its turn to send had come
                    self._adopt(dealt[1:])
                raise
            if chunk is not None:
                await self._send_chunk(chunk)
            return
        mine = _Waiting(writes, body_chars)
        group = self._gathering[thread] = [mine]
        try:
            await asyncio.sleep(0)  # one turn of the loop: the writes made at this moment join
        except asyncio.CancelledError:
            del self._gathering[thread]
            self._deal(group[1:])  # those that joined still send theirs
            raise
        del self._gathering[thread]
        if len(group) == 1:  # alone: sent as one message always was
            await self._send(writes)
            return
        own = self._deal(group)
        assert own is not None  # the dealer is first in the group, and its caller still waits
        await self._send_chunk(own)

    def _deal(self, group: list[_Waiting]) -> list[_Waiting] | None:
        """Cut the group into batches; the first write of each (whose caller still waits) sends it. Returns the
        batch of the write that dealt, if it is in the group."""
        own = None
        for chunk in _chunks(group):
            live = [w for w in chunk if w.turn is None or not w.turn.done()]
            if not live:
                continue
            sender = live[0].turn
            if sender is None:
                own = live
            else:
                sender.set_result(live)
        return own

    async def _send_chunk(self, chunk: list[_Waiting]) -> None:
        """Send a batch; tell every write of it its outcome, and raise the first write's own (the sender's)."""
        try:
            outcomes = await self._outcomes(chunk)
        except asyncio.CancelledError:
            if len(chunk) > 1:  # the sender's caller gave up; the others still wait for theirs
                self._adopt(chunk[1:])
            raise
        _settle(chunk, outcomes)
        if outcomes[0] is not None:
            raise outcomes[0]

    async def _outcomes(self, chunk: list[_Waiting]) -> list[BaseException | None]:
        try:
            await self._send(chunk[0].writes if len(chunk) == 1 else merged([w.writes for w in chunk]))
        except StorageError as exc:
            if exc.transient or len(chunk) == 1:
                return [exc] * len(chunk)
            # refused, not an outage: each message alone, so that only the one at fault fails
            alone = await asyncio.gather(*(self._send(w.writes) for w in chunk), return_exceptions=True)
            return [outcome if isinstance(outcome, BaseException) else None for outcome in alone]
        except Exception as exc:  # noqa: BLE001 - told to every write of the chunk, each raises it
            return [exc] * len(chunk)
        return [None] * len(chunk)

    def _adopt(self, chunk: list[_Waiting]) -> None:
        async def send() -> None:
            with suppress(Exception):  # every write of the chunk was told
                await self._send_chunk(chunk)

        task = asyncio.get_running_loop().create_task(send())
        self._orphans.add(task)
        task.add_done_callback(self._orphans.discard)

    async def drain(self) -> None:
        """Wait for batches whose sender's caller gave up (before the session closes)."""
        while self._orphans:
            await asyncio.gather(*self._orphans, return_exceptions=True)
