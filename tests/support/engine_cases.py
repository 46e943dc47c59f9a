"""Option sets and helpers for the state-machine rule tests (token counts as in ``tests.support.sim``: one per word
plus one per message)."""

from __future__ import annotations

from om_stream.core.inputs import ReflectNow
from om_stream.core.state import RecordState
from tests.support.sim import Sim

TEN = " ".join(["w"] * 9)  # 10 tokens with the message overhead


def sync_only(message_tokens: int, observation_tokens: int = 10_000) -> dict[str, object]:
    return {"observation": {"messageTokens": message_tokens, "bufferTokens": False},
            "reflection": {"observationTokens": observation_tokens}}


def buffered(**observation: object) -> dict[str, object]:
    return {"observation": {"messageTokens": 100, "bufferTokens": 0.2, **observation},
            "reflection": {"observationTokens": 10_000}}


def events(sim: Sim, kind: str) -> list:
    return [e.event for e in sim.events if e.event.event_type == kind]


def reflect_after_six_turns(sim: Sim) -> RecordState:
    """Six user turns of ten tokens, each settled, then a manual reflection, settled; returns the state before it."""
    for _ in range(6):
        sim.say("t1", "user", TEN)
        sim.settle()
    state = sim.state()
    sim.apply(state.key, state.resource_id, ReflectNow())
    sim.settle()
    return state
