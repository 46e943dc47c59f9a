"""Whether the worker can still do its job, for ``/livez`` (metrics port) and ``om_worker_live``: crash-only.

Two things make a worker useless while its process still answers HTTP: an agent that died (Faust would start it
again, and the new instance may never consume), and a partition that has records waiting but does not move (its
handler is stuck: a store that stays down, a deadlock). An agent crash is fatal at once: the callbacks given to
:meth:`Liveness.on_fatal` stop the process with a non-zero status, so the orchestrator starts a fresh one. A stalled
partition fails ``/livez`` (the chart's liveness probe) for as long as it stays stalled; progress makes it live
again. A partition's lag comes from the worker's consumer or, for one it never fetched or never committed since it
was assigned, from the brokers' view of the group (``group_lag``), so a handler stuck on its first record counts.

A table recovery (after the start or a rebalance) that reads nothing while changelog records remain is stalled the
same way (``recovering``): the worker serves none of its threads until its table has recovered, and nothing else
would say so, since a worker in recovery is not judged by its partitions' progress. Faust logs the partitions that
send no events; the worker fails ``/livez`` and counts a stall, so that a fresh process recovers instead.

A stall while the content store is down (``StoreOutageWatch``: its operations fail and are retried) is the store's,
not the worker's: a new process would wait for the same store, after a rebalance and a table recovery, and every
worker of the deployment stalls at once, so restarting them all only adds load when the store comes back. Such a
stall keeps the worker live for ``outage_budget_s`` from the outage's start (``worker.store_outage_budget_s``).
Past the budget it fails ``/livez`` after all: an outage that long may be the worker's own (a driver holding
addresses the nodes no longer have, credentials or certificates rotated under it), which a fresh process, resolving
and connecting anew, gets past; and a restarting pod is the loudest signal an orchestrator gives.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from om_stream.observability.metrics import Metrics
from om_stream.observability.store_outages import Outage, StoreOutageWatch

__all__ = ["RECOVERY", "Liveness"]

log = logging.getLogger(__name__)
RECOVERY = ("<table recovery>", -1)  # the recovery's entry among the stalled partitions


class Liveness:
    def __init__(self, metrics: Metrics, *, stall_timeout_s: float, outages: StoreOutageWatch | None = None,
                 outage_budget_s: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 diagnose: Callable[[str, int], str] | None = None) -> None:
        self.metrics = metrics
        self.diagnose = diagnose  # what the consumer knows of a stalled partition, for the log line
        self.stall_timeout_s = stall_timeout_s
        self.outages = outages
        self.outage_budget_s = outage_budget_s
        self.clock = clock
        self.crashed: str | None = None
        self.stalled: dict[tuple[str, int], str] = {}
        self._progress: dict[tuple[str, int], tuple[int, float]] = {}  # partition -> (committed offset, since)
        self._recovery: tuple[int, float] | None = None  # (changelog records still to read, since)
        self._fatal: list[Callable[[BaseException], None]] = []
        self._over_budget: str | None = None  # the outage past its budget, once logged
        metrics.worker_live.set(1)

    def _outage(self) -> Outage | None:
        ongoing = self.outages.ongoing() if self.outages is not None else []
        return ongoing[0] if ongoing else None

    @property
    def live(self) -> bool:
        if self.crashed is not None:
            return False
        if not self.stalled:
            return True
        outage = self._outage()
        return outage is not None and outage.seconds <= self.outage_budget_s

    def reasons(self) -> list[str]:
        """Why the worker is not live (empty when it is)."""
        if self.live:
            return []
        outage = self._outage()
        store = ([f"content store {outage.store} unavailable for {outage.seconds:.0f}s, past "
                  f"worker.store_outage_budget_s ({self.outage_budget_s:.0f}s): {outage.reason}"]
                 if outage is not None and self.stalled else [])
        return ([self.crashed] if self.crashed else []) + store + sorted(self.stalled.values())

    def waiting(self) -> list[str]:
        """What the worker waits for while it is live anyway: stalled partitions and the store outage behind them,
        within its budget (empty otherwise)."""
        outage = self._outage()
        if not self.stalled or not self.live or outage is None:
            return []
        return [f"content store {outage.store} unavailable for {outage.seconds:.0f}s (live for up to "
                f"{self.outage_budget_s:.0f}s of it): {outage.reason}", *sorted(self.stalled.values())]

    def on_fatal(self, callback: Callable[[BaseException], None]) -> None:
        self._fatal.append(callback)

    def agent_crashed(self, agent: str, exc: BaseException) -> None:
        self.metrics.agent_crashes.labels(agent).inc()
        self.crashed = f"agent {agent} crashed: {type(exc).__name__}: {exc}"[:500]
        self.metrics.worker_live.set(0)
        log.critical("%s; the worker stops so that it is started again", self.crashed, exc_info=exc)
        for callback in self._fatal:
            callback(exc)

    def check_progress(self, partitions: Iterable[tuple[str, int, int, int]]) -> None:
        """``(topic, partition, lag, committed offset)`` of the partitions assigned now, the table recovered (a
        recovery, :meth:`recovering`, starts every measure again)."""
        now = self.clock()
        if self.outages is not None:
            self.outages.settle()  # an outage over while nothing was written ends now, not at the next write
        self._recovery = None
        self.stalled.pop(RECOVERY, None)
        seen = set()
        for topic, partition, lag, committed in partitions:
            tp = (topic, partition)
            seen.add(tp)
            last = self._progress.get(tp)
            if lag <= 0 or last is None or last[0] != committed:
                self._progress[tp] = (committed, now)
                self.stalled.pop(tp, None)
                continue
            waited = now - last[1]
            if waited >= self.stall_timeout_s and tp not in self.stalled:
                self.stalled[tp] = (f"{topic}[{partition}]: {lag} records waiting and no progress for "
                                    f"{waited:.0f}s")
                self.metrics.partition_stalls.inc()
                detail = self.diagnose(topic, partition) if self.diagnose is not None else ""
                self._log_stall(self.stalled[tp] + (f" ({detail})" if detail else ""))
        for tp in set(self._progress) - seen:
            del self._progress[tp]
            self.stalled.pop(tp, None)
        self._publish()

    def recovering(self, remaining: int) -> None:
        """The table is recovering, with ``remaining`` changelog records still to read: the partitions' measures
        start again (as at a rebalance), and a recovery whose remainder has not moved for ``stall_timeout_s`` while
        records remain is stalled."""
        now = self.clock()
        self._progress.clear()
        last = self._recovery
        if remaining <= 0 or last is None or last[0] != remaining:
            self._recovery = (remaining, now)
            self.stalled.clear()
        else:
            waited = now - last[1]
            if waited >= self.stall_timeout_s and RECOVERY not in self.stalled:
                self.stalled = {RECOVERY: f"table recovery: {remaining} changelog records still to read and none read "
                                          f"for {waited:.0f}s"}
                self.metrics.partition_stalls.inc()
                self._log_stall(self.stalled[RECOVERY])
        self._publish()

    def _log_stall(self, stall: str) -> None:
        outage = self._outage()
        if outage is None:
            log.error("partition stalled: %s", stall)
        else:
            log.warning("partition stalled: %s, while content store %s is unavailable (%s)", stall, outage.store,
                        outage.reason)

    def _publish(self) -> None:
        live = self.live
        self.metrics.worker_live.set(1 if live else 0)
        outage = self._outage()
        if not live and self.crashed is None and outage is not None:
            if self._over_budget != outage.store:
                self._over_budget = outage.store
                log.error("content store %s unavailable for %.0f s, past worker.store_outage_budget_s (%.0f s), and "
                          "partitions are stalled: /livez fails so that the worker is restarted", outage.store,
                          outage.seconds, self.outage_budget_s)
        else:
            self._over_budget = None
