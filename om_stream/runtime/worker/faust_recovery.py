"""Faust's table recovery, with the one correction the worker needs: a changelog partition assigned while a
recovery is under way no longer crashes the worker (``Tables``, given to the app as its ``TableManager``).

faust-streaming 0.15.3's ``Recovery`` reads each changelog partition's start offset (``_build_offsets``), then
seeks the consumer there (``_seek_offsets``), the standby partitions last, after the active ones are restored. A
rebalance in between adds its new partitions to the same sets with no offset yet (``None``: the in-memory store
persists none), and signals a restart of the recovery. The standby seek, which does not look at that signal,
then passes ``None`` to aiokafka's ``seek``, which raises ``ValueError("Offset must be a positive integer")``.
Recovery is a Faust service whose crash stops the app: the worker exits (status 1). Measured in the hour-long soak
(three workers, a leave and a join every 3 minutes): two of the three workers crashed this way in the same second,
each right after "Heartbeat failed ... because it is rebalancing".

The correction seeks such a partition to the start of its changelog, as Faust itself does for its "-1: nothing
read yet" offset. Reading a changelog from its start is always correct (it is compacted; the table keeps the last
value per key), and the restarted recovery reads the partition's real start offset anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from faust.tables import TableManager
from faust.tables.recovery import Recovery
from faust.types import TP

__all__ = ["Tables", "seek_targets"]


def seek_targets(partitions: Set[TP], offsets: Mapping[TP, int | None]) -> dict[TP, int]:
    """Where recovery seeks each changelog partition: its recorded offset, or the changelog's start (0) when it
    has none yet (``None``, a partition assigned after the offsets were read) or Faust's "nothing read" (-1)."""
    targets: dict[TP, int] = {}
    for tp in partitions:
        offset = offsets.get(tp)
        targets[tp] = offset if offset is not None and offset >= 0 else 0
    return targets


class _Recovery(Recovery):
    async def _seek_offsets(self, consumer: Any, tps: Set[TP], offsets: Any, title: str) -> None:
        await consumer.seek_wait(seek_targets(tps, offsets))


class Tables(TableManager):
    """Faust's table manager, recovering with :class:`_Recovery`."""

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = _Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
