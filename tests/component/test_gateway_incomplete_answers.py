"""Answers the Observer did not finish (a content filter, or a provider's "other" / "unknown" reason), through the
embedded runner, the gateway, litellm and the fake OpenAI server: never committed, asked again, and a failed cycle
that names the reason when no complete answer comes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from om_stream.adapters.gateway import ModelGateway
from om_stream.core.events import OMEvent
from om_stream.core.messages import Message, TextPart
from om_stream.runtime.clock import ManualClock
from om_stream.runtime.embedded import Memory
from om_stream.testing.fake_openai import FakeOpenAI, Reply, Usage
from tests.support.scripted_provider import OBSERVED, START, fast_settings

PARTIAL = "<observations>\nDate: Jan 5, 2026\n* 🔴 (09:00) User stated their name is"
OPTIONS = {"model": "openai/gpt-5-mini", "observation": {"messageTokens": 2_000, "bufferTokens": 40}}


def message(i: int) -> Message:
    role = "user" if i % 2 == 0 else "assistant"
    text = "My name is Ada and I live in Lisbon, near the river." if role == "user" else "Noted, Ada."
    return Message(message_id=f"m{i}", thread_id="t1", resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=i), parts=(TextPart(text=text),))


async def buffer_once(srv: FakeOpenAI, **gateway: Any) -> tuple[Memory, list[OMEvent]]:
    """Messages until one buffering cycle has run (and ended, one way or the other)."""
    events: list[OMEvent] = []
    om = Memory(OPTIONS, model=ModelGateway(fast_settings(srv, **gateway)), clock=ManualClock(0),
                on_event=lambda e, _i: events.append(e))
    async with om:
        for i in range(12):
            await om.add_message(message(i))
            await om.settle()
            if any(e.event_type in ("data-om-buffering-end", "data-om-buffering-failed") for e in events):
                break
    return om, events


def of_type(events: list[OMEvent], event_type: str) -> list[Any]:
    return [e for e in events if e.event_type == event_type]


async def test_an_answer_stopped_by_the_content_filter_is_asked_again_and_only_the_complete_one_is_kept(
        srv: FakeOpenAI) -> None:
    srv.enqueue(Reply(PARTIAL, usage=Usage(1000, 30), finish_reason="content_filter"))

    om, events = await buffer_once(srv, max_retries=1)

    (end,) = of_type(events, "data-om-buffering-end")
    assert of_type(events, "data-om-buffering-failed") == []
    assert len(srv.requests) == 2
    assert end.observations.strip() == OBSERVED.removeprefix("<observations>\n").removesuffix("\n</observations>")
    state = om.state("t1")
    assert state is not None and len(state.buffered) == 1


async def test_an_observer_that_never_finishes_fails_the_cycle_with_the_reason_and_commits_nothing(
        srv: FakeOpenAI) -> None:
    # litellm reports an "other" finish as "stop"; the provider's own reason still fails the attempt
    srv.default = lambda _r: Reply(PARTIAL, usage=Usage(1000, 30), finish_reason="other")

    om, events = await buffer_once(srv, max_retries=2)

    (failed,) = of_type(events, "data-om-buffering-failed")
    assert of_type(events, "data-om-buffering-end") == []
    assert len(srv.requests) == 3  # the first answer and two retries
    assert "finish reason 'other'" in failed.error
    state = om.state("t1")
    assert state is not None and state.buffered == [] and state.log == []
