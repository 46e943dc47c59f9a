"""``Memory.settled`` and ``Memory.progress``: the embedded runner says when memory has caught up, with an Observer
the test holds back (``FunctionModel`` waiting on a gate), so "never before the observation lands" is observable."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from om_stream import Memory, Message, TextPart
from om_stream.ports import ChatRequest
from om_stream.testing import FunctionModel
from tests.support.scripted_provider import OBSERVED, START

WORDS = " ".join(f"word{i}" for i in range(40))  # about 80 tokens


def message(i: int, thread: str = "t1", role: str = "user") -> Message:
    return Message(message_id=f"{thread}-m{i}", thread_id=thread, resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=i), parts=(TextPart(text=f"{i}: {WORDS}"),))


class GatedObserver:
    """An Observer that answers only once the test opens its gate (the Reflector answers at once)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()
        self.model = FunctionModel(self.answer)

    async def answer(self, request: ChatRequest) -> str:
        if request.role == "observer":
            self.asked.set()
            await self.gate.wait()
        return OBSERVED


async def settle_a_while(waiter: asyncio.Task[Any]) -> None:
    """Give a waiter every chance to return (too early): many turns of the loop and some real time."""
    for _ in range(100):
        await asyncio.sleep(0)
    await asyncio.sleep(0.2)
    assert not waiter.done(), waiter


async def test_settled_returns_exactly_when_the_observation_covering_the_message_lands() -> None:
    observer = GatedObserver()
    async with Memory({"observation": {"messageTokens": 300, "bufferTokens": False}}, model=observer.model) as om:
        sent = [message(i) for i in range(1, 5)]  # the fourth crosses 300 tokens: the Observer runs (held)
        for m in sent:
            await om.add_message(m, wait=False)
        await asyncio.wait_for(observer.asked.wait(), 10)
        waiter = asyncio.create_task(om.settled("t1", sent[-1].message_id, timeout=30))
        await settle_a_while(waiter)
        running = om.progress("t1")
        assert running.pending and running.in_flight and running.observed_through is None
        assert om.state("t1").log == []  # type: ignore[union-attr]

        observer.gate.set()
        progress = await waiter
        # at this very moment the observation is in the record, the store and the context
        state = om.state("t1")
        assert state is not None and len(state.log) == 1 and state.unobserved == []
        assert progress.through is not None and progress.through.status == "observed" and progress.through.settled
        assert progress.observed_through is not None and progress.observed_through.message_id == sent[-1].message_id
        context = await om.context("t1")
        assert context is not None and "User stated their name is Ada." in context.observations
        texts = await om.store.get_segment_texts([state.log[0].id])
        assert "stated their name is Ada" in texts[state.log[0].id]


async def test_settled_under_the_threshold_returns_at_once_and_a_buffered_chunk_once_it_is_buffered() -> None:
    observer = GatedObserver()
    options = {"observation": {"messageTokens": 1000, "bufferTokens": 0.2}}
    async with Memory(options, model=observer.model) as om:
        first = message(1)
        await om.add_message(first, wait=False)
        quiet = await om.settled("t1", timeout=5)  # below bufferTokens: nothing would observe it
        assert quiet.through is not None and quiet.through.status == "unobserved" and not quiet.pending
        for i in range(2, 5):  # past 200 tokens: a buffering starts (held)
            await om.add_message(message(i), wait=False)
        await asyncio.wait_for(observer.asked.wait(), 10)
        waiter = asyncio.create_task(om.settled("t1", "t1-m2", timeout=30))
        await settle_a_while(waiter)
        observer.gate.set()
        progress = await waiter
        assert progress.through is not None and progress.through.status == "buffered"  # waits for the threshold
        assert progress.buffered and om.state("t1").buffered  # type: ignore[union-attr]
        assert om.state("t1").log == []  # type: ignore[union-attr]


async def test_a_timeout_is_an_error_and_a_message_not_sent_yet_is_waited_for() -> None:
    observer = GatedObserver()
    async with Memory({"observation": {"messageTokens": 300, "bufferTokens": False}}, model=observer.model) as om:
        for i in range(1, 5):
            await om.add_message(message(i), wait=False)
        await asyncio.wait_for(observer.asked.wait(), 10)
        with pytest.raises(TimeoutError, match="has not settled"):
            await om.settled("t1", "t1-m4", timeout=0.3)
        later = asyncio.create_task(om.settled("t2", "t2-m1", timeout=30))  # another thread, not sent yet
        await settle_a_while(later)
        await om.add_message(message(1, "t2"), wait=False)
        progress = await later
        assert progress.through is not None and progress.through.status == "unobserved"
        observer.gate.set()
        done = await om.settled("t1", "t1-m4", timeout=30)
        assert done.through is not None and done.through.status == "observed"


async def test_a_message_observed_long_ago_is_found_in_the_store() -> None:
    async with Memory({"observation": {"messageTokens": 400, "bufferTokens": False}},
                      model=FunctionModel(lambda _r: OBSERVED)) as om:
        for i in range(1, 100):
            await om.add_message(message(i))
        state = om.state("t1")
        assert state is not None
        named = {i for s in state.log for i in (s.first_message_id, s.last_message_id)} | set(state.recent_ids)
        old = next(i for i in range(1, 30) if f"t1-m{i}" not in named)  # one the record no longer names
        progress = await om.settled("t1", f"t1-m{old}", timeout=5)  # SQLite answers the one message
        assert progress.through is not None and progress.through.status == "observed"
        assert progress.through.seq == old
