"""The worker's watches, in every role: whether its partitions make progress (liveness, stalls), how far behind
they are (the consumer's lag every second, the group's from the brokers every ``GROUP_LAG_INTERVAL_S``), how long
the table took to recover, what the process holds (``inventory``), and how many rebalances it went through.

A watch reads and reports; it changes nothing the agents handle. What a stall then means is ``liveness``'s call
(crash-only); what a stranded partition needs is the hand-over's (``handover``), which the watch asks once a second.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import faust
from aiokafka.errors import KafkaError
from faust.types import TP

from om_stream.observability.metrics import Metrics
from om_stream.observability.worker_metrics import ConsumerLag, GroupLag, RecoveryTimer
from om_stream.runtime.worker.drain import InFlight
from om_stream.runtime.worker.faust_internals import connect, fetch_flags, sought_offset
from om_stream.runtime.worker.group_lag import GroupLagProbe
from om_stream.runtime.worker.inventory import INVENTORY_INTERVAL_S, Inventory
from om_stream.runtime.worker.liveness import Liveness
from om_stream.runtime.worker.offsets import OffsetLedger

__all__ = ["GROUP_LAG_INTERVAL_S", "Lag", "Watches", "stall_diagnosis"]

log = logging.getLogger(__name__)
GROUP_LAG_INTERVAL_S = 15.0
Lag = tuple[str, int, int, int]  # (topic, partition, lag, committed offset)


class Watches:
    def __init__(self, app: faust.App, metrics: Metrics, *, liveness: Liveness, recovered: Callable[[], bool],
                 group_lag: GroupLagProbe, in_flight: InFlight, inventory: Inventory, started_at: float,
                 stranded: Callable[[], Awaitable[None]] | None = None,
                 recovery_remaining: Callable[[], int] = lambda: 0) -> None:
        # stranded: the hand-over's rescue of partitions whose last records Faust dropped (roles with a table)
        self.app = app
        self.metrics = metrics
        self.liveness = liveness
        self.recovered = recovered
        self.recovery_remaining = recovery_remaining  # changelog records the table's recovery still has to read
        self.group_lag = group_lag
        self.in_flight = in_flight
        self.inventory = inventory
        self.stranded = stranded
        self._lag = ConsumerLag(metrics)
        self._group_lag = GroupLag(metrics)
        self._recovery = RecoveryTimer(metrics, started_at)

    def define(self) -> None:
        """Every role: liveness, lag and recovery every second, the group's lag, the inventory, rebalances."""
        app = self.app
        app.timer(interval=1.0)(self.tick)
        app.timer(interval=GROUP_LAG_INTERVAL_S)(self.read_group_lag)
        app.timer(interval=INVENTORY_INTERVAL_S)(self.read_inventory)

        def on_rebalance(sender: Any, *args: Any, **kwargs: Any) -> None:
            self.metrics.rebalances.inc()

        connect(app.on_rebalance_complete, on_rebalance)

    async def tick(self) -> None:
        """Every second: the table's recovery time, the consumer lag, and whether the partitions make progress."""
        recovered = self.recovered()
        self._recovery.tick(recovered)
        if not recovered:
            self.liveness.recovering(self.recovery_remaining())
            return
        lags = self.lags()
        self._lag.update(lags)
        self.liveness.check_progress(lags + self.unseen_lags(lags))
        if self.stranded is not None:
            await self.stranded()

    def lags(self) -> list[Lag]:
        """(topic, partition, lag, committed offset) of every assigned partition read so far: the lag is the
        consumer's high watermark minus the committed offset."""
        consumer = self.app.consumer
        committed = self.app.monitor.tp_committed_offsets or {}
        lags: list[Lag] = []
        for tp in consumer.assignment():
            try:
                end = consumer.highwater(tp)
            except (AssertionError, KeyError, AttributeError, TypeError):  # not fetched yet
                continue
            done = committed.get(tp)
            if end is not None and done is not None:
                lags.append((tp.topic, tp.partition, int(end) - int(done), int(done)))
        return lags

    def unseen_lags(self, seen: list[Lag]) -> list[Lag]:
        """The brokers' view (the last group-lag reading) of the assigned partitions the consumer cannot judge
        itself: never fetched, or never committed since the assignment. Without it a partition stuck from its first
        record on (records waiting, nothing committed) would never count as stalled."""
        known = {(topic, partition) for topic, partition, _, _ in seen}
        reading = self.group_lag.last
        found = []
        for tp in self.app.consumer.assignment():
            key = (tp.topic, tp.partition)
            if key not in known and key in reading:
                lag, start = reading[key]
                found.append((tp.topic, tp.partition, lag, start))
        return found

    async def read_group_lag(self) -> None:
        if not self.in_flight.open:
            return
        try:
            lags = await self.group_lag.measure()
        except (KafkaError, OSError, TimeoutError) as exc:  # brokers unreachable: the gauges keep their reading
            log.warning("the consumer group's lag could not be read from the brokers: %r", exc)
            return
        self._group_lag.update(lags)

    async def read_inventory(self) -> None:
        self.inventory.read()


def stall_diagnosis(app: faust.App, offsets: OffsetLedger, topic: str, partition: int) -> str:
    """What the consumer and the offset ledger know of a partition (for a stall's log line): whether Faust fetches
    it (active, paused, held back by a full buffer), where it fetches from, the log's end it saw, and where the
    ledger expects the next record."""
    consumer = app.consumer
    tp = TP(topic, partition)
    facts = fetch_flags(consumer, tp)
    try:
        facts.append(f"highwater={consumer.highwater(tp)}")
    except Exception as exc:  # noqa: BLE001 - a diagnosis: what cannot be read is said so
        facts.append(f"highwater=unknown ({type(exc).__name__})")
    facts.append(f"sought_to={sought_offset(consumer, tp)}")
    facts.append(f"ledger_next={offsets.next_offset(tp)}")
    facts.append(f"flow_active={bool(getattr(consumer, 'flow_active', 'unknown'))}")
    return ", ".join(facts)
