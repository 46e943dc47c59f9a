"""The worker killed with SIGKILL mid-stream and restarted: every message observed exactly once, no duplicate
observation chunk, and final contexts equal to those of an uninterrupted run (SQLite content store on disk)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support.worker import Agent, WorkerProcess, agent_for, message_record, worker_process

# synchronous observation: the order of inputs is fixed by the agent waiting for each context, so two runs
# of the same conversation must end in exactly the same place
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 160, "bufferTokens": False},
                           "reflection": {"observationTokens": 500}}
THREADS = ("north", "south", "east")
TURNS = 14


def conversation() -> list[dict[str, Any]]:
    records = []
    for index in range(TURNS * 2):
        for thread in THREADS:
            role = "user" if index % 2 == 0 else "assistant"
            text = (f"{thread} {index}: my budget for the {thread} office is {1000 + index} euros and the review "
                    f"is due on 2026-04-{1 + index % 28:02d}" if role == "user" else
                    f"{thread} {index}: noted, I will track the {thread} budget and the review date for you")
            records.append(message_record(thread, index, role, text))
    return records


async def play(agent: Agent, records: list[dict[str, Any]]) -> None:
    for record in records:
        await agent.send(record, key=record["thread_id"].encode())
        await agent.context_through(record["thread_id"], record["message_id"])


def final_contexts(agent: Agent) -> dict[str, dict[str, Any]]:
    out = {}
    for thread in THREADS:
        context = agent.contexts[thread][-1]
        out[thread] = {"observations": context["observations"], "generation": context["generation"],
                       "messages": [m["message_id"] for m in context["messages"]],
                       "tokens": context["tokens"], "hints": context["hints"]}
    return out


def observed_counts(database: Path) -> Counter[str]:
    with sqlite3.connect(database) as conn:
        rows = conn.execute("SELECT message_ids FROM segments WHERE kind = 'observation'").fetchall()
    return Counter(message_id for (ids,) in rows for message_id in json.loads(ids))


async def run(worker: WorkerProcess, records: list[dict[str, Any]], *, crash_after: int | None) -> dict[str, Any]:
    worker.start()
    await worker.wait_ready()
    try:
        async with agent_for(worker) as agent:
            if crash_after is None:
                await play(agent, records)
            else:
                await play(agent, records[:crash_after])
                # a few more published without waiting, then the worker dies in the middle of them
                for record in records[crash_after:crash_after + 4]:
                    await agent.send(record, key=record["thread_id"].encode())
                worker.kill()
                worker.start()
                await worker.wait_ready()
                await play(agent, records[crash_after:])
            await agent.pump(1000)
            return final_contexts(agent)
    finally:
        worker.stop()


async def test_sigkill_mid_stream_loses_nothing_and_ends_like_an_uninterrupted_run(kafka_bootstrap: str,
                                                                                     tmp_path: Path) -> None:
    records = conversation()
    clean_dir, crash_dir = tmp_path / "clean", tmp_path / "crash"
    clean_dir.mkdir()
    crash_dir.mkdir()
    clean = worker_process(kafka_bootstrap, clean_dir, options=OPTIONS, store="sqlite")
    crashed = worker_process(kafka_bootstrap, crash_dir, options=OPTIONS, store="sqlite")

    expected = await run(clean, records, crash_after=None)
    actual = await run(crashed, records, crash_after=len(records) // 2)

    assert actual == expected, crashed.tail()
    assert any(ctx["generation"] >= 1 for ctx in expected.values()), "the run should reach a reflection"
    for database in (clean_dir / "content.db", crash_dir / "content.db"):
        counts = observed_counts(database)
        assert counts, "observations were written"
        assert max(counts.values()) == 1, f"a message was observed twice: {counts.most_common(3)}"
    # every message is either observed or still in its thread's context
    in_context = {m for ctx in actual.values() for m in ctx["messages"]}
    observed = set(observed_counts(crash_dir / "content.db"))
    assert {r["message_id"] for r in records} <= observed | in_context
