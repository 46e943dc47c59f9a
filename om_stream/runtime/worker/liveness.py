"""Whether the worker can still do its job, for ``/livez`` (metrics port) and ``om_worker_live``: crash-only.

Two things make a worker useless while its process still answers HTTP: an agent that died (Faust would start it
again, and the new instance may never consume), and a partition that has records waiting but does not move (its
handler is stuck: a store that stays down, a deadlock). An agent crash is fatal at once: the callbacks given to
:meth:`Liveness.on_fatal` stop the process with a non-zero status, so the orchestrator starts a fresh one. A stalled
partition fails ``/livez`` (the chart's liveness probe) for as long as it stays stalled; progress makes it live
again. A partition's lag comes from the worker's consumer or, for one it never fetched or never committed since it
was assigned, from the brokers' view of the group (``group_lag``), so a handler stuck on its first record counts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from om_stream.observability.metrics import Metrics

__all__ = ["Liveness"]

log = logging.getLogger(__name__)


class Liveness:
    def __init__(self, metrics: Metrics, *, stall_timeout_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 diagnose: Callable[[str, int], str] | None = None) -> None:
        self.metrics = metrics
        self.diagnose = diagnose  # what the consumer knows of a stalled partition, for the log line
        self.stall_timeout_s = stall_timeout_s
        self.clock = clock
        self.crashed: str | None = None
        self.stalled: dict[tuple[str, int], str] = {}
        self._progress: dict[tuple[str, int], tuple[int, float]] = {}  # partition -> (committed offset, since)
        self._fatal: list[Callable[[BaseException], None]] = []
        metrics.worker_live.set(1)

    @property
    def live(self) -> bool:
        return self.crashed is None and not self.stalled

    def reasons(self) -> list[str]:
        return ([self.crashed] if self.crashed else []) + sorted(self.stalled.values())

    def on_fatal(self, callback: Callable[[BaseException], None]) -> None:
        self._fatal.append(callback)

    def agent_crashed(self, agent: str, exc: BaseException) -> None:
        self.metrics.agent_crashes.labels(agent).inc()
        self.crashed = f"agent {agent} crashed: {type(exc).__name__}: {exc}"[:500]
        self.metrics.worker_live.set(0)
        log.critical("%s; the worker stops so that it is started again", self.crashed, exc_info=exc)
        for callback in self._fatal:
            callback(exc)

    def check_progress(self, partitions: Iterable[tuple[str, int, int, int]], *, ready: bool) -> None:
        """``(topic, partition, lag, committed offset)`` of the partitions assigned now. A rebalance (not ready)
        starts every measure again."""
        now = self.clock()
        if not ready:
            self._progress.clear()
            self.stalled.clear()
            self._publish()
            return
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
                log.error("partition stalled: %s%s", self.stalled[tp], f" ({detail})" if detail else "")
        for tp in set(self._progress) - seen:
            del self._progress[tp]
            self.stalled.pop(tp, None)
        self._publish()

    def _publish(self) -> None:
        self.metrics.worker_live.set(1 if self.live else 0)
