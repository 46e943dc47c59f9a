"""Reflectors that misbehave, for the engine's guarantees: the bound on the observation log and the absence of
reflection churn must hold *whatever the Reflector returns*.

``MisbehavingReflector`` answers Observer calls with the offline model, and Reflector calls as its ``behaviour``
says: ``offline`` (the offline model's condensation), ``barely`` (the log minus its last line: it shrinks, a
little, every time), ``unchanged`` (the log as it was given), ``longer`` (the log plus a line), ``degenerate`` (one
line repeated) or ``failing`` (a model error). Every Reflector call is counted, the failing ones included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from om_stream.adapters.offline_model import OfflineModel
from om_stream.core.prompts.tasks import ReflectorTask
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse, Usage

Behaviour = Literal["offline", "barely", "unchanged", "longer", "degenerate", "failing"]
BEHAVIOURS: tuple[Behaviour, ...] = get_args(Behaviour)


class MisbehavingReflector:
    def __init__(self, behaviour: Behaviour, count_text: Callable[[str], int]) -> None:
        self.behaviour = behaviour
        self.count_text = count_text
        self.offline = OfflineModel(count_text)
        self.reflector_calls = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if request.role != "reflector" or self.behaviour == "offline":
            self.reflector_calls += request.role == "reflector"
            return await self.offline.complete(request)
        self.reflector_calls += 1
        task = request.task
        assert isinstance(task, ReflectorTask)
        if self.behaviour == "failing":
            raise ModelError("the reflector is down")
        lines = [line for line in task.observations.splitlines() if line.strip()]
        if self.behaviour == "barely":
            lines = lines[:-1] or lines
        elif self.behaviour == "longer":
            lines = [*lines, "* 🟡 (23:59) The reflector added this line of its own."]
        elif self.behaviour == "degenerate":
            lines = ["* 🟡 the same line again"] * max(40, len(lines))
        text = "<observations>\n" + "\n".join(lines) + "\n</observations>"
        prompt = "\n".join(message.content for message in request.messages)
        return ChatResponse(text=text, model=f"reflector-{self.behaviour}",
                            usage=Usage(self.count_text(prompt), self.count_text(text)), cost_usd=0.0)
