"""The worker's local copy of the state table (RocksDB on its volume, one folder per partition) and how old it may
be before it is wiped, so that a restart never brings back a record that was erased meanwhile.

Faust recovers a partition's local copy by reading the changelog from the offset the copy had reached. A tombstone
the copy has not read is removed from the changelog by the log cleaner ``delete.retention.ms`` after the cleaning
that first saw it (KIP-534); a copy that stopped following the changelog longer ago than that may never see the
tombstone of a record erased meanwhile, and keeps the record (KIP-1259's "zombie" keys). A partition's copy is
therefore wiped, and recovered from the changelog in full, when it has not been in step with the changelog for
longer than the tombstone window (``OM_LIFECYCLE_TOMBSTONE_RETENTION_S``) less :data:`CLOCK_MARGIN_S`.

"In step" is measured by a marker file per partition (``<table>-<partition>.db.in-step`` beside the partition's
folder) whose modification time the worker sets for the partitions it holds, active or standby, as soon as its table
is recovered (``handover.TakeOver``), every :data:`MARK_INTERVAL_S` after that, and at a graceful stop. Not the
database's own files: RocksDB rewrites them in the background (compactions) whether or not the copy follows the
changelog, and a copy the worker no longer holds keeps them. A copy without a marker (an older version's, or one
never held after a recovery) counts as stale.

It is checked before the app starts (nothing is open yet), and then at every marking for the partitions the worker
does not hold: Faust closes a revoked partition's database, and would open the stale copy again if the partition
came back, which a worker running for weeks would otherwise allow.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLOCK_MARGIN_S", "MARK_INTERVAL_S", "LocalTableState", "Wiped"]

log = logging.getLogger(__name__)
MARK_INTERVAL_S = 60.0
# the marker is the worker's clock, the tombstones' removal the brokers': a pod that moves to a node whose clock
# differs, or a clock stepped by NTP, must not turn a stale copy into a fresh one
CLOCK_MARGIN_S = 3600.0
_MARKER = ".in-step"


@dataclass(frozen=True)
class Wiped:
    """A partition's local copy removed: ``age_s`` since it was last in step (None: it never was, by its marker)."""

    partition: int
    age_s: float | None


class LocalTableState:
    """The local copies of table ``table`` in ``tabledir`` (Faust's ``<table>-<partition>.db`` folders)."""

    def __init__(self, tabledir: Path, table: str, *, tombstone_retention_s: float,
                 margin_s: float = CLOCK_MARGIN_S, clock: Callable[[], float] = time.time) -> None:
        self.tabledir = tabledir
        self.table = table
        self.tombstone_retention_s = tombstone_retention_s
        self.margin_s = margin_s
        self.max_age_s = tombstone_retention_s - margin_s
        self._clock = clock
        self._folder = re.compile(rf"^{re.escape(table)}-(\d+)\.db$")

    def copies(self) -> dict[int, Path]:
        """Partition -> the folder of its local copy, for every copy on disk."""
        if not self.tabledir.is_dir():
            return {}
        found = {}
        for path in self.tabledir.iterdir():
            match = self._folder.match(path.name)
            if match and path.is_dir():
                found[int(match.group(1))] = path
        return found

    def marker(self, partition: int) -> Path:
        return self.tabledir / f"{self.table}-{partition}.db{_MARKER}"

    def mark_in_step(self, partitions: Iterable[int]) -> None:
        """The copies of ``partitions`` follow the changelog now (the table is recovered and they are held)."""
        now = self._clock()
        for partition in partitions:
            if (self.tabledir / f"{self.table}-{partition}.db").is_dir():
                marker = self.marker(partition)
                marker.touch()
                os.utime(marker, (now, now))

    def age_s(self, partition: int) -> float | None:
        """Seconds since the copy of ``partition`` was last in step (None: no marker)."""
        try:
            return self._clock() - self.marker(partition).stat().st_mtime
        except FileNotFoundError:
            return None

    def wipe_stale(self, *, held: Collection[int] = ()) -> list[Wiped]:
        """Remove the copies not in ``held`` that were last in step longer ago than the tombstone window allows
        (or never, by their marker); each one is logged."""
        wiped = []
        for partition, folder in sorted(self.copies().items()):
            if partition in held:
                continue
            age = self.age_s(partition)
            if age is not None and age <= self.max_age_s:
                continue
            shutil.rmtree(folder)
            self.marker(partition).unlink(missing_ok=True)
            wiped.append(Wiped(partition, age))
            log.warning("local state of table %s partition %d wiped (%s): a copy out of step for longer than the "
                        "tombstone window (%.0fs, less %.0fs for clocks) may have missed the tombstone of an erased "
                        "record; the partition is recovered from its changelog", self.table, partition,
                        "never marked in step" if age is None else f"last in step {age:.0f}s ago",
                        self.tombstone_retention_s, self.margin_s)
        return wiped
