"""Offsets of the inputs the worker's own agents handle (memory, ingest), committed by the worker itself.

Faust commits what its streams acknowledge, and its streams acknowledge records they never handed to an agent: a
record that arrives while a rebalance is under way is "skipped", and acknowledged so that the lag does not grow.
If the partition stays with the worker, that acknowledgement can be committed before the record is read again,
and the record is gone (measured here: a message published during a rolling restart never reached any worker).
So the memory agent's topics are subscribed without Faust acknowledgements, and this ledger commits them, step 4
of the commit order: a batch's records are marked handled once its table writes and publications are queued;
the ledger then flushes the producer (every output acknowledged by the brokers) and commits the offsets.

Faust also drops records without handing them over: one that reaches a stream while flow control is suspended
is skipped, and its recovery resumes the stream partitions (and seeks them to the committed offsets) a moment
before it resumes flow control, so records fetched in that moment vanish (measured: an offset missing between
two handled ones, right after a rebalance). The ledger therefore checks that every partition's records come in
sequence (:meth:`admit`): a record after a gap is not handled; the partition is sought back to the first missing
offset, and the records are read again. A gap that shows up again at the same place after the seek may be real
(offsets that hold no record: a transaction's markers), or the same records dropped once more: Faust's fetch loop
sets its read offset after it hands a record over, so a seek made while a record of the partition was being handed
over is undone, and the records read again from the seek are dropped as already read (seen in CI: a message
committed and never served, in a run with a worker killed and one restarted; taking a gap for a real one was the
only way past an offset not handled). So the ledger asks the brokers (``first_offset``: partition_log.py) where the
log's first record at the missing offset is: only if it is the record that showed the gap is the gap accepted;
otherwise the partition is sought back again, and nothing is passed over on a guess. Records also flow before
Faust knows where a partition starts (its recovery resumes the flow, then reads the group's committed offsets): the
ledger then asks the brokers where the group reads it from (``group_start``), so that the first records dropped
there show as a gap too. Dropped records that nothing follows show no gap:
the agent that sent them waits for their context and sends nothing more. So a partition with records waiting past
the next offset to handle, on which nothing was handled for ``STRANDED_AFTER_S`` while the agents were idle, is
sought back too (:meth:`stranded`; measured: a record dropped this way stalled its partition until the liveness
probe restarted the worker).

* A timer commits every ``worker.commit_interval_s``.
* A revocation waits for the batch in hand, commits, and fences: until the next assignment no batch may commit
  (``accepting`` is false), since the new owner may already be reading. A batch that outlasts the rebalance
  timeout gets its member dropped from the group; it is then fenced by the membership check (membership.py).
* A stop commits what was handled, then stops accepting batches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

__all__ = ["STRANDED_AFTER_S", "OffsetLedger"]

log = logging.getLogger(__name__)
R = TypeVar("R")
STRANDED_AFTER_S = 3.0  # records waiting, nothing handled, agents idle: dropped records at a partition's end


class OffsetLedger:
    def __init__(self, commit: Callable[[Mapping[Any, int]], Awaitable[bool]],
                 partition_of: Callable[[str, int], Any],
                 committed: Callable[[Any], int | None] = lambda tp: None,
                 first_offset: Callable[[Any, int], Awaitable[int | None]] | None = None,
                 group_start: Callable[[Any], Awaitable[int | None]] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._commit = commit
        self._first_offset = first_offset or _cannot_tell  # the brokers' first record at or after an offset
        self._group_start = group_start or _unknown_start  # the brokers' view of where the group reads a partition
        self._clock = clock
        self._moved_at: dict[Any, float] = {}  # partition -> when it was last handled, sought or first watched
        self._partition_of = partition_of
        self._committed_at_start = committed  # the offset a partition was sought to when it was assigned
        self._handled: dict[Any, int] = {}  # partition -> the next offset to read
        self._committed: dict[Any, int] = {}
        self._rewinding: dict[Any, tuple[int, int]] = {}  # partition -> (sought back to, the offset seen after a gap)
        self._starts: dict[Any, int] = {}  # partition -> where the group reads it from, as the brokers said
        self._batch = asyncio.Lock()
        self.accepting = True
        self._closed = False

    @asynccontextmanager
    async def batch(self) -> Any:
        """Held while a batch is handled; a revocation or a stop waits for it."""
        async with self._batch:
            yield

    async def admit(self, records: Sequence[R], position: Callable[[R], tuple[str, int, int]]) -> tuple[list[R], list[
            tuple[Any, int]]]:
        """The records to handle now (each partition's in sequence from the last handled offset), and the
        ``(partition, offset)`` seeks to ask for where a gap shows records that were never handed over."""
        admitted: list[R] = []
        seeks: list[tuple[Any, int]] = []
        expected: dict[Any, int | None] = {}
        sought_again: set[Any] = set()  # partitions whose records all come again after this batch
        for record in records:
            topic, partition, offset = position(record)
            tp = self._partition_of(topic, partition)
            if tp not in expected:
                expected[tp] = self._next_offset(tp)
                if expected[tp] is None:  # Faust does not know yet where it starts: the brokers do
                    start = await self._group_start(tp)
                    if start is not None:
                        self._starts[tp] = start
                    expected[tp] = start
            want = expected[tp]
            if tp in sought_again or (want is not None and offset < want):
                continue  # read again after a seek: handled already, or to be handed over again
            rewinding = self._rewinding.get(tp)
            take = want is None or offset == want
            if want is not None and rewinding is None and not take:
                log.warning("records %s[%d]@%d..%d were never handed over; reading them again", topic, partition,
                            want, offset - 1)
                self._rewinding[tp] = (want, offset)
                seeks.append((tp, want))
            elif want is not None and not take and rewinding is not None and offset == rewinding[1]:  # again
                take = await self._gap_is_real(topic, partition, tp, want, offset)
                if not take:
                    seeks.append((tp, want))
                    sought_again.add(tp)
            # else: queued before the seek took effect; it comes again after the missing records
            if take:
                self._rewinding.pop(tp, None)
                expected[tp] = offset + 1
                admitted.append(record)
        return admitted, seeks

    def next_offset(self, tp: Any) -> int | None:
        """Where the ledger expects the partition's next record (None: not known yet)."""
        return self._next_offset(tp)

    def _next_offset(self, tp: Any) -> int | None:
        """The next offset to handle: after the last handled, else where the partition was sought to when it was
        assigned, else where the brokers said the group reads it from; None: not known (any record starts it)."""
        handled = self._handled.get(tp)
        if handled is not None:
            return handled
        committed = self._committed_at_start(tp)
        return committed if committed is not None else self._starts.get(tp)

    async def _gap_is_real(self, topic: str, partition: int, tp: Any, want: int, offset: int) -> bool:
        """The gap ``want..offset-1`` came again after the seek: real only if the brokers hold no record there."""
        first = await self._first_offset(tp, want)
        if first is not None and first >= offset:
            log.info("offsets %s[%d]@%d..%d hold no record (the brokers' log goes on at %d): going on", topic,
                     partition, want, offset - 1, first)
            return True
        log.warning("records %s[%d]@%d..%d were dropped again (the brokers' log has %s there); reading them again",
                    topic, partition, want, offset - 1, "a record" if first is not None else "no answer")
        return False

    def handled(self, records: Iterable[tuple[str, int, int]]) -> None:
        """``(topic, partition, offset)`` of records whose outputs are queued on the producer."""
        now = self._clock()
        for topic, partition, offset in records:
            tp = self._partition_of(topic, partition)
            self._moved_at[tp] = now
            if offset + 1 > self._handled.get(tp, -1):
                self._handled[tp] = offset + 1

    async def stranded(self, ends: Mapping[Any, int]) -> list[tuple[Any, int]]:
        """The ``(partition, offset)`` seeks for partitions whose log goes past the next offset to handle
        (``ends``: each watched partition's end offset) and on which nothing was handled for ``STRANDED_AFTER_S``.
        The caller asks only while its agents are idle. A partition is sought at most once per that period.

        A partition the ledger knows no start of (nothing handled since it was assigned, and Faust sought it to
        no committed offset: the group never committed there) is judged from where the brokers say the group reads
        it. Measured: the first records of such a partition, handed to a stream around a rebalance and dropped by
        Faust, left it stalled with nothing to compare its end with, until the liveness probe restarted the worker
        (the silent hang of issue 28)."""
        now = self._clock()
        seeks = []
        for tp, end in ends.items():
            since = self._moved_at.setdefault(tp, now)
            if now - since < STRANDED_AFTER_S:
                continue
            want = self._next_offset(tp)
            if want is None and end > 0:
                start = await self._group_start(tp)
                if start is not None:
                    self._starts[tp] = want = start
            if want is None or end <= want:
                continue
            log.warning("records %s[%d]@%d..%d were never handed over and nothing came after them; reading them "
                        "again", getattr(tp, "topic", tp), getattr(tp, "partition", 0), want, end - 1)
            self._moved_at[tp] = now
            seeks.append((tp, want))
        return seeks

    async def commit(self) -> None:
        pending = {tp: offset for tp, offset in self._handled.items() if self._committed.get(tp) != offset}
        if not pending:
            return
        try:
            if await self._commit(pending):
                self._committed.update(pending)
        except Exception:  # a failed commit is tried again; the records may be read once more, never lost
            log.exception("committing the offsets of handled inputs failed")

    async def revoke(self) -> None:
        """The group is rebalancing: let the batch in hand finish, commit it, and accept nothing more until the
        next assignment (the partitions may already belong to another worker)."""
        async with self._batch:
            self.accepting = False
            await self.commit()
            self._handled.clear()
            self._committed.clear()
            self._rewinding.clear()
            self._starts.clear()
            self._moved_at.clear()

    def assigned(self) -> None:
        self.accepting = True

    async def close(self) -> None:
        """The worker stops: commit what was handled and hold the batch lock, so nothing else is handled. Once:
        a second call returns at once."""
        if self._closed:
            return
        self._closed = True
        await self._batch.acquire()
        self.accepting = False
        await self.commit()


async def _cannot_tell(tp: Any, offset: int) -> int | None:
    """Without a way to ask the brokers, no gap is taken for a real one."""
    return None


async def _unknown_start(tp: Any) -> int | None:
    """Without a way to ask the brokers, the first record handed over starts a partition Faust knows nothing of."""
    return None
