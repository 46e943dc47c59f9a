"""What a worker holds in process, read into gauges every ``INVENTORY_INTERVAL_S``: the event loop's tasks
(``om_asyncio_tasks``), the records of its local state-table copy and their bytes (``om_table_records``,
``om_table_bytes``), the content cache's bytes (``om_content_cache_bytes``) and the entries of each in-process map
that traffic adds to (``om_held_entries{map}``).

Each of those maps is bounded or pruned where its entries stop being needed (``tests/component/test_bounded_maps.py``
holds each to it with thousands of inputs); these gauges show that it stays so over hours of traffic with
rebalances, in production and in ``make bench-soak``. Reading them is cheap (sizes, and for an in-memory table one
pass over its values' lengths: nothing is decoded), so it runs on the worker's loop."""

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
        self._table_bytes: Callable[[], int | None] | None = None
        self._cache_bytes: Callable[[], int] | None = None

    def entries(self, name: str, size: Callable[[], int]) -> None:
        """``om_held_entries{map=name}`` reads ``size()``."""
        self._entries[name] = size

    def table(self, records: Callable[[], int | None], size_bytes: Callable[[], int | None]) -> None:
        """``om_table_records`` reads ``records()`` and ``om_table_bytes`` ``size_bytes()`` (None: unknown now, the
        gauge keeps its last reading)."""
        self._table_records, self._table_bytes = records, size_bytes

    def cache(self, size_bytes: Callable[[], int]) -> None:
        self._cache_bytes = size_bytes

    def read(self) -> None:
        self.metrics.asyncio_tasks.set(len(asyncio.all_tasks()))
        for read, gauge in ((self._table_records, self.metrics.table_records),
                            (self._table_bytes, self.metrics.table_bytes)):
            value = read() if read is not None else None
            if value is not None:
                gauge.set(value)
        if self._cache_bytes is not None:
            self.metrics.content_cache_bytes.set(self._cache_bytes())
        for name, size in self._entries.items():
            self.metrics.held_entries.labels(name).set(size())
