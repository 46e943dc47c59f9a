"""The offline deterministic model: an Observer and a Reflector that need no network and no key.

It backs ``om-stream demo``, tests and benchmarks, and is the last-resort fallback that keeps a context bounded when
every configured model fails. It answers from the structured task (``ChatRequest.task``), in exactly the text
format real models are asked for, so its answers go through the same parser:

* the Observer (``offline_observer``) keeps what the user states, asks to remember, prefers, and the numbers,
  versions and dates they give, one ``Date:`` header per day, with current task and suggested response;
* the Reflector (``offline_reflector``) condenses the log under its ladder level's budget, counted with the
  counter it is given, keeping high-priority lines and the newest, merging duplicates, dropping the oldest
  low-priority detail first, and never answering with more than it was given.
"""

from __future__ import annotations

from collections.abc import Callable

from om_stream.adapters.offline_observer import observe
from om_stream.adapters.offline_reflector import reflect
from om_stream.adapters.offline_signals import states_personal_fact
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse, Usage

__all__ = ["OFFLINE_MODEL_NAME", "OfflineModel", "states_personal_fact"]

OFFLINE_MODEL_NAME = "offline"


class OfflineModel:
    """Implements ``ports.ChatModel``. ``count_text`` is the project's token counter: the Reflector measures its
    budget with it, and usage figures (tokens in and out) come from it."""

    def __init__(self, count_text: Callable[[str], int] | None = None) -> None:
        self._count = count_text or (lambda text: max(1, len(text) // 4))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        task = request.task
        if isinstance(task, ObserverTask):
            text = self.observe(task)
        elif isinstance(task, ReflectorTask):
            text = self.reflect(task)
        else:
            raise ModelError("the offline model answers Observer and Reflector tasks only")
        prompt = sum(self._count(m.content) for m in request.messages) if request.messages else 0
        return ChatResponse(text=text, model=OFFLINE_MODEL_NAME, cost_usd=0.0, finish_reason="stop",
                            usage=Usage(input_tokens=prompt, output_tokens=self._count(text)))

    def observe(self, task: ObserverTask) -> str:
        return observe(task)

    def reflect(self, task: ReflectorTask) -> str:
        return reflect(task, self._count)
