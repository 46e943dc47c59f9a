"""The engine's CPU time per turn, its profile, and a digest of everything it published (issue 29, item 6).

Replays ``--turns`` turns of a conversation (the project's, as ``bench/engine.py``'s reference comparison, or one
of ``om_stream.replay.shapes``) through the embedded runner, the offline model and the in-memory content store, and
prints CPU milliseconds per turn (``time.process_time``: on a machine loaded by other work, wall time measures the
machine, CPU time the work) for the whole replay, without the offline model's own work (as ``bench/engine.py``
leaves out the model's time), with it, and for ``decide()`` alone. The harness's work is included, alike before and
after a change; loading the tokenizer (once per process) is not.

``--profile N`` prints the top N functions by cumulative and by own time under cProfile (a separate run: the
profiler inflates small calls). ``--digest`` prints a SHA-256 over every decision (the commands, the state after)
and every context the agent read, in order: two checkouts that print the same digest for the same conversation
published the same things, byte for byte.

    PYTHONPATH=$PWD nice -n 19 .venv/bin/python bench/engine_cpu.py --turns 1000 --runs 3
    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/engine_cpu.py ...   # that checkout's engine
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import hashlib
import pstats
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.adapters.offline import encoding
from om_stream.adapters.offline_model import OfflineModel
from om_stream.core.config import OMConfig
from om_stream.replay.conversation import Turn, load_turns
from om_stream.replay.runner import replay
from om_stream.replay.shapes import SHAPES, generate
from om_stream.replay.synthetic import write_jsonl
from om_stream.runtime import host
from om_stream.runtime.embedded import Memory
from om_stream.runtime.host_ports import Decided
from om_stream.wire.context import ContextRecord

OPTIONS: dict[str, Any] = {  # bench/engine.py's
    "observation": {"messageTokens": 2000, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.2},
    "reflection": {"observationTokens": 4000, "bufferActivation": 0.5, "blockAfter": 1.2},
}


def conversation(shape: str, turns: int, seed: int) -> list[Turn]:
    if shape == "project":
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "conversation.jsonl"
            write_jsonl(path, turns, seed=seed)
            return load_turns(path)
    return generate(shape, turns, seed=seed).turns()


class DecideCPU:
    """CPU time of every ``decide()`` the host makes."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self._decide = host.decide

    def __enter__(self) -> DecideCPU:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            try:
                return self._decide(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - began
                self.calls += 1

        host.decide = timed  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        host.decide = self._decide  # type: ignore[assignment]


class ModelCPU:
    """CPU time inside the offline model's ``complete()`` (it never suspends): the model's work, which
    ``bench/engine.py`` leaves out of the engine's overhead."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._complete = OfflineModel.complete

    def __enter__(self) -> ModelCPU:
        complete = self._complete

        async def timed(model: OfflineModel, request: Any) -> Any:
            began = time.process_time()
            try:
                return await complete(model, request)
            finally:
                self.seconds += time.process_time() - began

        OfflineModel.complete = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        OfflineModel.complete = self._complete  # type: ignore[method-assign]


class Digest:
    """Every decision and every context read, in order, into one hash."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.decisions = 0
        self.contexts = 0

    def decided(self, decided: Decided[None]) -> None:
        self.decisions += 1
        self.hash.update(repr(decided.commands).encode())
        self.hash.update(repr(decided.after).encode())

    def turn(self, _turn: Turn, context: ContextRecord | None, _memory: Memory) -> None:
        self.contexts += 1
        self.hash.update(b"-" if context is None else context.model_dump_json().encode())


async def run(turns: list[Turn], digest: Digest | None = None) -> tuple[float, float, int, float]:
    """One replay: its CPU seconds, ``decide()``'s CPU seconds and inputs, the model's CPU seconds."""
    gc.collect()
    gc.freeze()
    store = InMemoryContentStore()
    with DecideCPU() as decide, ModelCPU() as model:
        began = time.process_time()
        await replay(turns, OMConfig.parse(OPTIONS), store=store,
                     watch=digest.decided if digest else None, on_turn=digest.turn if digest else None)
        seconds = time.process_time() - began
    await store.close()
    return seconds, decide.seconds, decide.calls, model.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--shape", default="project", choices=["project", *SHAPES])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--runs", type=int, default=3, help="timed runs (median printed)")
    parser.add_argument("--profile", type=int, default=0, help="top N functions under cProfile (one more run)")
    parser.add_argument("--profile-out", help="also write the profile's stats to this file (pstats)")
    parser.add_argument("--digest", action="store_true", help="print the digest of what was published")
    args = parser.parse_args()
    turns = conversation(args.shape, args.turns, args.seed)
    # loading the tokenizer's ranks is the process's, once (~1 s of CPU), not the turns': done before any timing.
    # Each replay still counts its messages afresh (every ``Memory`` has a counter with an empty cache)
    encoding()
    if args.digest:
        digest = Digest()
        asyncio.run(run(turns, digest))
        print(f"digest {args.shape} {args.turns} seed {args.seed}: {digest.hash.hexdigest()} "
              f"({digest.decisions} decisions, {digest.contexts} contexts)")
    if args.runs:
        results = [asyncio.run(run(turns)) for _ in range(args.runs)]
        engine = [(r[0] - r[3]) / args.turns * 1000 for r in results]
        total = [r[0] / args.turns * 1000 for r in results]
        decide = [r[1] / args.turns * 1000 for r in results]
        print(f"cpu ms/turn {args.shape} {args.turns}: engine (model excluded) median {statistics.median(engine):.3f} "
              f"(runs {', '.join(f'{t:.3f}' for t in engine)}); with the model {statistics.median(total):.3f}; "
              f"decide() {statistics.median(decide):.3f} over {results[0][2]:,} inputs")
    if args.profile:
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        asyncio.run(run(turns))
        profiler.disable()
        stats = pstats.Stats(profiler)
        if args.profile_out:
            stats.dump_stats(args.profile_out)
        stats.sort_stats("cumulative").print_stats(args.profile)
        stats.sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
