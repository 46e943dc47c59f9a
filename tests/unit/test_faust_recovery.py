"""A changelog partition assigned while Faust's table recovery runs must not crash the worker
(``runtime/worker/faust_internals.py``'s ``Tables``; the crash was seen in the hour-long soak)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import faust
import pytest
from faust.tables.recovery import Recovery
from faust.types import TP
from hypothesis import given
from hypothesis import strategies as st

from om_stream.runtime.worker.faust_internals import Tables, recovery_remaining, seek_targets


class SeekingConsumer:
    """Takes the seeks recovery asks for, by aiokafka's rule for ``seek`` (an int, not negative)."""

    def __init__(self) -> None:
        self.seeks: dict[TP, int] = {}

    async def seek_wait(self, offsets: dict[TP, Any]) -> None:
        for tp, offset in offsets.items():
            if not isinstance(offset, int) or offset < 0:
                raise ValueError("Offset must be a positive integer")  # aiokafka's AIOKafkaConsumer.seek
            self.seeks[tp] = offset


def recovery_of(app: faust.App) -> Recovery:
    return app.tables.recovery  # type: ignore[attr-defined,no-any-return]


# a standby partition assigned after the offsets were read: Faust's _add() gave it None
LATE = TP("app-om_records-changelog", 7)
READ = TP("app-om_records-changelog", 3)
NOTHING_READ = TP("app-om_records-changelog", 5)


def offsets_mid_recovery() -> Counter[TP]:
    offsets: Counter[TP] = Counter()
    offsets[READ] = 41
    offsets[NOTHING_READ] = -1
    offsets[LATE] = None  # type: ignore[assignment]
    return offsets


def test_fausts_own_recovery_crashes_on_a_partition_assigned_mid_recovery() -> None:
    """The defect the worker's table manager corrects, shown on Faust's own recovery (if a Faust release fixes it,
    this fails and the correction can go)."""
    app = faust.App("recovery-defect", broker="kafka://127.0.0.1:9", store="memory://")
    consumer = SeekingConsumer()
    with pytest.raises(ValueError, match="positive integer"):
        asyncio.run(recovery_of(app)._seek_offsets(consumer, {READ, NOTHING_READ, LATE},  # type: ignore[arg-type]
                                                   offsets_mid_recovery(), "standby"))


def test_the_workers_recovery_seeks_a_late_partition_to_its_start() -> None:
    app = faust.App("recovery-fixed", broker="kafka://127.0.0.1:9", store="memory://", TableManager=Tables)
    consumer = SeekingConsumer()
    recovery = recovery_of(app)
    assert recovery is recovery_of(app)  # one recovery service per app, as Faust's
    asyncio.run(recovery._seek_offsets(consumer, {READ, NOTHING_READ, LATE},  # type: ignore[arg-type]
                                       offsets_mid_recovery(), "standby"))
    assert consumer.seeks == {READ: 41, NOTHING_READ: 0, LATE: 0}


@given(st.dictionaries(st.integers(0, 63), st.one_of(st.none(), st.integers(-5, 10**12)), max_size=40))
def test_seek_targets_keep_every_readable_offset_and_start_the_others(recorded: dict[int, int | None]) -> None:
    partitions = {TP("changelog", p) for p in recorded} | {TP("changelog", 99)}  # 99: not even in the mapping
    offsets = {TP("changelog", p): o for p, o in recorded.items()}
    targets = seek_targets(partitions, offsets)
    assert set(targets) == partitions
    for tp, target in targets.items():
        offset = offsets.get(tp)
        assert target == (offset if offset is not None and offset >= 0 else 0)


def test_recovery_remaining_is_what_the_active_partitions_still_have_to_read() -> None:
    """The liveness watch reads the recovery's remainder through ``recovery_remaining``: the records between each
    active changelog partition's offset and its highwater."""
    app = faust.App("recovery-remaining", broker="kafka://127.0.0.1:9", store="memory://", TableManager=Tables)
    recovery = recovery_of(app)
    assert recovery_remaining(app) == 0, "no recovery under way"
    recovery.active_highwaters.update({READ: 50, NOTHING_READ: 11})
    recovery.active_offsets.update({READ: 41, NOTHING_READ: -1})
    assert recovery_remaining(app) == 9 + 12
    recovery.active_offsets[READ] = 50
    assert recovery_remaining(app) == 12
