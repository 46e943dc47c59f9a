"""An export once the retention window has passed, before any purge: ``Memory.export_resource`` on a SQLite file
with a Qdrant index in a local folder, the offline Observer and Reflector, on a manual clock.

The clock is moved directly until messages the store holds have passed the window (no timer fires: the stores
still hold what expired), then the resource is exported. Over many seeds, with the deployment's window and
sometimes a thread's shorter one:

* no marker of a message older than its thread's window is anywhere in the file (messages, observation and
  reflection texts, thread metadata, the states, the recall index's payloads);
* every younger marker is still in it, in its message line;
* the file imported into a fresh memory gives every thread the context the original gives once its purge has run.
"""

from __future__ import annotations

import json
import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from om_stream import Memory
from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.retention import DAY_MS
from om_stream.core.step import EngineLimits
from om_stream.runtime.clock import ManualClock
from om_stream.wire.context import ContextRecord
from tests.support.leak_property import HashEmbedder
from tests.support.retention_world import (
    GAP,
    MINUTE,
    OPTIONS,
    SEEDS,
    T0,
    markers_in,
    message,
    sqlite_bytes,
)


def memory(folder: Path, now: int, days: int, embedder: HashEmbedder) -> Memory:
    folder.mkdir(parents=True, exist_ok=True)
    index = QdrantRecallIndex(embedder.model_id, embedder.dimension, path=str(folder / "qdrant"))
    return Memory(OPTIONS, store=SqliteContentStore(folder / "om.db"), embedder=embedder, index=index,
                  clock=ManualClock(now), retention_days=days, limits=EngineLimits(purge_gap_ms=GAP))


def same_context(context: ContextRecord | None) -> Any:
    """A context as an agent reads it: its version counts the record's publications, which a purge adds to."""
    return None if context is None else context.model_dump(mode="json", exclude={"version"})


@pytest.mark.parametrize("seed", SEEDS)
async def test_an_export_past_the_window_holds_nothing_older_and_imports_as_the_purged_memory(
        tmp_path: Path, seed: int) -> None:
    rng = random.Random(1000 + seed)
    days = rng.choice([1, 2])
    threads = [f"t{k}" for k in range(rng.randint(1, 3))]
    windows = dict.fromkeys(threads, days * DAY_MS)
    embedder = HashEmbedder()
    created: dict[str, tuple[str, int]] = {}
    source = memory(tmp_path / "source", T0, days, embedder)
    async with source:
        clock = source.clock
        assert isinstance(clock, ManualClock)
        if days == 2 and rng.random() < 0.5:  # a thread whose own window is shorter
            await source.add_message(message(f"MK{seed}x0Q", 0, threads[0], clock.now, rng))
            created[f"MK{seed}x0Q"] = (threads[0], clock.now)
            await source.override(threads[0], retention_days=1, resource_id="r1")
            windows[threads[0]] = DAY_MS
        for n in range(1, rng.randint(40, 80)):
            mark, thread = f"MK{seed}x{n}Q", rng.choice(threads)
            created[mark] = (thread, clock.now)
            await source.add_message(message(mark, n, thread, clock.now, rng), wait=False)
            await source.settle()
            await source.advance_to(clock.now + rng.choice([1, 5, 20, 60, 60, 240]) * MINUTE)
            await source.settle()
        # the clock moves on (no timer fires: nothing is purged yet) until a message the store holds has passed
        # the window, and maybe more of them
        with closing(sqlite3.connect(tmp_path / "source" / "om.db")) as db:
            held = sorted(int(at) for (at,) in db.execute("SELECT created_at FROM messages"))
        clock.now = now = max(clock.now, rng.choice(held[:max(1, len(held) * 3 // 4)]) + 1 + days * DAY_MS)
        expired = {m for m, (thread, at) in created.items() if at < now - windows[thread]}
        young = set(created) - expired
        assert expired & markers_in(sqlite_bytes(tmp_path / "source").decode("utf-8", "replace")), seed
        lines = [line async for line in source.export_resource("r1")]
        exported = b"".join(lines).decode()
        assert not expired & markers_in(exported), (seed, sorted(expired & markers_in(exported))[:5])
        in_messages = {m for line in lines if b'"type":"message"' in line for m in markers_in(line.decode())}
        assert young <= in_messages, (seed, "younger messages left out", sorted(young - in_messages)[:5])
        end = json.loads(lines[-1])
        assert end["type"] == "end" and end["counts"]["messages"] == len(young), seed

        target = memory(tmp_path / "target", now, days, embedder)
        async with target:
            report = await target.import_resource(lines)
            assert report.messages == len(young), seed
            await source.advance_to(now)  # the source's purges run now, at the same cutoffs
            await source.settle()
            await target.advance_to(now)
            await target.settle()
            for thread in threads:
                mine, theirs = await source.context(thread), await target.context(thread)
                assert same_context(theirs) == same_context(mine), (seed, thread)
