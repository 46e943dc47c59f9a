"""Where the worker steps past Faust's declared API: every private member of Faust (and of mode and aiokafka under
it) the worker uses, and the public members Faust types too loosely for mypy. No other module touches a private
attribute of a Faust object or casts one to ``Any`` (``tests/unit/test_layers.py`` scans for both).

Checked against ``FAUST_CHECKED`` (faust-streaming 0.15.3, mode-streaming 0.7.1, aiokafka 0.14.0). None of this is
promised by those projects: an upgrade reads this module first, and the production-shape tests fail if a member
changes (``test_worker_group.py``, ``test_broker_faults.py``, ``test_stalled_member.py``, ``test_worker_crash.py``).

Private members, and why each is needed:

* ``faust.streams._current_event`` (:func:`in_event`): a table write goes to the changelog partition of "the event
  being handled", which Faust keeps in this context variable. The memory agent handles a batch of events at once and
  writes each record's state after the batch, so it sets the record's event itself (``state_table``).
* ``Consumer._commit_offsets`` (:func:`commit_offsets`): Faust's own commit step for given offsets (flush the
  producer, commit the partitions still assigned, tell the monitor). The public ``commit`` commits what Faust
  acknowledged; the worker commits what it handled (``offsets``), so it needs the step that takes offsets.
* ``Consumer._committed_offset`` (:func:`sought_offset`): where Faust sought a partition when its recovery completed;
  the offset ledger starts a partition there (``offsets``).
* ``Consumer._active_partitions``, ``_paused_partitions``, ``_buffered_partitions`` (:func:`fetch_flags`): read for
  a stall's diagnosis only (is Faust fetching the partition at all).
* ``Consumer._thread`` → ``AIOKafkaConsumerThread._ensure_consumer()`` → ``AIOKafkaConsumer._coordinator`` and its
  ``_do_heartbeat`` (:func:`group_coordinator`, :func:`observe_heartbeats`, :func:`heartbeat_now`): the group
  coordinator's generation and a heartbeat on demand, so a member the group dropped fences its batch
  (``membership``). Faust reads the generation by the same route
  (``faust.transport.drivers.aiokafka.ConsumerRebalanceListener``).
* ``rocksdb.Store._dbs`` (:func:`rocksdb_databases`): the partition databases, for RocksDB's own estimate of the
  keys they hold (an inventory gauge).
* ``Recovery._seek_offsets`` and ``TableManager._recovery`` (:class:`Tables`, the app's ``TableManager``): faust
  0.15.3's table recovery reads the changelog offsets, restores the active partitions, then seeks the standby ones
  without looking whether a new rebalance began meanwhile. That rebalance's partitions have no offset yet (``None``:
  the in-memory store persists none), and aiokafka's ``seek`` refuses ``None``: the recovery service crashed and
  the worker exited (twice in one second in the hour-long soak, each right after "Heartbeat failed ...
  rebalancing"). The override seeks such a partition to its changelog's start, as Faust does for -1 ("nothing read
  yet"); reading a compacted changelog from its start is always correct, and the restarted recovery reads the
  partition's real start anyway (:func:`seek_targets`).
* ``Consumer._wait_next_records``, ``Consumer._thread``, ``Consumer._read_offset`` and the consumer thread's
  ``call_thread`` and ``_ensure_consumer`` (:class:`ReturningConsumer`, the transport's consumer from
  :func:`use_returning_consumer`): Faust's fetch loop waits up to a second for records, and a rebalance that stops
  the flow does not end that wait. When the wait ends with records while the flow is stopped, Faust drops them and
  seeks back only the partitions that have a committed offset above 0. The client has already moved its position
  past them, so every other partition lost them for good. A changelog partition never has a committed offset: when
  the table's recovery sought one and the late fetch drained it before the recovery resumed the flow, the recovery
  waited forever for records already taken (the fresh-clone CI hang of 2026-12-05; ``test_recovery_late_fetch.py``
  forces it). The override puts such records back: it seeks each partition to its first record drained, and hands
  Faust nothing, as Faust would have dropped them.
* ``Message.acked`` set by hand (:func:`leave_unacknowledged`): Faust's stop waits, with no deadline, until every
  message handed to an agent and still referenced is marked acknowledged (``Consumer.wait_empty`` drops the marked
  ones from its weak set of pending messages). The request a calls agent holds when a drain begins is never run,
  so it was never marked: the stop waited on it until the worker's own deadline ended the process, still in the
  group (the "drain hang" of issue 28, caught with its stack dump in the soak). Marked by hand, without telling the
  consumer (whose acknowledged offsets are what it commits), the stop goes on and the offset stays uncommitted, so
  the partition's next owner reads the request again. The stream's own acknowledgement of the event, when the
  cancelled agent's stream is closed, then finds it marked and does nothing, so the request is not committed then
  either.
* ``mode.Worker._schedule_shutdown`` (:class:`SignalledWorker`): the one place SIGINT and SIGTERM pass before the stop
  begins; the worker arms its stop deadline there.

Public members typed too loosely (each a cast here instead of in the callers): the table manager's ``recovery``
(``TableManagerT`` does not declare it), ``Stream.noack_take`` (``StreamT`` does not declare it, ``Stream`` says it
yields values), mode's signals (its ``SignalHandlerT`` names a keyword no function can meet under mypy), and the
aiohttp driver's application and request (Faust types them as its own driver-neutral ``Web`` and ``Request``).
"""

