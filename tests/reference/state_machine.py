"""What the §2b tests read off a ``Sim``: the model requests it made, and a command applied to a thread's record."""

from __future__ import annotations

from typing import Any

from om_stream.core.commands import RequestObservation, RequestReflection
from tests.support.sim import Sim


def words(n: int) -> str:
    return " ".join(["w"] * n)


def observations(sim: Sim) -> list[RequestObservation]:
    return [r for r in sim.requests if isinstance(r, RequestObservation)]


def reflections(sim: Sim) -> list[RequestReflection]:
    return [r for r in sim.requests if isinstance(r, RequestReflection)]


def command(sim: Sim, event: Any, thread: str = "t1") -> list[Any]:
    state = sim.state(thread)
    return sim.apply(state.key, state.resource_id, event)
