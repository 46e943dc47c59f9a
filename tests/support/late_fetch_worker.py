"""``python -m tests.support.late_fetch_worker``: a real worker whose fetch in flight at a rebalance comes back late,
the way it does on a loaded machine.

Faust's fetch loop asks the consumer thread for records and waits up to a second for them. A rebalance can stop the
flow while that call waits; the call then goes on waiting through the new assignment. If the table's recovery seeks
its changelog partitions while the call still waits, and the main loop is busy for a moment after the seek, the
call drains the records just sought and hands them back while the flow is still stopped. This module forces that
interleaving every time instead of once in a few hundred rebalances:

* a fetch that sees the flow stop while it waits (before, during or after a drain) holds on until the recovery has
  sought its active partitions (at most 10 s), then drains what the consumer holds by then, and returns it with
  whatever it had drained before the seek;
* the recovery, once it has sought, lets the main loop go for half a second before it resumes the flow.

What the worker does with the records drained in that window is the product's behaviour under test. The log says
``late fetch: drained N records of M partitions after the recovery's seek`` each time the interleaving happened.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Mapping, Set
from typing import Any

from aiokafka.errors import ConsumerStoppedError
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from om_stream.runtime.worker import faust_internals
from om_stream.runtime.worker.app import Worker
from om_stream.runtime.worker.deps import build_deps
from om_stream.runtime.worker.main import run_worker
from om_stream.settings import Settings

settings = Settings()
logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
log = logging.getLogger("late_fetch_worker")
seeks = [0]  # the recovery's seeks of its active partitions so far (counted on the main thread, read on the consumer's)
seek_lock = threading.Lock()


async def drain(consumer: Any, partitions: Set[TP], timeout: float, max_records: int | None) -> Any:
    """What Faust's own ``_fetch_records`` does once it has seen the flow running."""
    fetcher = consumer._fetcher
    if consumer._closed or fetcher._closed:
        raise ConsumerStoppedError()
    with fetcher._subscriptions.fetch_context():
        return await fetcher.fetched_records(partitions, timeout=timeout, max_records=max_records)


def merged(first: Any, second: Any) -> Any:
    """Two drains' records as one batch, in offset order per partition."""
    batch = {tp: list(records) for tp, records in first.items()}
    for tp, records in second.items():
        batch[tp] = sorted([*batch.get(tp, []), *records], key=lambda record: record.offset)
    return batch


async def late_fetch_records(self: Any, consumer: Any, active_partitions: Set[TP], timeout: float | None = None,
                             max_records: int | None = None) -> Any:
    if not self.consumer.flow_active:
        return {}
    with seek_lock:
        seeks_at_start = seeks[0]
    deadline = time.monotonic() + (timeout or 0.0)
    held: Any = {}
    while self.consumer.flow_active:  # the deadline is looked at only while the flow runs: a drain that saw the
        if time.monotonic() >= deadline:  # flow stop (it waits through the reassignment) always holds on below
            return {}
        held = await drain(consumer, active_partitions, 0.05, max_records)
        if held and self.consumer.flow_active:
            return held
    # a rebalance stopped the flow while this call waited (what it drained meanwhile, if anything, is kept): hold
    # on until the recovery has sought its active partitions, then drain what it sought
    held_since = time.monotonic()
    while seeks[0] == seeks_at_start and time.monotonic() - held_since < 10.0:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)  # the sought partitions' first fetch answers
    late = await drain(consumer, active_partitions, 1.0, max_records)
    if seeks[0] != seeks_at_start and late:
        log.warning("late fetch: drained %d records of %d partitions after the recovery's seek",
                    sum(len(batch) for batch in late.values()), len(late))
    return merged(held, late)


seek_offsets = faust_internals._Recovery._seek_offsets


async def seek_then_linger(self: Any, consumer: Any, tps: Set[TP], offsets: Mapping[TP, int | None],
                           title: str) -> None:
    await seek_offsets(self, consumer, tps, offsets, title)
    if title == "active":
        with seek_lock:
            seeks[0] += 1
        await asyncio.sleep(0.5)  # the main loop busy elsewhere before the recovery resumes the flow


faust_aiokafka.AIOKafkaConsumerThread._fetch_records = late_fetch_records  # type: ignore[method-assign]
faust_internals._Recovery._seek_offsets = seek_then_linger  # type: ignore[method-assign]
sys.exit(run_worker(settings, Worker(build_deps(settings))))
