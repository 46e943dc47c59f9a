"""A reflection's pointers stay as short as the gaps they show, however long the conversation: after many
reflections of reflections on SQLite, every group points at its messages with one range per run (one in thread
scope, where every message is observed in order), and the messages those ranges name are exactly the messages the
log has observed. Before the runs were joined, the newest reflection of a 2,000-turn conversation listed 1,301
ranges, and every generation commit read and wrote them all again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.config import OMConfig
from om_stream.replay.runner import replay
from om_stream.replay.shapes import generate

OPTIONS: dict[str, Any] = {
    "observation": {"messageTokens": 400, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.2},
    "reflection": {"observationTokens": 800, "bufferActivation": 0.5, "blockAfter": 1.2}}


async def _groups_after(shape: str, seed: int, turns: int) -> tuple[list[Any], list[str]]:
    conversation = generate(shape, turns, seed=seed, scale=0.2)
    store = SqliteContentStore(":memory:")
    lines = conversation.turns()
    await replay(lines, OMConfig.parse(OPTIONS), store=store)
    first = lines[0].messages[0]
    groups = await store.list_groups(first.thread_id)
    stored = await store.get_record_messages(first.thread_id, resource_id=first.resource_id,
                                             thread_ids=(first.thread_id,), through_seq=10**9)
    await store.close()
    return groups, [m.message.message_id for m in stored]  # in sequence order


@pytest.mark.parametrize("shape", ["chatty", "tool-heavy", "multi-day"])
@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_reflections_of_reflections_keep_one_range_per_run(shape: str, seed: int) -> None:
    groups, stored = asyncio.run(_groups_after(shape, seed, 220))
    reflections = [g for g in groups if g.kind == "reflection" and g.ranges]
    assert len(reflections) >= 3, f"too few reflections to test ({len(reflections)}): replay {shape!r} {seed}"
    position = {message_id: i for i, message_id in enumerate(stored)}
    for group in groups:
        assert len(group.ranges) <= 1, (group.kind, group.range_text)
    newest = reflections[-1]
    (run,) = newest.ranges
    # the newest reflection names exactly the messages of the groups it replaced, first to last, with no gap
    replaced = [g for g in groups if g.group_id in newest.replaced_group_ids]
    covered = {i for g in replaced for r in g.ranges
               for i in range(position[r.first_message_id], position[r.last_message_id] + 1)}
    assert covered == set(range(position[run.first_message_id], position[run.last_message_id] + 1))
