"""Exactly once, whatever is killed when: the worker killed (SIGKILL) or its partition handed to a new owner at
every phase of the commit order, through the real host (``tests.support.crash_world``: the Kafka worker's logs,
changelog, producer and offsets, modelled deterministically).

On every run, each thread's final context (the newest version its agent read) holds every message of the
conversation exactly once, in its observations or raw; no context takes an agent back (one version is one
content, and an older version is only ever published again as it was); every agent is answered through its last
message. With agents that wait for their record's background work and logs read in the order they were written,
the final contexts are also those of the same conversation undisturbed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import Any

import pytest

from tests.support.crash_world import PHASES, TRIGGERS, Fault, FaultKind, Phase, Trigger, World, agent_view

SYNC = {"observation": {"messageTokens": 60, "bufferTokens": False}, "reflection": {"observationTokens": 100_000}}
BUFFERED = {"observation": {"messageTokens": 60, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.5},
            "reflection": {"observationTokens": 100_000}}
REFLECTING = {"observation": {"messageTokens": 60, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.5},
              "reflection": {"observationTokens": 36, "bufferActivation": 0.5}}
REFLECTING_SYNC = {"observation": {"messageTokens": 60, "bufferTokens": False}, "reflection": {"observationTokens": 30}}
CONFIGS: dict[str, dict[str, Any]] = {"sync": SYNC, "buffered": BUFFERED, "reflecting": REFLECTING,
                                      "reflecting-sync": REFLECTING_SYNC}
SHAPE = {"threads": 2, "turns": 6}
KINDS: tuple[FaultKind, ...] = ("sigkill", "rebalance")


def played(config: str, seed: int, faults: tuple[Fault, ...] = (), **options: Any) -> World:
    world = World(CONFIGS[config], seed=seed, faults=faults, **{**SHAPE, **options})
    try:
        return world.play()
    finally:
        world.close()


def finals(world: World) -> dict[str, tuple[Any, ...]]:
    return {thread: agent_view(context) for thread, context in world.finals().items()}


@cache
def undisturbed(config: str, seed: int) -> tuple[dict[str, tuple[Any, ...]], Counter[Trigger]]:
    """Each thread's final context as its agent sees it, and how many batches did each kind of work (a run with a
    fault does the same until the fault strikes)."""
    never = (Fault("sigkill", "before-store", "message", 10**9),)  # a fault that never strikes: every batch foreseen
    world = played(config, seed, never)
    assert world.problems() == []
    return finals(world), world.seen


def ends_like_undisturbed(config: str, seed: int, faults: tuple[Fault, ...]) -> World:
    world = played(config, seed, faults)
    assert world.problems() == [], (config, seed, faults)
    assert finals(world) == undisturbed(config, seed)[0], (config, seed, faults)
    return world


def random_faults(rng: random.Random, triggers: Sequence[Trigger], count: int) -> tuple[Fault, ...]:
    return tuple(Fault(rng.choice(KINDS), rng.choice(PHASES), rng.choice(triggers), rng.randint(1, 3))
                 for _ in range(count))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("phase", PHASES)
def test_a_fault_at_any_phase_of_any_kind_of_batch_ends_like_the_undisturbed_run(kind: FaultKind,
                                                                                   phase: Phase) -> None:
    """Every configuration, every kind of work its batches do (a message, a synchronous observation started or
    answered, a buffering cycle started or answered, an activation, a reflection started or answered, a new
    generation), the fault in the first, second or third such batch."""
    runs = 0
    for number, config in enumerate(CONFIGS):
        for trigger in TRIGGERS:
            seed = number * len(TRIGGERS) + TRIGGERS.index(trigger)
            batches = undisturbed(config, seed)[1][trigger]
            if not batches:
                continue
            fault = Fault(kind, phase, trigger, occurrence=min(batches, 1 + seed % 3))
            world = ends_like_undisturbed(config, seed, (fault,))
            assert world.struck == [fault]  # it did strike: the run was not an undisturbed one
            runs += 1
    assert runs >= 18


def test_faults_one_after_the_other_end_like_the_undisturbed_run() -> None:
    """Two or three faults in one run, any kinds, phases and batches, over many seeds."""
    for seed in range(60):
        rng = random.Random(seed)
        config = rng.choice(list(CONFIGS))
        ends_like_undisturbed(config, seed, random_faults(rng, sorted(undisturbed(config, seed)[1]), rng.randint(2, 3)))


def test_when_model_calls_are_lost_too_a_single_thread_ends_like_the_undisturbed_run() -> None:
    """Lost calls bring their deadline timers (retries, the offline model for a blocking cycle); a fault may
    strike in the batch of a timer. One thread, so that its clock runs the same in every run (the time a kill
    costs is left out: back-offs read it)."""
    for seed in range(40):
        rng = random.Random(seed)
        config = rng.choice(list(CONFIGS))
        faults = random_faults(rng, ("timer", "message", "sync-result", "buffer-result"), 2)
        reference = played(config, seed, threads=1, turns=8, lost_chance=0.3, recovery_ms=0)
        disturbed = played(config, seed, faults, threads=1, turns=8, lost_chance=0.3, recovery_ms=0)
        assert reference.problems() == [] and disturbed.problems() == [], (config, seed, faults)
        assert finals(disturbed) == finals(reference), (config, seed, faults)


def test_any_order_of_inputs_and_any_faults_keep_every_message_once_and_never_take_an_agent_back() -> None:
    """The brokers keep no order between the messages and the results topics, agents speak while background work
    runs, model calls are lost: where a run ends then depends on the order its inputs came in, but never a message
    missing or twice, never a newer context lacking what an older one held, never an agent left waiting. (Not
    checked here: one content per version. A replay onto a state older than what went out, read in another order
    than the first time, may decide otherwise; docs/architecture.md says what would close it.)"""
    for seed in range(120):
        rng = random.Random(seed)
        config = rng.choice(list(CONFIGS))
        faults = random_faults(rng, TRIGGERS, rng.randint(1, 3))
        world = played(config, seed, faults, interleave="shuffled", patient=False, lost_chance=0.2)
        assert world.problems() == [], (config, seed, faults)