from __future__ import annotations

import signal as signals
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from typing import Any, cast

import faust
from aiohttp import web as aiohttp_web
from faust.stores import rocksdb as faust_rocksdb
from faust.streams import Stream, _current_event
from faust.tables.manager import TableManager
from faust.tables.recovery import Recovery
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, ConsumerT, EventT
from faust.web import Request as FaustRequest
from faust.web.drivers.aiohttp import Web as AiohttpWeb
from faust.worker import Worker as FaustWorker

__all__ = ["FAUST_CHECKED", "SignalledWorker", "Tables", "aiohttp_application", "aiohttp_request", "commit_offsets",
           "connect", "fetch_flags", "group_coordinator", "heartbeat_now", "in_event", "leave_unacknowledged",
           "noack_batches", "observe_heartbeats", "recovery_completed", "recovery_remaining", "rocksdb_databases",
           "seek_targets", "sought_offset", "use_returning_consumer"]

FAUST_CHECKED = "faust-streaming 0.15.3, mode-streaming 0.7.1, aiokafka 0.14.0"

# -- private members -------------------------------------------------------------------------------------------------


@contextmanager
def in_event(event: EventT[bytes] | None) -> Iterator[None]:
    """Table reads and writes inside this block belong to ``event`` (its partition's changelog and database)."""
    token = _current_event.set(weakref.ref(event) if event is not None else None)
    try:
        yield
    finally:
        _current_event.reset(token)


async def commit_offsets(consumer: ConsumerT, offsets: Mapping[TP, int]) -> bool:
    """Flush the producer, then commit ``offsets`` of the partitions still assigned (False: nothing committed)."""
    return bool(await cast(Any, consumer)._commit_offsets(offsets))


def sought_offset(consumer: ConsumerT, tp: TP) -> int | None:
    """The offset Faust sought ``tp`` to when its recovery completed after the last assignment (None: not yet)."""
    offset = cast(Any, consumer)._committed_offset.get(tp)
    return int(offset) if offset is not None else None


def fetch_flags(consumer: ConsumerT, tp: TP) -> list[str]:
    """Whether Faust fetches ``tp`` (active, paused, held back by a full buffer), as ``name=value`` facts for a log
    line; what cannot be read says ``unknown``."""
    facts = []
    for name, member in (("active", "_active_partitions"), ("paused", "_paused_partitions"),
                         ("buffered", "_buffered_partitions")):
        found = getattr(consumer, member, None)
        facts.append(f"{name}={tp in found if found is not None else 'unknown'}")
    return facts


def group_coordinator(consumer: ConsumerT) -> Any:
    """aiokafka's group coordinator under Faust's consumer (a new one each time the consumer is rebuilt): its
    ``generation`` is public, the rest of it is not."""
    return cast(Any, consumer)._thread._ensure_consumer()._coordinator


def observe_heartbeats(coordinator: Any, answered: Callable[[bool], None]) -> None:
    """``answered(ok)`` after each heartbeat the coordinator's own routine sends (on the consumer's thread)."""
    heartbeat: Callable[[], Awaitable[bool]] = coordinator._do_heartbeat

    async def observed() -> bool:
        ok = await heartbeat()
        answered(bool(ok))
        return ok

    coordinator._do_heartbeat = observed


def heartbeat_now(consumer: ConsumerT, coordinator: Any) -> Awaitable[bool]:
    """One heartbeat of ``coordinator`` now, on the consumer's thread: True if it answered that we are a member."""
    return cast(Awaitable[bool], cast(Any, consumer)._thread.call_thread(coordinator._do_heartbeat))


def rocksdb_databases(store: faust_rocksdb.Store) -> list[Any]:
    """The open RocksDB database of each partition the store holds."""
    return list(cast(Any, store)._dbs.values())


