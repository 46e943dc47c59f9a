"""Retention in the embedded runner on a controllable clock: ``Memory(clock=ManualClock(...), retention_days=...)``
on a SQLite file with a Qdrant index in a local folder, the offline Observer and Reflector (they date what they
write as a real model is asked to), the clock moved with ``advance_to`` (timers fire on the way) or set directly
(nothing fires: what a read does before any purge).

Every message carries a marker (``MK<seed>x<n>Q``) whose creation time the test knows. Over many seeds:

* a context, a recall result (messages, threads, search) never shows a marker of a message older than the window,
  purged or not;
* the markers of the younger messages are all still in the SQLite file: nothing else went;
* after the purges, the SQLite file (bytes: rows, free pages, WAL) and the index's file hold no marker of a message
  that expired a purge gap ago, and each purge left a ``data-om-expired`` receipt.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from om_stream import Memory
from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.events import ExpiredEvent, OMEvent
from om_stream.core.retention import DAY_MS
from om_stream.core.step import EngineLimits
from om_stream.errors import InputRejected
from om_stream.runtime.clock import ManualClock
from tests.support.leak_property import HashEmbedder
from tests.support.retention_world import (
    GAP,
    MINUTE,
    OPTIONS,
    SEEDS,
    T0,
    WORDS,
    markers_in,
    message,
    sqlite_bytes,
)
from tests.support.store_scans import files_bytes


async def shown(om: Memory, threads: list[str]) -> set[str]:
    """Every marker a context or a recall call shows (the recall calls an agent's model would make)."""
    seen: set[str] = set()
    for thread in threads:
        context = await om.context(thread)
        if context is not None:
            seen |= markers_in(json.dumps(context.model_dump(mode="json"), ensure_ascii=False))
        for arguments in ({"mode": "messages", "threadId": thread, "limit": 50},
                          {"mode": "messages", "threadId": thread, "limit": 50, "anchor": "start"},
                          {"mode": "search", "query": " ".join(WORDS), "limit": 20}):
            result = await om.recall("r1", arguments, thread_id=thread)
            seen |= markers_in(json.dumps(result.model_dump(mode="json"), ensure_ascii=False))
    return seen


@pytest.mark.parametrize("seed", SEEDS)
async def test_nothing_past_the_window_is_read_and_nothing_is_left_in_the_files(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    days = rng.choice([1, 2])
    window = days * DAY_MS
    clock = ManualClock(T0)
    store = SqliteContentStore(tmp_path / "om.db")
    embedder = HashEmbedder()
    index = QdrantRecallIndex(embedder.model_id, embedder.dimension, path=str(tmp_path / "qdrant"))
    receipts: list[ExpiredEvent] = []

    def listen(event: OMEvent, _id: str) -> None:
        if isinstance(event, ExpiredEvent):
            receipts.append(event)

    threads = [f"t{k}" for k in range(rng.randint(1, 3))]
    created: dict[str, int] = {}
    async with Memory(OPTIONS, store=store, embedder=embedder, index=index, clock=clock, retention_days=days,
                      limits=EngineLimits(purge_gap_ms=GAP), on_event=listen) as om:
        for n in range(1, rng.randint(40, 80)):
            mark = f"MK{seed}x{n}Q"
            created[mark] = clock.now
            await om.add_message(message(mark, n, rng.choice(threads), clock.now, rng), wait=False)
            await om.settle()
            step = rng.choice([1, 5, 20, 60, 60, 240, 720]) * MINUTE
            if rng.random() < 0.25:  # a read between purges: the clock moved, no timer fired yet
                clock.now += step
                before = clock.now - window
                late = {m for m in await shown(om, threads) if created[m] < before}
                assert not late, (seed, "shown before any purge", sorted(late))
            else:
                await om.advance_to(clock.now + step)
                await om.settle()
        await om.advance_to(clock.now + rng.choice([0, window // 2, window + 2 * GAP]))
        await om.settle()
        before = clock.now - window
        visible = await shown(om, threads)
        assert not {m for m in visible if created[m] < before}, seed
        young = {m for m, at in created.items() if at >= before}
        for thread in threads:  # what is left of each thread reads back in full through recall
            pages = await om.recall("r1", {"mode": "messages", "threadId": thread, "limit": 100}, thread_id=thread)
            assert markers_in(json.dumps(pages.model_dump(mode="json"))) <= young
        gone = {m for m, at in created.items() if at < before - GAP}
        if gone:
            assert receipts and sum(r.removed.messages for r in receipts) >= len(gone), seed
        indexed = files_bytes(tmp_path / "qdrant")
        assert not [m for m in gone if m.encode() in indexed], (seed, "in the recall index's file")
    await store.close()
    everything = files_bytes(tmp_path)
    left = sorted(m for m in gone if m.encode() in everything)
    assert not left, (seed, f"{len(left)} expired markers are still in the files", left[:5])
    lost = sorted(m for m in young if m.encode() not in sqlite_bytes(tmp_path))  # the message rows
    assert not lost, (seed, "younger messages went too", lost[:5])


async def test_a_message_past_the_window_is_refused_to_the_caller_and_never_stored(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = SqliteContentStore(tmp_path / "om.db")
    async with Memory(OPTIONS, store=store, clock=clock, retention_days=3) as om:
        old = message("MKoldQ", 1, "t1", T0 - 3 * DAY_MS - 1, random.Random(0))
        with pytest.raises(InputRejected) as refused:
            await om.add_message(old)
        assert refused.value.reason == "expired" and "MKoldQ" not in str(refused.value)
        assert om.state("t1") is None
        await om.add_message(message("MKnewQ", 2, "t1", T0, random.Random(0)))
    await store.close()
    assert b"MKoldQ" not in files_bytes(tmp_path) and b"MKnewQ" in files_bytes(tmp_path)


async def test_a_thread_override_shortens_the_window_for_recall_too_before_any_purge(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    store = SqliteContentStore(tmp_path / "om.db")
    async with Memory(OPTIONS, store=store, clock=clock, retention_days=10) as om:
        rng = random.Random(1)
        for thread in ("short", "long"):
            await om.add_message(message(f"MK{thread}Q", 1, thread, T0, rng))
        await om.override("short", retention_days=1)
        with pytest.raises(InputRejected) as refused:
            await om.override("long", retention_days=11)
        assert refused.value.reason == "invalid_override" and "at most 10 days" in str(refused.value)
        clock.now = T0 + DAY_MS + 1  # past the short window; no timer fired: nothing was purged yet
        assert b"MKshortQ" in sqlite_bytes(tmp_path)
        assert "MKshortQ" not in await shown(om, ["short"])
        assert "MKlongQ" in await shown(om, ["long"])
        threads = await om.recall("r1", {"mode": "threads"})
        assert "long" in threads.threads and "short" not in threads.threads
        await om.advance_to(clock.now)  # the purge runs
        await om.settle()
    await store.close()
    assert b"MKshortQ" not in files_bytes(tmp_path) and b"MKlongQ" in files_bytes(tmp_path)
