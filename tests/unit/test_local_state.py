"""The state table's local copies and their age (``local_state``): a copy out of step with the changelog for longer
than the tombstone window is wiped, one in step or held now is kept. On real folders; the clock is an argument."""

from __future__ import annotations

from pathlib import Path

import pytest

from om_stream.runtime.worker.local_state import LocalTableState

DAY_S = 86_400.0


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _copies(tabledir: Path, *partitions: int) -> None:
    for partition in partitions:
        folder = tabledir / f"om_records-{partition}.db"
        folder.mkdir(parents=True)
        (folder / "000001.sst").write_bytes(b"rocks")


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


def _state(tabledir: Path, clock: _Clock) -> LocalTableState:
    return LocalTableState(tabledir, "om_records", tombstone_retention_s=7 * DAY_S, margin_s=3600, clock=clock)


def test_only_the_tables_partition_folders_are_copies(tmp_path: Path, clock: _Clock) -> None:
    _copies(tmp_path, 0, 3, 11)
    (tmp_path / "om_records-x.db").mkdir()
    (tmp_path / "other_table-1.db").mkdir()
    (tmp_path / "om_records-2.db").write_text("a file, not a database")
    assert sorted(_state(tmp_path, clock).copies()) == [0, 3, 11]
    assert _state(tmp_path / "missing", clock).copies() == {}


def test_a_copy_never_marked_in_step_is_wiped(tmp_path: Path, clock: _Clock) -> None:
    _copies(tmp_path, 0, 1)
    wiped = _state(tmp_path, clock).wipe_stale()
    assert [(w.partition, w.age_s) for w in wiped] == [(0, None), (1, None)]
    assert list(tmp_path.iterdir()) == []


def test_a_copy_is_kept_within_the_tombstone_window_and_wiped_past_it(tmp_path: Path, clock: _Clock) -> None:
    state = _state(tmp_path, clock)
    _copies(tmp_path, 0, 1, 2)
    state.mark_in_step([0, 1, 2])
    clock.now += 7 * DAY_S - 3600  # the window less the clocks' margin: still safe
    state.mark_in_step([2])
    assert state.wipe_stale() == []
    clock.now += 1
    assert [w.partition for w in state.wipe_stale()] == [0, 1]
    assert sorted(state.copies()) == [2] and not state.marker(0).exists()
    assert state.age_s(2) == pytest.approx(1.0)


def test_a_held_copy_is_never_wiped_and_marking_needs_a_copy(tmp_path: Path, clock: _Clock) -> None:
    state = _state(tmp_path, clock)
    _copies(tmp_path, 4)
    state.mark_in_step([4, 5])  # 5 has no copy here: nothing to mark
    assert not state.marker(5).exists()
    clock.now += 30 * DAY_S
    assert state.wipe_stale(held={4}) == []  # Faust has it open, and follows the changelog again
    assert [w.partition for w in state.wipe_stale()] == [4]
