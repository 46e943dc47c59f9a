"""§2h of the reference: extractors (custom values OM pulls out of a conversation), continuation hints, working
memory and the thread title.

Through the embedded ``Memory`` with a ``FunctionModel`` that answers as Observer, Reflector and extractor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from om_stream import ConfigError, Memory, OMConfig
from om_stream.core.events import OMEvent
from om_stream.core.extractors import ExtractionContext, Extractor, slugify
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all


class Profile(BaseModel):
    name: str | None = None
    city: str | None = None


def answering(extra: str = "", structured: str = '{"profile": {"name": "Ada", "city": "Porto"}}',
              reflection_extra: str = "") -> Callable[[ChatRequest], str]:
    def answer(request: ChatRequest) -> str:
        if request.role == "extractor":
            return structured
        if request.role == "reflector":
            return observe_all(request) + reflection_extra
        return observe_all(request) + extra
    return answer


async def observe(options: dict[str, Any], answer: Callable[[ChatRequest], str], *, rounds: int = 1,
                  reflect: bool = False) -> tuple[Memory, FunctionModel, list[OMEvent]]:
    """Run ``rounds`` forced observations (and a reflection) and return the closed memory, model and events."""
    model = FunctionModel(answer)
    seen: list[OMEvent] = []
    om = Memory({"model": "openai/gpt-5-mini", **options}, model=model, clock=ManualClock(START_MS),
                on_event=lambda e, _i: seen.append(e))
    async with om:
        for r in range(rounds):
            await om.add_message(message(2 * r + 1, "My name is Ada and I live in Porto."))
            await om.add_message(message(2 * r + 2, "Nice to meet you.", "assistant"))
            await om.observe("t1", force=True)
            await om.settle()
        if reflect:
            await om.reflect("t1")
            await om.settle()
        om.last = await om.context("t1")  # type: ignore[attr-defined]
        om.metadata = await om.store.get_thread_metadata("t1")  # type: ignore[attr-defined]
    return om, model, seen


def ends(seen: list[OMEvent], operation: str = "observation") -> list[Any]:
    return [e for e in seen if e.event_type == "data-om-observation-end" and e.operation_type == operation]  # type: ignore[attr-defined]


# -- 2h.1 the extractor model ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "slug"), [("User profile", "user-profile"), ("Bob's  Mood!", "bobs-mood"),
                                            ("Plan v2", "plan-v2"), ("ALL CAPS__name--", "all-caps-name")])
def test_an_extractor_name_becomes_a_lower_case_hyphenated_slug(name: str, slug: str) -> None:
    assert slugify(name) == slug == Extractor(name=name, instructions="x").slug


@pytest.mark.parametrize("name", ["2fast", "!!!", ""])
def test_a_name_whose_slug_does_not_start_with_a_letter_is_refused(name: str) -> None:
    with pytest.raises(ValueError):
        Extractor(name=name, instructions="x")


@pytest.mark.parametrize("name", ["observations", "Current task", "thread title", "System", "extracted values"])
def test_a_slug_that_is_reserved_or_built_in_is_refused(name: str) -> None:
    with pytest.raises(ConfigError):
        OMConfig.parse({"observation": {"extract": [Extractor(name=name, instructions="x")]}})


def test_two_extractors_with_the_same_slug_are_refused() -> None:
    with pytest.raises(ConfigError):
        OMConfig.parse({"observation": {"extract": [Extractor(name="Mood", instructions="x"),
                                                     Extractor(name="mood!", instructions="y")]}})


async def test_an_inline_extractor_is_asked_in_the_observers_answer_and_stored() -> None:
    mood = Extractor(name="mood", instructions="The user's mood in one word.")
    om, model, seen = await observe({"observation": {"extract": [mood]}}, answering("\n<mood>cheerful</mood>"))
    (call,) = model.calls("observer")
    assert "<mood>: The user's mood in one word." in call.messages[0].content
    assert not model.calls("extractor")
    assert om.metadata.extracted == {"mood": "cheerful"}  # type: ignore[attr-defined]
    assert ends(seen)[0].extracted_values == {"mood": "cheerful"}


async def test_a_schema_extractor_gets_its_value_from_a_structured_follow_up_call() -> None:
    profile = Extractor(name="profile", instructions="Stable facts about the user.", schema=Profile)
    om, model, _ = await observe({"observation": {"extract": [profile]}}, answering())
    (follow_up,) = model.calls("extractor")
    assert follow_up.response_schema is not None and "profile" in follow_up.response_schema["properties"]
    assert "Stable facts about the user." in follow_up.messages[-1].content
    assert om.metadata.extracted == {"profile": {"name": "Ada", "city": "Porto"}}  # type: ignore[attr-defined]


async def test_a_malformed_structured_answer_is_asked_for_once_more() -> None:
    answers = iter(["not json at all", '{"profile": {"name": "Ada"}}'])
    profile = Extractor(name="profile", instructions="x", schema=Profile)

    def answer(request: ChatRequest) -> str:
        return next(answers) if request.role == "extractor" else observe_all(request)

    om, model, _ = await observe({"observation": {"extract": [profile]}}, answer)
    assert len(model.calls("extractor")) == 2
    assert om.metadata.extracted == {"profile": {"name": "Ada"}}  # type: ignore[attr-defined]


async def test_instructions_and_schemas_may_depend_on_the_cycle() -> None:
    contexts: list[ExtractionContext] = []

    def instructions(context: ExtractionContext) -> str:
        contexts.append(context)
        return f"The mood during this {context.source}."

    mood = Extractor(name="mood", instructions=instructions)
    _, model, _ = await observe({"observation": {"extract": [mood]}}, answering("\n<mood>calm</mood>"))
    assert "The mood during this observation." in model.calls("observer")[0].messages[0].content
    assert contexts and contexts[0].thread_id == "t1" and contexts[0].resource_id == "r1"


async def test_the_previous_value_is_shown_again_unless_the_extractor_says_not_to() -> None:
    shown = Extractor(name="mood", instructions="x")
    fresh = Extractor(name="fresh", instructions="y", include_previous_extraction=False)
    _, model, _ = await observe({"observation": {"extract": [shown, fresh]}},
                                answering("\n<mood>calm</mood>\n<fresh>new</fresh>"), rounds=2)
    second_task = model.calls("observer")[1].messages[1].content
    assert "<mood>calm</mood>" in second_task and "<fresh>" not in second_task


async def test_metadata_key_path_false_keeps_a_value_out_of_the_thread_metadata() -> None:
    kept = Extractor(name="mood", instructions="x", metadata_key_path="extracted.feelings")
    dropped = Extractor(name="scratch", instructions="y", metadata_key_path=False)
    om, _, _ = await observe({"observation": {"extract": [kept, dropped]}},
                             answering("\n<mood>calm</mood>\n<scratch>tmp</scratch>"))
    assert om.metadata.extracted == {"feelings": "calm"}  # type: ignore[attr-defined]


async def test_on_extracted_sees_the_cycle_and_what_it_returns_is_stored() -> None:
    seen: list[ExtractionContext] = []

    def shout(context: ExtractionContext) -> str:
        seen.append(context)
        return str(context.current).upper()

    mood = Extractor(name="mood", instructions="x", on_extracted=shout)
    om, _, _ = await observe({"observation": {"extract": [mood]}}, answering("\n<mood>calm</mood>"), rounds=2)
    assert om.metadata.extracted == {"mood": "CALM"}  # type: ignore[attr-defined]
    first, second = seen
    assert (first.previous, first.current) == (None, "calm") and second.previous == "CALM"
    assert "saw m1" in first.raw_observations
    assert [m.message_id for m in second.observed_messages] == ["m3", "m4"]
    assert "saw m1" in second.active_observations  # the log the new observations are appended to


async def test_a_failing_extractor_is_reported_and_the_other_values_are_kept() -> None:
    def broken(context: ExtractionContext) -> str:
        raise RuntimeError("no mood today")

    mood = Extractor(name="mood", instructions="x", on_extracted=broken)
    plan = Extractor(name="plan", instructions="y")
    om, _, seen = await observe({"observation": {"extract": [mood, plan]}},
                                answering("\n<mood>calm</mood>\n<plan>trip</plan>"))
    (end,) = ends(seen)
    assert end.extracted_values == {"plan": "trip"}
    assert [(f.slug, "no mood today" in f.error) for f in end.extraction_failures] == [("mood", True)]
    assert om.metadata.extracted == {"plan": "trip"}  # type: ignore[attr-defined]


async def test_a_value_written_as_json_text_is_read_as_json_before_validation() -> None:
    count = Extractor(name="count", instructions="x", schema={"type": "integer"})
    om, _, _ = await observe({"observation": {"extract": [count]}}, answering(structured='{"count": "7"}'))
    assert om.metadata.extracted == {"count": 7}  # type: ignore[attr-defined]


async def test_reflection_extractors_run_during_reflection_and_their_values_are_stored() -> None:
    summary = Extractor(name="summary", instructions="One line about the user.")
    om, model, seen = await observe({"reflection": {"extract": [summary]}},
                                    answering(reflection_extra="\n<summary>Ada from Porto</summary>"),
                                    reflect=True)
    assert "<summary>" not in model.calls("observer")[0].messages[0].content
    assert "<summary>" in model.calls("reflector")[0].messages[-1].content
    assert ends(seen, "reflection")[0].extracted_values == {"summary": "Ada from Porto"}
    assert om.metadata.extracted == {"summary": "Ada from Porto"}  # type: ignore[attr-defined]


# -- built-in values ------------------------------------------------------------------------------------------------

async def test_the_built_in_hints_are_mirrored_into_the_thread_metadata() -> None:
    om, _, _ = await observe({}, answering("\n<current-task>book the flight</current-task>\n"
                                           "<suggested-response>ask for dates</suggested-response>"))
    metadata = om.metadata  # type: ignore[attr-defined]
    assert (metadata.current_task, metadata.suggested_response) == ("book the flight", "ask for dates")


async def test_hints_are_asked_for_per_phase_as_configured() -> None:
    _, model, _ = await observe({"observation": {"continuationHints": False}}, answering(), reflect=True)
    assert "<current-task>" not in model.calls("observer")[0].messages[0].content
    assert "<current-task>" in model.calls("reflector")[0].messages[0].content
    _, model, _ = await observe({"reflection": {"continuationHints": False}}, answering(), reflect=True)
    assert "<current-task>" in model.calls("observer")[0].messages[0].content
    assert "<current-task>" not in model.calls("reflector")[0].messages[0].content


# -- 2h.2 working memory --------------------------------------------------------------------------------------------

async def test_a_managed_working_memory_is_asked_for_without_its_previous_value_and_kept_out_of_om_metadata() -> None:
    om, model, _seen = await observe({"observation": {"manageWorkingMemory": True}},
                                    answering("\n<working-memory># Ada\n- lives in Porto</working-memory>"),
                                    rounds=2)
    assert "<working-memory>" in model.calls("observer")[0].messages[0].content
    assert "<working-memory>" not in model.calls("observer")[1].messages[1].content
    assert "working-memory" not in om.metadata.extracted  # type: ignore[attr-defined]


async def test_a_managed_working_memory_reaches_the_application() -> None:
    om, _, seen = await observe({"observation": {"manageWorkingMemory": True}},
                                answering("\n<working-memory># Ada\n- lives in Porto</working-memory>"))
    end = ends(seen)[0]
    delivered = json.dumps(end.extracted_values or {}) + json.dumps(om.metadata.extracted)  # type: ignore[attr-defined]
    assert "lives in Porto" in delivered, "the updated working memory goes nowhere"


# -- 2h.3 the thread title ------------------------------------------------------------------------------------------

async def test_a_title_is_applied_only_with_thread_titles_on_and_reported_once_per_change() -> None:
    title = "\n<thread-title>Moving to Porto</thread-title>"
    off, _, seen_off = await observe({}, answering(title))
    on, _, seen_on = await observe({"observation": {"threadTitle": True}}, answering(title), rounds=2)
    assert off.last.thread_title is None and not [e for e in seen_off if e.event_type == "data-om-thread-update"]  # type: ignore[attr-defined]
    assert on.last.thread_title == "Moving to Porto"  # type: ignore[attr-defined]
    updates = [e for e in seen_on if e.event_type == "data-om-thread-update"]
    assert [(u.old_title, u.new_title) for u in updates] == [(None, "Moving to Porto")]  # type: ignore[attr-defined]
    assert on.metadata.title == "Moving to Porto"  # type: ignore[attr-defined]


async def test_a_title_shorter_than_three_characters_is_ignored() -> None:
    om, _, _ = await observe({"observation": {"threadTitle": True}}, answering("\n<thread-title>Hi</thread-title>"))
    assert om.last.thread_title is None  # type: ignore[attr-defined]
