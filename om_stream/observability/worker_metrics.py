"""Worker metrics that no single input produces: consumer lag (the worker's own and the group's as the brokers see
it), state-table recovery time.

The worker feeds them (a timer of its own reads the lag from its consumer and ticks the recovery timer); model-call
and cycle metrics are given to the models and the cycle runner when they are built (``model_metrics``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import Gauge

from om_stream.observability.metrics import Metrics

__all__ = ["ConsumerLag", "GroupLag", "RecoveryTimer"]


class _PartitionSeries:
    """A ``{topic, partition}`` gauge set from a full reading: series of partitions not in it are dropped."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self._series: set[tuple[str, str]] = set()

    def set_all(self, values: Iterable[tuple[str, int, int]]) -> None:
        seen: set[tuple[str, str]] = set()
        for topic, partition, value in values:
            labels = (topic, str(partition))
            self.gauge.labels(*labels).set(max(0, value))
            seen.add(labels)
        for labels in self._series - seen:
            with contextlib.suppress(KeyError):
                self.gauge.remove(*labels)
        self._series = seen


class ConsumerLag:
    """Sets ``om_consumer_lag_records{topic, partition}`` for the partitions assigned to this worker and drops the
    series of partitions it no longer holds."""

    def __init__(self, metrics: Metrics) -> None:
        self._series = _PartitionSeries(metrics.consumer_lag)

    def update(self, lags: Iterable[tuple[str, int, int, int]]) -> None:
        self._series.set_all((topic, partition, lag) for topic, partition, lag, _committed in lags)


class GroupLag:
    """Sets ``om_consumer_group_lag_records{topic, partition}`` from a reading of the brokers (``group_lag``)."""

    def __init__(self, metrics: Metrics) -> None:
        self._series = _PartitionSeries(metrics.consumer_group_lag)

    def update(self, lags: Mapping[tuple[str, int], int]) -> None:
        self._series.set_all((topic, partition, lag) for (topic, partition), lag in lags.items())


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
