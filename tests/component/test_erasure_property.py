"""Erasure as a property of the embedded runner, over many seeds: random conversations of several tenants and
threads, Observer and Reflector calls in flight (slow, failing), recall indexing, and erases of threads and
resources at random moments. Afterwards, no place holds a marker of an erased message, and every place that
should holds each of the others:

* the SQLite file and its WAL (bytes, not queries), and the Qdrant index's local file;
* every context, every recall search, every export, every record state;
* each message published after an erase of its subject is kept (a fresh memory).

Every message carries a marker (``MK<seed>x<n>Q``); the model copies the markers it reads into what it writes, so
observations and reflections carry them too (derived data must go with the messages).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from om_stream import Memory
from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest
from om_stream.testing.function_model import FunctionModel
from tests.support.leak_property import HashEmbedder
from tests.support.store_scans import files_bytes

SEEDS = range(int(os.environ.get("OM_ERASURE_SEEDS", "24")))
OPTIONS = {"observation": {"messageTokens": 160, "bufferTokens": 0.25, "bufferActivation": 0.8},
           "reflection": {"observationTokens": 260}, "retrieval": {"vector": True}}
T0 = datetime(2026, 4, 1, 8, 0, tzinfo=UTC)
WORDS = ("ferry", "invoice", "tide", "lighthouse", "budget", "hotel", "kafka", "pastry", "island", "report")


def markers_in(text: str) -> list[str]:
    return sorted(set(re.findall(r"MK\d+x\d+Q", text)))


@dataclass
class World:
    seed: int
    rng: random.Random  # the script's choices
    model_rng: random.Random  # the model's delays and failures (apart: answers land in an order the script's
    # choices must not depend on)
    resources: dict[str, list[str]] = field(default_factory=dict)  # resource -> its threads
    live: dict[str, tuple[str, str]] = field(default_factory=dict)  # marker -> (thread, resource): kept
    erased: set[str] = field(default_factory=set)
    count: int = 0

    def thread_of(self) -> tuple[str, str]:
        resource = self.rng.choice(sorted(self.resources))
        return self.rng.choice(self.resources[resource]), resource


def model_for(world: World) -> FunctionModel:
    """Copies every marker it reads into its answer; slow now and then, failing now and then."""

    async def answer(request: ChatRequest) -> str:
        await asyncio.sleep(world.model_rng.choice((0, 0, 0.001, 0.01, 0.03)))
        if world.model_rng.random() < 0.1:
            raise ModelError("the provider is overloaded", kind="server_error", status_code=503)
        found = markers_in("\n".join(m.content for m in request.messages))
        if request.role == "reflector":
            return "<observations>\n* 🔴 Condensed: " + " ".join(found) + "\n</observations>"
        return ("<observations>\nDate: Apr 1, 2026\n* 🔴 (08:00) The user noted " + " ".join(found)
                + "\n</observations>")

    return FunctionModel(answer)


async def run(world: World, om: Memory, steps: int) -> None:
    for _ in range(steps):
        roll = world.rng.random()
        if roll < 0.72:
            thread, resource = world.thread_of()
            world.count += 1
            mark = f"MK{world.seed}x{world.count}Q"
            words = " ".join(world.rng.choice(WORDS) for _ in range(world.rng.randint(8, 30)))
            await om.add_message({
                "message_id": f"m{world.count}", "thread_id": thread, "resource_id": resource,
                "role": "user" if world.count % 2 else "assistant",
                "created_at": (T0 + timedelta(minutes=world.count)).isoformat(),
                "parts": [{"type": "text", "text": f"{mark} {words}"}]}, wait=False)
            world.live[mark] = (thread, resource)
            continue
        if roll < 0.80:
            thread, resource = world.thread_of()
            await om.erase(thread_id=thread, resource_id=resource)
            erase = {m for m, (t, _) in world.live.items() if t == thread}
        elif roll < 0.84:
            resource = world.rng.choice(sorted(world.resources))
            await om.erase(resource_id=resource)
            erase = {m for m, (_, r) in world.live.items() if r == resource}
        elif roll < 0.90:
            thread, resource = world.thread_of()
            await om.observe(thread, resource, force=True)
            continue
        else:
            await asyncio.sleep(world.rng.choice((0, 0.005, 0.02)))  # let calls in flight land (or not)
            continue
        world.erased |= erase
        for mark in erase:
            del world.live[mark]


@pytest.mark.parametrize("seed", SEEDS)
async def test_nothing_of_an_erased_subject_survives_anywhere_and_nothing_else_is_lost(tmp_path: Path,
                                                                                       seed: int) -> None:
    rng = random.Random(seed)
    world = World(seed, rng, random.Random(-seed - 1),
                  {f"r{n}": [f"t{n}{k}" for k in range(rng.randint(1, 3))] for n in range(3)})
    store = SqliteContentStore(tmp_path / "om.db")
    embedder = HashEmbedder()
    index = QdrantRecallIndex(embedder.model_id, embedder.dimension, path=str(tmp_path / "qdrant"))
    async with Memory(OPTIONS, store=store, model=model_for(world), embedder=embedder, index=index) as om:
        await run(world, om, rng.randint(40, 90))
        await om.settle()
        # one last erase when the run made none: every seed checks both outcomes
        if not world.erased:
            thread, resource = world.thread_of()
            await om.erase(thread_id=thread, resource_id=resource)
            gone = {m for m, (t, _) in world.live.items() if t == thread}
            world.erased |= gone
            for mark in gone:
                del world.live[mark]
        await om.settle()

        # what the API shows: contexts, recall, record states
        for resource, threads in world.resources.items():
            for thread in threads:
                context = await om.context(thread)
                shown = markers_in(json.dumps(context.model_dump(mode="json"))) if context is not None else []
                assert not set(shown) & world.erased, (seed, thread, set(shown) & world.erased)
                state = om.state(thread, resource)
                if state is None:
                    assert not any(t == thread for t, _ in world.live.values()), (seed, thread, "live lost")
            found = await om.recall(resource, {"mode": "search", "query": " ".join(WORDS)})
            assert not set(markers_in(json.dumps(found.model_dump(mode="json")))) & world.erased, seed
            exported = b"".join([line async for line in om.export_resource(resource)]).decode()
            assert not set(markers_in(exported)) & world.erased, (seed, "in the export")
            kept = {m for m, (_, r) in world.live.items() if r == resource}
            assert kept <= set(markers_in(exported)), (seed, "the export lost kept messages")
        stored = files_bytes(tmp_path / "qdrant")
        assert not [m for m in world.erased if m.encode() in stored], (seed, "in the recall index's file")
    await store.close()
    everything = files_bytes(tmp_path)
    left = sorted(m for m in world.erased if m.encode() in everything)
    assert not left, (seed, f"{len(left)} erased markers are still in the files", left[:5])
    lost = sorted(m for m in world.live if m.encode() not in everything)
    assert not lost, (seed, f"{len(lost)} kept messages are missing", lost[:5])
