"""What a worker holds in process, read into gauges every ``INVENTORY_INTERVAL_S``: the event loop's tasks
(``om_asyncio_tasks``), the records of its local state-table copy (``om_table_records``), the content cache's bytes
(``om_content_cache_bytes``) and the entries of each in-process map that traffic adds to (``om_held_entries{map}``).

Each of those maps is bounded or pruned where its entries stop being needed (``tests/component/test_bounded_maps.py``
holds each to it with thousands of inputs); these gauges show that it stays so over hours of traffic with
rebalances, in production and in ``make bench-soak``. Reading them is cheap (sizes, never a scan of the records),
so it runs on the worker's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from om_stream.observability.metrics import Metrics

__all__ = ["INVENTORY_INTERVAL_S", "Inventory"]

INVENTORY_INTERVAL_S = 10.0


class Inventory:
    """Sizes registered by the parts of the worker that hold them, set on the gauges by :meth:`read`."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._entries: dict[str, Callable[[], int]] = {}
        self._table_records: Callable[[], int | None] | None = None
        self._cache_bytes: Callable[[], int] | None = None

    def entries(self, name: str, size: Callable[[], int]) -> None:
        """``om_held_entries{map=name}`` reads ``size()``."""
        self._entries[name] = size

    def table(self, records: Callable[[], int | None]) -> None:
        """``om_table_records`` reads ``records()`` (None: unknown now, the gauge keeps its last reading)."""
        self._table_records = records

    def cache(self, size_bytes: Callable[[], int]) -> None:
        self._cache_bytes = size_bytes

    def read(self) -> None:
        self.metrics.asyncio_tasks.set(len(asyncio.all_tasks()))
        if self._table_records is not None:
            records = self._table_records()
            if records is not None:
                self.metrics.table_records.set(records)
        if self._cache_bytes is not None:
            self.metrics.content_cache_bytes.set(self._cache_bytes())
        for name, size in self._entries.items():
            self.metrics.held_entries.labels(name).set(size())
