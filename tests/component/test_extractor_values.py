"""Extractors through the embedded ``Memory``: what ``on_extracted`` is given, and a structured value written as
JSON text read as JSON before its schema judges it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from om_stream.core.extractors import ExtractionContext, Extractor
from om_stream.core.messages import Message, TextPart
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock, Memory
from om_stream.testing import FunctionModel

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def said(index: int, text: str) -> Message:
    return Message(message_id=f"m{index}", thread_id="t1", resource_id="r1", role="user",
                   created_at=START + timedelta(minutes=index), parts=(TextPart(text=text),))


def observer(request: ChatRequest) -> str:
    if request.role == "extractor":
        return '{"dogs": "2"}'
    newest = request.messages[-1].content.strip().splitlines()[-1]
    return f"<observations>\nDate: Mar 2, 2026\n* 🔴 (09:00) {newest}\n</observations>\n<mood>calm</mood>"


async def test_on_extracted_sees_the_observed_messages_and_the_active_log() -> None:
    seen: list[ExtractionContext] = []
    mood = Extractor(name="mood", instructions="The user's mood.", on_extracted=seen.append)
    config = {"observation": {"messageTokens": 1000, "bufferTokens": False, "extract": [mood]}}
    async with Memory(config, model=FunctionModel(observer), clock=ManualClock(int(START.timestamp() * 1000))) as om:
        await om.add_message(said(0, "My dog is called Biscuit."))
        await om.observe("t1", force=True)
        await om.settle()
        await om.add_message(said(1, "He is three years old."))
        await om.add_message(said(2, "And he loves the beach."))
        await om.observe("t1", force=True)
        await om.settle()
    assert len(seen) == 2
    first, second = seen
    assert [m.message_id for m in first.observed_messages] == ["m0"] and first.active_observations == ""
    assert [m.message_id for m in second.observed_messages] == ["m1", "m2"]
    assert "My dog is called Biscuit." in second.active_observations
    assert "beach" in second.raw_observations and "Biscuit" not in second.raw_observations


async def test_a_number_the_model_wrote_as_text_is_stored_as_the_number() -> None:
    dogs = Extractor(name="dogs", instructions="How many dogs the user has.", schema={"type": "number"})
    config = {"observation": {"messageTokens": 1000, "bufferTokens": False, "extract": [dogs]}}
    async with Memory(config, model=FunctionModel(observer), clock=ManualClock(int(START.timestamp() * 1000))) as om:
        await om.add_message(said(0, "I have two dogs."))
        await om.observe("t1", force=True)
        await om.settle()
        metadata = await om.store.get_thread_metadata("t1")
    assert metadata.extracted.get("dogs") == 2
