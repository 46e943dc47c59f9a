"""``make bench-wire``: the worker's CPU per context publication, ``om.context/v1`` against ``om.context/v2``.

A long conversation of each shape goes through the embedded memory (the real host and engine, the in-memory
content store, the offline model, the library's default thresholds, as ``bench/e2e.py``'s worker). At each context
it publishes, the publication is timed (CPU time of this thread, not wall time) the ways the worker can make it, one
after the other, on the same state and the same content cache:

* ``v1``: the context rendered (``Effects.context``) and encoded, the record ``om.context`` carries;
* ``v2 full``: the context rendered, then ``wire.context_refs.by_reference`` (every block hashed) and the records
  encoded (``runtime.worker.context_wire.publications``): the v2 path as first built (but for the thread's
  partition, which ``publications`` now remembers: a few microseconds that this path no longer pays either);
* ``v2``: the path the worker takes now (``Effects.by_reference``: the context's v2 records from the spec and what
  the thread's readers hold, without rendering the v1 record).

Which goes first changes with every publication (a cache one path warms serves the next). Every path keeps its own
memory of what readers hold, and ``v2`` is checked against ``v2 full`` record for record, so a faster path that
published something else would stop the bench. Printed: the median microseconds per publication of each path over
the conversation, the median of those over ``--runs`` runs, and the ratios of each run's medians (same run, same
machine state). The machine's other load shows in wall time, much less in a thread's CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import PublishContext
from om_stream.replay.shapes import SHAPES, generate
from om_stream.runtime.embedded import Memory
from om_stream.runtime.worker.context_wire import PublishedContexts, publications
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import encode
from om_stream.wire.context_refs import by_reference

PATHS = ("v1", "v2 full", "v2")
HEADERS = [("om_version", b"1"), ("om_through_message_id", b"m")]


class TimedMemory(Memory):
    """A memory that times every context it publishes the three ways (``PATHS``) before it delivers it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kafka = KafkaSettings()
        self.samples: dict[str, list[float]] = {p: [] for p in PATHS}
        self.readers: dict[str, PublishedContexts] = {p: PublishedContexts() for p in PATHS[1:]}
        self.turn = 0

    async def _publish(self, command: PublishContext) -> None:
        spec = command.spec
        now_ms = self.clock.now_ms()
        published: dict[str, Any] = {}

        async def v1() -> None:
            encode(await self.effects.context(spec, now_ms=now_ms))

        async def v2_full() -> None:
            record = await self.effects.context(spec, now_ms=now_ms)
            readers = self.readers["v2 full"]
            records, sent = by_reference(
                record, pinned_message_id=spec.pinned_message_id, expire_before=spec.expire_before,
                run_ids=[i for i in spec.message_ids if i != spec.pinned_message_id],
                previous=readers.sent(spec.thread_id))
            readers.advance(spec.thread_id, sent)
            published["v2 full"] = publications(self.kafka, records, HEADERS)

        async def v2() -> None:
            readers = self.readers["v2"]
            records, sent = await self.effects.by_reference(spec, now_ms=now_ms,
                                                            previous=readers.sent(spec.thread_id))
            readers.advance(spec.thread_id, sent)
            published["v2"] = publications(self.kafka, records, HEADERS)

        ways: dict[str, Callable[[], Any]] = {"v1": v1, "v2 full": v2_full, "v2": v2}
        order = PATHS[self.turn % 3:] + PATHS[:self.turn % 3]
        self.turn += 1
        for path in order:
            began = time.thread_time()
            await ways[path]()
            self.samples[path].append(time.thread_time() - began)
        if published["v2"] != published["v2 full"]:
            raise AssertionError(f"v2 published other records than v2 full for {spec.thread_id} "
                                 f"at version {spec.version}")
        await super()._publish(command)


async def one_run(shape: str, turns: int, seed: int) -> dict[str, float]:
    gc.collect()
    gc.freeze()  # what earlier runs left alive stays out of this run's collections
    conversation = generate(shape, turns, seed=seed)
    async with TimedMemory(store=InMemoryContentStore()) as memory:
        for turn in conversation.turns():
            for message in turn.messages:
                await memory.add_message(message)
                await memory.settle()
        return ({p: statistics.median(s) * 1e6 for p, s in memory.samples.items()}
                | {f"{p} mean": statistics.fmean(s) * 1e6 for p, s in memory.samples.items()}
                | {"publications": float(len(memory.samples["v1"]))})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each shape (medians)")
    parser.add_argument("--turns", type=int, default=400, help="turns of each conversation")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    print(f"CPU microseconds per context publication (median over the conversation, then over {args.runs} runs); "
          f"{args.turns} turns per conversation, default thresholds, in-memory store, offline model")
    print("  means: the mean per publication (what throughput follows: observation cycles make some publications "
          "dearer), medians of the runs' means")
    print(f"{'shape':<11}{'pubs':>6}{'v1':>9}{'v2 full':>9}{'v2':>9}{'full/v1':>9}{'v2/v1':>8}{'v2/full':>9}"
          f"{'means: v1':>11}{'v2 full':>9}{'v2':>7}{'v2/v1':>7}")
    for shape in [s for s in args.shapes.split(",") if s]:
        runs = [asyncio.run(one_run(shape, args.turns, args.seed)) for _ in range(args.runs)]
        med = {k: statistics.median(r[k] for r in runs)
               for k in (*PATHS, *(f"{p} mean" for p in PATHS), "publications")}
        ratio = {name: statistics.median(r[a] / r[b] for r in runs)
                 for name, a, b in (("full/v1", "v2 full", "v1"), ("v2/v1", "v2", "v1"), ("v2/full", "v2", "v2 full"))}
        print(f"{shape:<11}{med['publications']:>6.0f}{med['v1']:>9.0f}{med['v2 full']:>9.0f}{med['v2']:>9.0f}"
              f"{ratio['full/v1']:>9.2f}{ratio['v2/v1']:>8.2f}{ratio['v2/full']:>9.2f}{med['v1 mean']:>11.0f}"
              f"{med['v2 full mean']:>9.0f}{med['v2 mean']:>7.0f}"
              f"{statistics.median(r['v2 mean'] / r['v1 mean'] for r in runs):>7.2f}", flush=True)


if __name__ == "__main__":
    main()
