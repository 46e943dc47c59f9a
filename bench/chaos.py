"""``make bench-chaos``: rounds of join / leave / SIGKILL across three workers during a sustained stream.

Per trial, on real Apache Kafka and Cassandra, with the offline model:
  1. the conversation (threads x turns, agents waiting for each context) through one worker, uninterrupted: the
     reference;
  2. the same conversation through a group of three workers while ``--rounds`` rounds run, each: SIGKILL one
     worker, start it again, stop another gracefully (SIGTERM), start it again (every restart is a join).
Printed per trial and as medians: user messages lost and duplicated in the final contexts, threads whose context
version went backwards, messages never answered, final contexts that differ from the reference, p99
publish→context while workers come and go (and outside), and the time from each SIGKILL until every thread that
spoke after it was answered again. Table recovery times (memory vs RocksDB, 10k and 100k threads) are measured by
``bench/table_recovery.py``, which ``make bench-chaos`` runs next.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETTLE_S = 15.0  # the group goes on rebalancing after the last restarted worker is ready
sys.path.insert(0, str(ROOT))

from om_stream.devservices import start_services  # noqa: E402
from tests.support.cluster import Conversation, Outcome, WorkerGroup, new_keyspace, play_uninterrupted  # noqa: E402


async def chaos_run(bootstrap: str, cassandra: str, tmp: Path, conversation: Conversation,
                    rounds: int) -> tuple[Outcome, list[float], tuple[float, float]]:
    group = WorkerGroup(bootstrap, tmp, cassandra_hosts=cassandra, keyspace=new_keyspace(cassandra))
    members = [group.add() for _ in range(3)]
    await group.settle()
    kills: list[float] = []
    window: list[float] = []
    total = conversation.threads * conversation.turns
    started = asyncio.Event()

    async def on_progress(sent: int) -> None:
        if sent >= total * 0.1:
            started.set()

    async def rounds_of_chaos() -> None:
        await started.wait()
        window.append(time.monotonic())
        for number in range(rounds):
            victim, leaver = members[number % 3], members[(number + 1) % 3]
            assert victim.popen is not None
            kills.append(time.monotonic())
            os.killpg(victim.popen.pid, signal.SIGKILL)
            await asyncio.to_thread(victim.popen.wait, 10)
            victim.start()
            await victim.wait_ready()
            await asyncio.to_thread(leaver.stop)
            leaver.start()
            await leaver.wait_ready()
        window.append(time.monotonic() + SETTLE_S)

    try:
        chaos = asyncio.create_task(rounds_of_chaos())
        outcome = await conversation.play(group.bootstrap, group.topics, on_progress=on_progress)
        await chaos
    finally:
        group.stop_all()
    return outcome, kills, (window[0], window[-1] if len(window) > 1 else time.monotonic())


def judge(outcome: Outcome, reference_outcome: Outcome, turns: int, kills: list[float],
          window: tuple[float, float]) -> dict[str, Any]:
    lost, duplicated = outcome.lost_and_duplicated(turns)
    differ = sum(1 for thread, final in outcome.final.items() if final != reference_outcome.final.get(thread))
    quiet = sorted(d for _, at, d in outcome.latencies if at + d < window[0])  # answered before the first kill
    return {"lost": lost, "duplicated": duplicated, "regressions": len(outcome.version_regressions()),
            "unserved": len(outcome.unserved), "differ": differ,
            "p99_chaos_ms": outcome.latency_p99(window) * 1000,
            "p99_quiet_ms": (quiet[min(len(quiet) - 1, int(len(quiet) * 0.99))] * 1000) if quiet else 0.0,
            "served_again_s": max((outcome.served_again_after(k) for k in kills), default=0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--think", type=float, default=1.0, help="seconds an agent waits before its next message")
    args = parser.parse_args()
    bootstrap, cassandra = os.environ.get("OM_KAFKA_BOOTSTRAP"), os.environ.get("OM_CASSANDRA_HOSTS")
    services = None
    if not bootstrap or not cassandra:
        services = start_services(tuple(n for n, have in (("kafka", bootstrap), ("cassandra", cassandra)) if not have))
        if services.errors:
            raise SystemExit(f"services did not start: {services.errors}")
        bootstrap = bootstrap or (services.kafka.bootstrap if services.kafka else None)
        cassandra = cassandra or (services.cassandra.contact_point if services.cassandra else None)
    assert bootstrap
    assert cassandra
    trials: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for trial in range(args.trials):
                folder = Path(tmp) / f"trial{trial}"
                base = asyncio.run(play_uninterrupted(bootstrap, cassandra, folder / "reference",
                                                      Conversation(args.threads, args.turns)))
                outcome, kills, window = asyncio.run(chaos_run(
                    bootstrap, cassandra, folder / "chaos", Conversation(args.threads, args.turns, think_s=args.think),
                    args.rounds))
                figures = judge(outcome, base, args.turns, kills, window)
                trials.append(figures)
                print(f"trial {trial + 1}: " + ", ".join(f"{k} {v:.0f}" if isinstance(v, float) else f"{k} {v}"
                                                       for k, v in figures.items()), flush=True)
    finally:
        if services is not None:
            services.stop()
    median = {key: statistics.median(t[key] for t in trials) for key in trials[0]}
    print(f"\n{args.threads} threads x {args.turns} messages, 3 workers, 12 partitions, {args.rounds} rounds of "
          f"SIGKILL + graceful leave (each followed by a join), Cassandra store, offline model; medians of "
          f"{args.trials} trials")
    print(f"  user messages lost {median['lost']:.0f}, duplicated {median['duplicated']:.0f}; context version "
          f"regressions {median['regressions']:.0f} threads; never answered {median['unserved']:.0f}; final contexts "
          f"differing from the uninterrupted run {median['differ']:.0f} (targets: all 0)")
    print(f"  p99 publish->context while workers come and go (first kill to {SETTLE_S:.0f} s after the last "
          f"restart) {median['p99_chaos_ms']:.0f} ms; answered before the first kill {median['p99_quiet_ms']:.0f} ms")
    print(f"  from a SIGKILL until every thread is answered again: {median['served_again_s']:.1f} s (worst of the "
          f"trial's kills; includes the agents' own {args.think:.1f} s pause)")


if __name__ == "__main__":
    main()
