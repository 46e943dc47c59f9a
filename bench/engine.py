"""``make bench-engine``: engine overhead and model tokens on a 2,000-turn synthetic conversation.

Replays the conversation (seeded generator: varied lengths, ~12 % tool turns with long results, facts planted
early) through the embedded runner and the offline model with thresholds 2000/0.2/0.8/1.2 and 4000/0.5/1.2, several
times, and prints medians. The engine is measured on the in-memory content store; one more run on the SQLite store
(the embedded default) shows what the store adds. Targets (engine issue): ≤ 1.2 ms of engine overhead per turn, no
upward drift, ≤ 7.4 M tokens sent to the models (the reference sends 14.7 M, re-sending the whole log on every
Observer call, and spends 18.5 ms per turn), and zero invariant violations.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.config import OMConfig
from om_stream.replay.conversation import load_turns
from om_stream.replay.runner import replay
from om_stream.replay.synthetic import PLANTED_FACTS, write_jsonl
from om_stream.runtime import host

OPTIONS: dict[str, Any] = {
    "observation": {"messageTokens": 2000, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.2},
    "reflection": {"observationTokens": 4000, "bufferActivation": 0.5, "blockAfter": 1.2},
}
REFERENCE_MS_PER_TURN = 18.5
REFERENCE_TOKENS = 14_700_000


class DecideTimer:
    """Times every ``decide()`` the host makes for the embedded runner (inputs: messages, model results, timers,
    commands)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self._decide = host.decide

    def __enter__(self) -> DecideTimer:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return self._decide(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began
                self.calls += 1

        host.decide = timed  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        host.decide = self._decide  # type: ignore[assignment]


async def one_run(path: Path, store: str = "memory") -> dict[str, Any]:
    turns = load_turns(path)
    content = InMemoryContentStore() if store == "memory" else SqliteContentStore(":memory:")
    with DecideTimer() as timer:
        result = await replay(turns, OMConfig.parse(OPTIONS), store=content)
    report = result.report()
    report["messages"] = sum(len(t.messages) for t in turns)
    report["decide"] = {"inputs": timer.calls, "seconds": timer.seconds}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "conversation.jsonl"
        lines = write_jsonl(path, args.turns, seed=42)
        from om_stream.adapters.tiktoken_counter import TiktokenCounter

        counter = TiktokenCounter()
        total_tokens = sum(counter.count(m.text) + sum(counter.count(str(getattr(p, "result", "")))
                                                        for p in m.parts if p.type == "tool-result")
                           for t in load_turns(path) for m in t.messages)
        print(f"conversation: {args.turns} turns, {lines} lines, ~{total_tokens / 1e6:.2f} M tokens "
              f"({len(PLANTED_FACTS)} facts planted early)")
        reports = [asyncio.run(one_run(path)) for _ in range(args.runs)]
        on_sqlite = asyncio.run(one_run(path, "sqlite"))["timing"]["overhead_ms"]
    mean = [r["timing"]["overhead_ms"]["mean"] for r in reports]
    p50 = [r["timing"]["overhead_ms"]["p50"] for r in reports]
    p90 = [r["timing"]["overhead_ms"]["p90"] for r in reports]
    first = [r["timing"]["overhead_ms_first_half_mean"] for r in reports]
    second = [r["timing"]["overhead_ms_second_half_mean"] for r in reports]
    last = reports[-1]
    totals = last["totals"]
    median_mean = statistics.median(mean)
    print(f"runs: {args.runs} (medians below)")
    print(f"engine overhead per turn: mean {median_mean:.3f} ms, p50 {statistics.median(p50):.3f} ms, "
          f"p90 {statistics.median(p90):.3f} ms (runs: {', '.join(f'{m:.3f}' for m in mean)})")
    print(f"  first half {statistics.median(first):.3f} ms, second half {statistics.median(second):.3f} ms "
          f"(drift {statistics.median(second) - statistics.median(first):+.3f} ms)")
    print(f"  vs reference {REFERENCE_MS_PER_TURN} ms/turn: {median_mean / REFERENCE_MS_PER_TURN:.3f}x "
          f"(target <= 1.2 ms)")
    print(f"  on the SQLite store (one run): mean {on_sqlite['mean']:.3f} ms, p50 {on_sqlite['p50']:.3f} ms "
          "(store reads and writes on its thread, and the Observer's reads, included)")
    per_thousand = [r["decide"]["seconds"] / r["decide"]["inputs"] * 1000 for r in reports]
    print(f"decide(): {last['decide']['inputs']:,} inputs per run (messages, model results, timers), "
          f"median {statistics.median(per_thousand) * 1000:.0f} ms per 1,000 inputs (tiktoken counting included)")
    print(f"tokens sent to models: {totals['tokens_sent_to_models']:,} "
          f"({totals['tokens_sent_to_models'] / REFERENCE_TOKENS:.3f}x the reference's 14.7 M; target <= 7.4 M)")
    print(f"Observer calls {totals['observer']['calls']} (buffered {totals['observer']['buffered']}, "
          f"sync {totals['observer']['sync']}); Reflector calls {totals['reflector']['calls']}; "
          f"activations {totals['activations']}; generations {totals['generations']}")
    print(f"invariants: turns over blockAfter {last['invariants']['turns_over_block_after']}, "
          f"turns without the current user message {last['invariants']['turns_without_current_user_message']}")


if __name__ == "__main__":
    main()
