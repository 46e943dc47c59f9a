"""The working memory the Observer keeps (``observation.manageWorkingMemory``), and the values a reflection extracts,
through the embedded ``Memory``: where they are stored and how the application learns of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from om_stream import Memory
from om_stream.core.events import OMEvent
from om_stream.core.extractors import Extractor, WorkingMemoryExtractor
from om_stream.ports import ChatRequest, ThreadMetadata
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all


async def run(options: dict[str, Any], answer: Callable[[ChatRequest], str], rounds: int
              ) -> tuple[list[ThreadMetadata], list[list[OMEvent]]]:
    """``rounds`` forced observations; the thread's metadata after each, and each round's events."""
    seen: list[list[OMEvent]] = [[] for _ in range(rounds)]
    after: list[ThreadMetadata] = []
    om = Memory({"model": "openai/gpt-5-mini", **options}, model=FunctionModel(answer), clock=ManualClock(START_MS),
                on_event=lambda e, _i: seen[len(after)].append(e))
    async with om:
        for r in range(rounds):
            await om.add_message(message(2 * r + 1, "My name is Ada and I live in Porto. " * 3))
            await om.add_message(message(2 * r + 2, "Nice to meet you.", "assistant"))
            await om.observe("t1", force=True)
            await om.settle()
            after.append(await om.store.get_thread_metadata("t1"))
    return after, seen


def working_memories(*texts: str | None) -> Callable[[ChatRequest], str]:
    """An Observer that writes the given working memory on each call in turn (None: none this time)."""
    answers: Iterator[str | None] = iter(texts)

    def answer(request: ChatRequest) -> str:
        text = next(answers)
        return observe_all(request) + (f"\n<working-memory>{text}</working-memory>" if text is not None else "")
    return answer


async def test_the_working_memory_is_stored_apart_from_the_extracted_values_and_each_update_replaces_it() -> None:
    after, seen = await run({"observation": {"manageWorkingMemory": True}},
                            working_memories("# Ada\n- lives in Porto", "# Ada\n- moved to Lisbon", None), rounds=3)
    assert [m.working_memory for m in after] == ["# Ada\n- lives in Porto", "# Ada\n- moved to Lisbon",
                                                 "# Ada\n- moved to Lisbon"]  # an answer without one keeps it
    assert all("working-memory" not in m.extracted for m in after)
    ends = [e for events in seen for e in events if e.event_type == "data-om-observation-end"]
    assert [e.extracted_values for e in ends] == [  # type: ignore[attr-defined]
        {"working-memory": "# Ada\n- lives in Porto"}, {"working-memory": "# Ada\n- moved to Lisbon"}, None]


async def test_a_working_memory_with_a_schema_is_stored_as_its_object() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}}}

    def answer(request: ChatRequest) -> str:
        if request.role == "extractor":
            return '{"working-memory": {"name": "Ada", "city": "Porto"}}'
        return observe_all(request)

    after, _ = await run({"observation": {"manageWorkingMemory": True,
                                          "extract": [WorkingMemoryExtractor(schema=schema)]}}, answer, rounds=1)
    assert after[0].working_memory == {"name": "Ada", "city": "Porto"} and after[0].extracted == {}


async def test_an_empty_working_memory_leaves_the_stored_one_as_it_is() -> None:
    after, _ = await run({"observation": {"manageWorkingMemory": True}},
                         working_memories("# Ada\n- lives in Porto", "  "), rounds=2)
    assert after[-1].working_memory == "# Ada\n- lives in Porto"


async def test_a_background_reflection_stores_its_extracted_values_when_it_is_buffered() -> None:
    def answer(request: ChatRequest) -> str:
        return observe_all(request) + ("\n<summary>Ada from Porto</summary>" if request.role == "reflector" else "")

    summary = Extractor(name="summary", instructions="One line about the user.")
    after, seen = await run({"reflection": {"observationTokens": 60, "bufferActivation": 0.5, "extract": [summary]}},
                            answer, rounds=3)
    by_round = [[e for e in events if getattr(e, "operation_type", None) == "reflection"] for events in seen]
    buffered = next(i for i, events in enumerate(by_round)
                    if any(e.event_type == "data-om-buffering-end" for e in events))
    assert not any(e.event_type == "data-om-activation" for events in by_round[:buffered + 1] for e in events)
    assert after[buffered].extracted == {"summary": "Ada from Porto"}  # stored before the reflection is activated
    assert after[-1].extracted == {"summary": "Ada from Porto"}
