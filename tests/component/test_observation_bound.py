"""The observation log's bound is the engine's guarantee, not the Reflector's: through the embedded ``Memory``, with
Reflectors that answer too long, unchanged, degenerate, or fail, every context holds at most
``reflection.observationTokens`` x ``blockAfter`` tokens of observations, and a churning Reflector is not called
again and again."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from om_stream import Memory, Message, TextPart
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.events import CondensationEvent, OMEvent
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.support.scripted_provider import START

OBSERVATION_TOKENS = 400
BOUND = round(OBSERVATION_TOKENS * 1.2)
OPTIONS: dict[str, dict[str, Any]] = {
    "async": {"model": "openai/gpt-5-mini",
              "observation": {"messageTokens": 150, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.2},
              "reflection": {"observationTokens": OBSERVATION_TOKENS, "bufferActivation": 0.5, "blockAfter": 1.2}},
    "sync": {"model": "openai/gpt-5-mini",
             "observation": {"messageTokens": 150, "bufferTokens": False},
             "reflection": {"observationTokens": OBSERVATION_TOKENS}},
}
WORDS = ("deploy", "Cassandra", "Kafka", "budget", "rotation", "Berlin", "invoice", "pilot", "agent", "schema")


def observe(task: ObserverTask) -> str:
    """An Observer that writes one line per message it is shown, a fifth of them high priority."""
    lines = ["<observations>", f"Date: {task.messages[0].created_at:%b} {task.messages[0].created_at.day}, 2026"]
    for message in task.messages:
        text = " ".join(p.text for p in message.parts if isinstance(p, TextPart))[:160]
        mark = "🔴" if "remember" in text else "🟡"
        lines.append(f"* {mark} ({message.created_at:%H:%M}) {message.role.capitalize()} said: {text}")
    return "\n".join([*lines, "</observations>"])


def longer(task: ReflectorTask) -> str:
    return f"<observations>\n{task.observations}\n* 🟡 (23:59) Reflector added a line of its own\n</observations>"


def unchanged(task: ReflectorTask) -> str:
    return f"<observations>\n{task.observations}\n</observations>"


def degenerate(_task: ReflectorTask) -> str:
    return "<observations>\n" + "* 🟡 the same line again\n" * 300 + "</observations>"


def failing(_task: ReflectorTask) -> str:
    raise ModelError("the provider is down", kind="server_error")


def halving(task: ReflectorTask) -> str:
    """A Reflector that works: keeps every other line."""
    kept = task.observations.splitlines()[::2]
    return "<observations>\n" + "\n".join(kept) + "\n</observations>"


Reflector = Callable[[ReflectorTask], str]


def model_with(reflector: Reflector) -> FunctionModel:
    def answer(request: ChatRequest) -> str:
        if isinstance(request.task, ReflectorTask):
            return reflector(request.task)
        assert isinstance(request.task, ObserverTask)
        return observe(request.task)
    return FunctionModel(answer)


def conversation(seed: int, turns: int) -> list[Message]:
    rng = random.Random(seed)
    out = []
    for i in range(turns):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))
        text = f"please remember {words}" if rng.random() < 0.15 else words
        out.append(Message(message_id=f"m{i}", thread_id="t1", resource_id="r1",
                           role="user" if i % 2 == 0 else "assistant",
                           created_at=START + timedelta(minutes=i * rng.randint(1, 30)),
                           parts=(TextPart(text=f"{i}: {text}"),)))
    return out


async def replay(options: dict[str, Any], reflector: Reflector, seed: int,
                 turns: int = 160) -> tuple[list[int], list[OMEvent], FunctionModel]:
    model = model_with(reflector)
    events: list[OMEvent] = []
    sizes: list[int] = []
    async with Memory(options, model=model, clock=ManualClock(0), on_event=lambda e, _i: events.append(e)) as om:
        for message in conversation(seed, turns):
            await om.add_message(message)
            await om.settle()
            context = await om.context("t1")
            assert context is not None
            sizes.append(context.tokens.observations)
            if message.role == "user":  # the user's current message is always in the context
                assert any(m.message_id == message.message_id for m in context.messages)
    return sizes, events, model


@pytest.mark.parametrize("mode", sorted(OPTIONS))
@pytest.mark.parametrize("reflector", [longer, unchanged, degenerate, failing, halving], ids=lambda f: f.__name__)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_every_context_stays_within_the_bound_whatever_the_reflector_does(
        mode: str, reflector: Reflector, seed: int) -> None:
    bound = BOUND if mode == "async" else OBSERVATION_TOKENS
    sizes, events, _model = await replay(OPTIONS[mode], reflector, seed)
    assert max(sizes) <= bound, f"the log reached {max(sizes)} tokens (bound {bound})"
    assert max(sizes) > OBSERVATION_TOKENS * 0.4  # the conversation did fill the log: the bound was tested
    condensed = [e for e in events if isinstance(e, CondensationEvent)]
    assert all(e.observations_folded for e in condensed if e.reason != "context_over_bound")
    if reflector in (longer, unchanged):  # answers that do not compress: the engine condensed them, and said so
        assert any(e.reason == "over_target" for e in condensed)
    if reflector in (degenerate, failing):  # no usable answer: the offline model reflected (condensing if need be)
        assert any(getattr(e, "fallback_model", None) == "offline" for e in events) or condensed


@pytest.mark.parametrize("reflector", [longer, unchanged, degenerate, failing], ids=lambda f: f.__name__)
async def test_a_reflector_that_cannot_compress_is_not_called_again_and_again(reflector: Reflector) -> None:
    """Churn bound: each automatic reflection climbs at most four ladder levels; after an answer the engine had to
    condense, the next one with the configured Reflector waits for the log to grow by 0.1, 0.2, 0.4, 0.8, then
    1.6 x the threshold (reaching the bound meanwhile is the offline model's job). So over W observation tokens
    written the configured Reflector is called at most 4 x (6 + W / (1.6 x threshold)) times; a churning engine
    (one reflection each time the log crosses its threshold again) calls it every few turns."""
    _sizes, _events, model = await replay(OPTIONS["async"], reflector, seed=7, turns=200)
    count = TiktokenCounter().count
    written = sum(count(observe(r.task)) for r in model.calls("observer") if isinstance(r.task, ObserverTask))
    calls = len(model.calls("reflector"))
    print(f"{reflector.__name__}: {calls} Reflector calls for {written} observation tokens written")
    assert calls <= 4 * (6 + written / (1.6 * OBSERVATION_TOKENS))
    assert calls < 200 / 2  # fewer than one call every other turn