class SignalledWorker(FaustWorker):
    """Faust's worker, with :meth:`on_stop_signal` called when SIGINT or SIGTERM asks it to stop (before the stop
    begins; mode offers no public hook there)."""

    def on_stop_signal(self, signal: signals.Signals) -> None:
        """A signal asked the worker to stop (every later signal too; the stop itself begins once)."""

    def _schedule_shutdown(self, signal: signals.Signals) -> None:
        self.on_stop_signal(signal)
        super()._schedule_shutdown(signal)


# -- public members typed too loosely ------------------------------------------------------------------------------


def leave_unacknowledged(event: EventT[bytes]) -> None:
    """``event`` will not be handled here: Faust's wait for every handed-out message to be acknowledged (its stop)
    no longer waits for it, and its offset is never acknowledged to the consumer, so it is not committed and the
    partition's next owner reads it."""
    event.message.acked = True


def recovery_completed(app: faust.App) -> bool:
    """The state table's recovery has completed once (Faust never clears this; no table: the consumer joined)."""
    return cast(TableManager, app.tables).recovery.completed.is_set()


def recovery_remaining(app: faust.App) -> int:
    """How many changelog records the table's recovery still has to read for its active partitions (0 once it has
    read them, or when no recovery is under way)."""
    return cast(TableManager, app.tables).recovery.active_remaining_total()


def noack_batches(stream: faust.StreamT[bytes], max_: int, within_s: float) -> AsyncIterator[Sequence[EventT[bytes]]]:
    """Batches of up to ``max_`` events (or what came within ``within_s``) that Faust does not acknowledge. (Faust
    declares batches of values; ``noack_take`` yields the events themselves.)"""
    batches = cast(Stream[bytes], stream).noack_take(max_, within=within_s)
    return cast(AsyncIterator[Sequence[EventT[bytes]]], batches)


def connect(signal: object, handler: Callable[..., Awaitable[None] | None]) -> None:
    """``handler(sender, *args, **kwargs)`` on each firing of one of the app's signals."""
    cast(Any, signal).connect(handler)


def aiohttp_application(app: faust.App) -> aiohttp_web.Application:
    """The aiohttp application under Faust's web server (the worker runs the aiohttp driver)."""
    return cast(AiohttpWeb, app.web).web_app


def aiohttp_request(request: FaustRequest) -> aiohttp_web.Request:
    """The aiohttp request a Faust view was given (the worker runs the aiohttp driver)."""
    return cast(aiohttp_web.Request, request)


def seek_targets(partitions: Set[TP], offsets: Mapping[TP, int | None]) -> dict[TP, int]:
    """Where table recovery seeks each changelog partition: its recorded offset, or the changelog's start (0) when
    it has none yet (``None``, a partition assigned after the offsets were read) or Faust's "nothing read" (-1)."""
    targets: dict[TP, int] = {}
    for tp in partitions:
        offset = offsets.get(tp)
        targets[tp] = offset if offset is not None and offset >= 0 else 0
    return targets


class _Recovery(Recovery):
    async def _seek_offsets(self, consumer: Any, tps: Set[TP], offsets: Any, title: str) -> None:
        await consumer.seek_wait(seek_targets(tps, offsets))


def first_offsets(records: Mapping[TP, Sequence[Any]]) -> dict[TP, int]:
    """The offset of each partition's first record in a batch the fetcher drained."""
    return {tp: int(batch[0].offset) for tp, batch in records.items() if batch}


class ReturningConsumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, except that records fetched while the flow is stopped go back to the client
    instead of being dropped (the module's docstring says why)."""

    async def _wait_next_records(self, timeout: float) -> tuple[Mapping[TP, list[Any]] | None, set[TP] | None]:
        records, active = await super()._wait_next_records(timeout)
        if not records or self.flow_active or self.should_stop:  # handed on, or a consumer that stops drops them
            return records, active
        offsets = first_offsets(records)
        await cast(Any, self)._thread.call_thread(_seek_assigned, cast(Any, self)._thread, offsets)
        read_offset = cast(Any, self)._read_offset
        for tp, offset in offsets.items():  # the drop filter must not pass over them once they come again
            read_offset[tp] = offset if offset else None
        return {}, active


async def _seek_assigned(thread: Any, offsets: Mapping[TP, int]) -> None:
    """On the consumer thread: seek each partition still assigned (one revoked meanwhile needs nothing: its next
    owner starts from the group's offsets)."""
    consumer = thread._ensure_consumer()
    assigned = consumer.assignment()
    for tp, offset in offsets.items():
        if tp in assigned:
            consumer.seek(tp, offset)


def use_returning_consumer(app: faust.App) -> None:
    """The app's transport builds :class:`ReturningConsumer` (call before the worker starts the app)."""
    cast(Any, app.transport).Consumer = ReturningConsumer


class Tables(TableManager):
    """Faust's table manager, recovering with :class:`_Recovery` (the app's ``TableManager``)."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = _Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
