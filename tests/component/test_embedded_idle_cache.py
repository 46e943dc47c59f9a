"""``activateAfterIdle: 'auto'`` through the embedded ``Memory``: the idle time follows the prompt-cache retention
the actor's messages carry (``prompt_cache_retention``), on the manual clock's timers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from om_stream.core.events import OMEvent
from om_stream.core.messages import Message, PromptCacheRetention, TextPart
from om_stream.runtime.embedded import ManualClock, Memory
from tests.support.scripted_provider import START

OPTIONS = {"activateAfterIdle": "auto", "observation": {"messageTokens": 120, "bufferTokens": 30},
           "reflection": {"observationTokens": 10_000}}
MINUTE = 60_000


def turn(i: int, role: str, retention: PromptCacheRetention | None) -> Message:
    return Message(message_id=f"m{i}", thread_id="t1", resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(seconds=i),
                   parts=(TextPart(text=f"turn {i}: the staging cluster needs a new partition plan for friday"),),
                   model="openai/gpt-5-mini" if role == "assistant" else None,
                   prompt_cache_retention=retention if role == "assistant" else None)


async def idle_activation_minute(retention: PromptCacheRetention | None) -> int | None:
    """The minute of idleness after the last turn at which the buffered chunks were activated (None: not in 2 h)."""
    events: list[OMEvent] = []
    clock = ManualClock(int(START.timestamp() * 1000))
    async with Memory(OPTIONS, clock=clock, on_event=lambda e, _i: events.append(e)) as om:
        for i in range(4):
            message = turn(i, "user" if i % 2 == 0 else "assistant", retention)
            clock.now = message.created_at_ms
            await om.add_message(message)
            await om.settle()
        state = om.state("t1")
        assert state is not None and state.buffered, "the turns should leave buffered chunks"
        last = clock.now
        for minute in range(1, 121):
            await om.advance_to(last + minute * MINUTE)
            activations: list[Any] = [e for e in events if e.event_type == "data-om-activation"]
            if any(a.triggered_by == "ttl" for a in activations):
                return minute
    return None


async def test_an_openai_actor_with_24h_retention_keeps_its_buffered_chunks_for_an_hour() -> None:
    assert await idle_activation_minute(None) == 5  # gpt-5-mini's own cache: 5 minutes
    assert await idle_activation_minute("24h") == 60
    assert await idle_activation_minute("in_memory") == 5
