"""Content-store outages as the worker tells them: which store, since when and why, in the log and in a gauge.

A store reports each attempt through ``ports.StoreOutages``: an operation failed for want of the store and is being
retried (``failing``), or an operation succeeded (``succeeded``). An outage of a store begins with a failure and ends
once a success has come and ``QUIET_S`` has passed since the latest failure: while some operations fail and others
succeed (a part of the ring out of reach), the outage goes on. The end does not wait for another operation: when the
store returns under a retried write, the stalled writes all go through within a moment of the last failure and then
the worker may have nothing to write for a long time (its agents wait for their contexts), so the watch also ends
such an outage at the worker's next watch (:meth:`StoreOutageWatch.settle`, every second).

Most outages end in a moment: a node killed under a request is replaced by another coordinator on the driver's
first retry, and nobody needs to hear of it beyond the driver's own lines. One that lasts ``REPORT_AFTER_S`` is
logged at ERROR (the store, why, and that the worker waits and dead-letters nothing), again every ``REPEAT_S`` with
its latest reason, and at WARNING when it ends, with its length; ``om_store_unavailable{store}`` is 1 while it is
reported. Liveness reads :meth:`StoreOutageWatch.ongoing` to tell a stall the store causes from any other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from om_stream.observability.metrics import Metrics

__all__ = ["QUIET_S", "REPEAT_S", "REPORT_AFTER_S", "Outage", "StoreOutageWatch"]

log = logging.getLogger(__name__)
QUIET_S = 2.0  # a success this long after the latest failure ends an outage
REPORT_AFTER_S = 5.0  # longer than a retry on another node takes, far shorter than any stall timeout
REPEAT_S = 60.0


@dataclass(frozen=True)
class Outage:
    store: str
    reason: str  # the latest failure's
    seconds: float  # since the first failure
    reported: bool


@dataclass
class _Open:
    since: float
    latest: float  # the latest failure
    reason: str
    reported_at: float | None = None  # when last logged
    answered: bool = False  # the store succeeded since the latest failure


class StoreOutageWatch:
    """The worker's :class:`~om_stream.ports.StoreOutages`: one per process, fed by its content store."""

    def __init__(self, metrics: Metrics, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.clock = clock
        self._open: dict[str, _Open] = {}

    def failing(self, store: str, reason: str) -> None:
        now = self.clock()
        outage = self._open.get(store)
        if outage is None:
            self._open[store] = _Open(now, now, reason)
            return
        outage.latest, outage.reason, outage.answered = now, reason, False
        if outage.reported_at is None:
            if now - outage.since >= REPORT_AFTER_S:
                outage.reported_at = now
                self.metrics.store_unavailable.labels(store).set(1)
                log.error("content store %s unavailable for %.0f s: %s. The worker retries until it is back; its "
                          "inputs wait (nothing is dead-lettered)", store, now - outage.since, reason)
        elif now - outage.reported_at >= REPEAT_S:
            outage.reported_at = now
            log.error("content store %s still unavailable after %.0f s: %s", store, now - outage.since, reason)

    def succeeded(self, store: str) -> None:
        if not self._open:  # the hot path: no outage
            return
        outage = self._open.get(store)
        if outage is None:
            return
        outage.answered = True
        self.settle()

    def settle(self) -> None:
        """End every outage whose store has answered since its latest failure, ``QUIET_S`` or more ago (the worker's
        watches call this every second, so an outage ends without waiting for another operation)."""
        if not self._open:
            return
        now = self.clock()
        for store, outage in list(self._open.items()):
            if not outage.answered or now - outage.latest < QUIET_S:
                continue
            del self._open[store]
            if outage.reported_at is not None:
                self.metrics.store_unavailable.labels(store).set(0)
                log.warning("content store %s available again after %.0f s", store, now - outage.since)

    def ongoing(self) -> list[Outage]:
        """The outages under way, longest first (reported or not yet), after ending those that are over."""
        self.settle()
        now = self.clock()
        return sorted((Outage(store, o.reason, now - o.since, o.reported_at is not None)
                       for store, o in self._open.items()), key=lambda o: -o.seconds)
