"""Worker metrics that no single input produces: consumer lag, state-table recovery time, buffer→activation latency,
and :func:`instrument_worker`, which attaches every metric feed to a built worker.

``instrument_worker(worker)`` (once, before the worker starts):

* the model gateway's call observers get :class:`~om_stream.observability.model_metrics.ModelCallMetrics`; a model
  not behind the gateway (``OM_MEMORY_MODEL=offline``) and the offline fallback are wrapped in ``MeteredModel``;
* the ``CycleRunner`` observers get ``CycleMetrics`` (budget refusals, offline fallbacks);
* a Faust timer refreshes ``om_consumer_lag_records`` (high watermark − committed offset, per assigned partition),
  feeds the same figures to the worker's liveness (a partition with lag that stops moving), and refreshes
  ``om_table_recovery_seconds`` (from start, or from the moment it stopped being ready, until ``/healthz`` is
  ready again).

It never imports Faust: the worker and its app are used through the attributes named here.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from om_stream.observability.metrics import Metrics
from om_stream.observability.model_metrics import CycleMetrics, MeteredModel, ModelCallMetrics

if TYPE_CHECKING:
    from om_stream.core.state import RecordState

__all__ = ["ConsumerLag", "RecoveryTimer", "activation_latencies", "instrument_worker"]

log = logging.getLogger(__name__)


def activation_latencies(before: RecordState, after: RecordState, now_ms: int) -> list[float]:
    """Seconds each buffered chunk (or buffered reflection) waited between being buffered and being activated by
    the step from ``before`` to ``after``. Chunks that left the buffer without entering the log (a clear) are not
    activations."""
    if not before.buffered and before.buffered_reflection is None:
        return []
    latencies: list[float] = []
    if before.buffered:
        remaining = {chunk.id for chunk in after.buffered}
        logged = {segment.id for segment in after.log}
        latencies.extend(max(0.0, (now_ms - chunk.buffered_at) / 1000) for chunk in before.buffered
                         if chunk.id not in remaining and chunk.id in logged)
    reflection = before.buffered_reflection
    if reflection is not None and after.buffered_reflection is None and after.generation > before.generation:
        latencies.append(max(0.0, (now_ms - reflection.buffered_at) / 1000))
    return latencies


class ConsumerLag:
    """Sets ``om_consumer_lag_records{topic, partition}`` for the partitions assigned to this worker and drops the
    series of partitions it no longer holds."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._series: set[tuple[str, str]] = set()

    def update(self, lags: Iterable[tuple[str, int, int, int]]) -> None:
        seen: set[tuple[str, str]] = set()
        for topic, partition, lag, _committed in lags:
            labels = (topic, str(partition))
            self.metrics.consumer_lag.labels(*labels).set(max(0, lag))
            seen.add(labels)
        for labels in self._series - seen:
            with contextlib.suppress(KeyError):
                self.metrics.consumer_lag.remove(*labels)
        self._series = seen

    @staticmethod
    def read(app: Any) -> list[tuple[str, int, int, int]]:
        """(topic, partition, lag, committed offset) from a Faust app: the lag is the consumer's high watermark
        minus the committed offset."""
        consumer = app.consumer
        committed = app.monitor.tp_committed_offsets or {}
        lags: list[tuple[str, int, int, int]] = []
        for tp in consumer.assignment():
            try:
                end = consumer.highwater(tp)
            except (AssertionError, KeyError, AttributeError, TypeError):  # not fetched yet
                continue
            done = committed.get(tp)
            if end is None or done is None:
                continue
            lags.append((tp.topic, tp.partition, int(end) - int(done), int(done)))
        return lags


class RecoveryTimer:
    """``om_table_recovery_seconds``: how long the worker was last not ready (table recovery after start or after a
    rebalance), measured at the resolution of the calls to :meth:`tick`."""

    def __init__(self, metrics: Metrics, started_at: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics
        self.clock = clock
        self._since: float | None = started_at

    def tick(self, ready: bool) -> None:
        now = self.clock()
        if not ready:
            if self._since is None:
                self._since = now
            return
        if self._since is not None:
            self.metrics.table_recovery_seconds.set(now - self._since)
            self._since = None


def _already(observers: list[Any], kind: type) -> bool:
    return any(isinstance(o, kind) for o in observers)


def instrument_worker(worker: Any, *, interval_s: float = 1.0) -> None:
    """Attach every metric feed to ``worker`` (``om_stream.runtime.worker.app.Worker``). Idempotent."""
    if getattr(worker, "_om_instrumented", False):
        return
    worker._om_instrumented = True
    metrics: Metrics = worker.deps.metrics
    runner = worker.runner
    observers = getattr(runner.model, "observers", None)
    if isinstance(observers, list):  # the gateway: it reports every attempt itself
        if not _already(observers, ModelCallMetrics):
            observers.append(ModelCallMetrics(metrics, runner.model))
        calls: Callable[[Any], None] = next(o for o in observers if isinstance(o, ModelCallMetrics))
    else:
        calls = ModelCallMetrics(metrics)
        runner.model = MeteredModel(runner.model, calls)
    if not isinstance(runner.offline, MeteredModel):
        runner.offline = MeteredModel(runner.offline, calls)
    if not _already(runner.observers, CycleMetrics):
        runner.observers.append(CycleMetrics(metrics))

    lag = ConsumerLag(metrics)
    recovery = RecoveryTimer(metrics, getattr(worker, "started_at", time.monotonic()))

    async def refresh() -> None:
        ready = bool(worker.recovered)
        recovery.tick(ready)
        if not ready:
            worker.liveness.check_progress((), ready=False)
            return
        try:
            lags = ConsumerLag.read(worker.app)
        except Exception:  # a metric must never stop the worker's timers
            log.exception("consumer lag could not be read")
            return
        lag.update(lags)
        worker.liveness.check_progress(lags, ready=True)

    worker.app.timer(interval=interval_s)(refresh)
