"""The Observer, Reflector and extraction cycles as pure flows (``core.cycles``): each rule driven by a scripted
driver, without a store, a model or an event loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from om_stream.core.commands import RequestReflection
from om_stream.core.config import ResolvedConfig
from om_stream.core.cycles import (
    ServingModel,
    UnusableAnswer,
)
from om_stream.core.extractors import Extractor
from om_stream.core.labels import thread_label
from om_stream.core.messages import ImagePart, TextPart
from om_stream.core.prompts.chat import ChatRequest
from om_stream.core.prompts.extraction import EXTRACTION_SYSTEM, parse_json_object
from om_stream.errors import ModelError
from tests.support.config_options import resolve
from tests.support.cycle_driver import (
    DEGENERATE,
    OBSERVED,
    Driver,
    count_words,
    message,
    observation,
    reflected,
    reflection,
    run,
)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_an_observation_reads_the_messages_the_logs_and_the_prior_values_then_calls_the_observer() -> None:
    driver = Driver([OBSERVED], segments={"p1": "* old fact", "b1": "* buffered fact"})
    result = run(driver, observation(previous=("p1",), buffered=("b1",)))
    assert result.ok and "green tea" in result.observations
    assert [type(s).__name__ for s in driver.steps] == ["ReadMessages", "ReadSegmentTexts", "ReadExtracted",
                                                       "CallModel"]
    task = driver.calls[0].task
    assert task is not None and task.previous_observations == "* old fact"
    assert getattr(task, "buffered_observations", None) == "* buffered fact"
    assert result.duration_ms == 0  # the driver times the cycle


def test_a_degenerate_observer_answer_is_asked_for_once_more() -> None:
    driver = Driver([DEGENERATE, OBSERVED])
    result = run(driver, observation())
    assert result.ok and "green tea" in result.observations
    assert len(driver.calls) == 2 and driver.calls[0] == driver.calls[1]


def test_a_degenerate_observer_answer_twice_fails_the_cycle_without_a_third_call() -> None:
    driver = Driver([DEGENERATE, DEGENERATE, OBSERVED])
    with pytest.raises(UnusableAnswer) as failed:
        run(driver, observation())
    assert failed.value.kind == "degenerate" and len(driver.calls) == 2


def test_an_observer_answer_without_observations_is_a_failure_and_is_not_asked_again() -> None:
    driver = Driver(["I have nothing to add.", OBSERVED])
    with pytest.raises(UnusableAnswer) as failed:
        run(driver, observation())
    assert failed.value.kind == "empty" and len(driver.calls) == 1


def test_an_observation_of_messages_missing_from_the_store_fails_before_any_call() -> None:
    driver = Driver([OBSERVED], messages={})
    with pytest.raises(ModelError, match="none of the messages"):
        run(driver, observation())
    assert driver.calls == []


def test_an_offline_observation_names_the_offline_model_and_reports_it_as_the_fallback() -> None:
    driver = Driver([OBSERVED])
    result = run(driver, observation(offline=True))
    assert driver.calls[0].model == "offline" and result.fallback_model == result.model


def test_resource_scope_gives_each_threads_observations_under_its_real_id() -> None:
    config = resolve({"scope": "resource", "observation": {"bufferTokens": False}})
    label = thread_label("t2", config.obscure_thread_ids)
    answer = (f'<observations>\n<thread id="{label}">\n* 🔴 (09:00) User likes tea.\n</thread>\n'
              f"</observations>")
    driver = Driver([answer], messages={"m1": message("m1", "t2")})
    result = run(driver, observation(thread_ids=("t2",)), config)
    assert label != "t2" and result.per_thread == {"t2": "* 🔴 (09:00) User likes tea."}


# -- attachments ----------------------------------------------------------------------------------------------------

def _with_image() -> Driver:
    return Driver([OBSERVED], messages={"m1": message("m1", "t1", TextPart(text="See this."),
                                                      ImagePart(data=PNG, filename="shot.png"))})


def _attachments(driver: Driver) -> int:
    return sum(len(m.attachments) for m in driver.calls[0].messages)


def test_auto_drops_the_attachments_for_a_model_that_refuses_them_and_keeps_their_placeholders() -> None:
    driver = _with_image()
    run(driver, observation(), resolve({"observation": {"observeAttachments": "auto"}}),
        model=ServingModel(accepts_attachments=lambda _request: False))
    assert _attachments(driver) == 0
    assert "[Image #1: shot.png]" in "\n".join(m.content for m in driver.calls[0].messages)


@pytest.mark.parametrize(("policy", "accepts", "offline"), [
    ("auto", lambda _request: True, False),  # the model takes them
    ("auto", None, False),  # the model does not say
    (True, lambda _request: False, False),  # forwarding is not left to the model
    ("auto", lambda _request: False, True),  # the offline model reads the task, never the prompt
])
def test_attachments_stay_unless_auto_meets_a_model_that_refuses_them(
        policy: Any, accepts: Callable[[ChatRequest], bool] | None, offline: bool) -> None:
    driver = _with_image()
    run(driver, observation(offline=offline), resolve({"observation": {"observeAttachments": policy}}),
        model=ServingModel(accepts_attachments=accepts))
    assert _attachments(driver) == 1


# -- Reflector ------------------------------------------------------------------------------------------------------

def test_the_ladder_stops_at_the_first_usable_attempt_under_target() -> None:
    driver = Driver([reflected(5), reflected(2)], segments={"s1": "* a\n* b"})
    result = run(driver, reflection(target=10))
    assert result.ok and len(driver.calls) == 1
    assert count_words(result.observations) == 5


def test_the_ladder_climbs_one_level_per_attempt_up_to_three_above_its_start() -> None:
    driver = Driver([reflected(50)] * 5, segments={"s1": "* a"})
    run(driver, reflection(target=10, start=1))
    assert [c.task.level for c in driver.calls if c.task is not None and hasattr(c.task, "level")] == [1, 2, 3, 4]


def test_the_result_names_each_attempt_the_ladder_went_on_from() -> None:
    """Issue 30 item 3: the engine announces each retry; the flow says which attempts were retried, at what."""
    driver = Driver([reflected(50), DEGENERATE, reflected(5)], segments={"s1": "* a"})
    result = run(driver, reflection(target=10, start=1))
    assert [(a.level, a.tokens, a.next_level) for a in result.attempts] == [(1, 50, 2), (2, 0, 3)]
    single = run(Driver([reflected(5)], segments={"s1": "* a"}), reflection(target=10))
    assert single.attempts == ()


def test_the_ladder_never_climbs_past_the_top_level() -> None:
    driver = Driver([reflected(50)] * 5, segments={"s1": "* a"})
    run(driver, reflection(target=10, start=2))
    assert len(driver.calls) == 3  # levels 2, 3, 4


def test_the_smallest_usable_attempt_wins_when_none_comes_in_under_target_and_is_condensed_under_it() -> None:
    replies = [reflected(40, "first"), reflected(20, "smallest"), reflected(30, "third"), reflected(35, "last")]
    driver = Driver(list(replies), segments={"s1": "* a"})
    result = run(driver, reflection(target=10))
    assert result.current_task == "smallest"  # the hints are the kept attempt's own
    assert result.condensed == "over_target" and result.condensed_from_tokens == 20
    assert count_words(result.observations) <= 8  # CONDENSED_SHARE of the target: room to grow before the next
    assert result.observations.startswith("* w0 w1")  # the kept attempt, cut: not the log it was given


def test_an_answer_under_target_is_kept_as_the_model_wrote_it() -> None:
    driver = Driver([reflected(9)], segments={"s1": "* a"})
    result = run(driver, reflection(target=10))
    assert result.condensed is None and count_words(result.observations) == 9


def offline_reflection(target: int) -> RequestReflection:
    return replace(reflection(target=target), use_offline_model=True)


LOG = "\n".join(["Date: Jan 5, 2026", *(f"* {'🔴' if i % 4 == 0 else '🟢'} (09:{i:02d}) fact {i} " + "x " * 6
                                        for i in range(30))])


def test_the_offline_cycle_condenses_the_log_itself_when_its_answers_are_unusable() -> None:
    driver = Driver(["", DEGENERATE, "", "   "], segments={"s1": LOG})
    result = run(driver, offline_reflection(target=100))
    assert result.ok and result.condensed == "unusable" and result.folded_observations > 0
    assert count_words(result.observations) <= 80
    assert "fact 29" in result.observations  # the newest line is kept
    assert result.fallback_model == "offline"


def test_the_offline_cycle_condenses_the_log_itself_when_its_call_fails() -> None:
    driver = Driver([ModelError("offline model crashed")], segments={"s1": LOG})
    result = run(driver, offline_reflection(target=100))
    assert result.ok and result.condensed == "failed" and count_words(result.observations) <= 80


def test_a_configured_model_that_fails_still_fails_the_cycle_so_it_is_retried() -> None:
    driver = Driver([ModelError("503 from the provider")], segments={"s1": LOG})
    with pytest.raises(ModelError, match="503"):
        run(driver, reflection(target=100))


def test_an_empty_or_degenerate_attempt_is_never_kept_and_the_climb_goes_on() -> None:
    driver = Driver(["", DEGENERATE, reflected(4)], segments={"s1": "* a"})
    result = run(driver, reflection(target=10))
    assert len(driver.calls) == 3 and count_words(result.observations) == 4


def test_a_reflection_of_only_unusable_attempts_is_never_a_success() -> None:
    driver = Driver(["", DEGENERATE, "", "   "], segments={"s1": "* a"})
    with pytest.raises(UnusableAnswer, match=r"levels 1-4") as failed:
        run(driver, reflection(target=10))
    assert failed.value.kind == "degenerate"


def test_a_reflection_of_segments_missing_from_the_store_fails_before_any_call() -> None:
    driver = Driver([reflected(4)], segments={"s1": "* a"})
    with pytest.raises(ModelError, match="1 observation segments"):
        run(driver, reflection(segments=("s1", "s2")))
    assert driver.calls == []


def test_a_buffered_reflection_asks_for_no_hints() -> None:
    driver = Driver([reflected(4)], segments={"s1": "* a"})
    request = reflection()
    run(driver, RequestReflection(**{**request.__dict__, "kind": "buffer"}))
    task = driver.calls[0].task
    assert task is not None and getattr(task, "want_hints", None) is False


# -- structured extraction ------------------------------------------------------------------------------------------

class Mood(BaseModel):
    mood: str
    since: str | None = None


MOOD = Extractor(name="mood", instructions="The user's mood.", schema=Mood)
CITY = Extractor(name="city", instructions="Where the user lives.", schema={"type": "string"})
AGE = Extractor(name="age", instructions="The user's age.", schema={"type": "integer"})


def _extracting(*extractors: Extractor) -> ResolvedConfig:
    return resolve({"observation": {"extract": list(extractors)}})


def test_structured_values_come_from_one_follow_up_call_to_the_model_that_answered() -> None:
    driver = Driver([OBSERVED], ['{"mood": {"mood": "calm"}, "city": "Lisbon"}'], extracted={"city": "Porto"})
    result = run(driver, observation(), _extracting(MOOD, CITY))
    assert result.extracted_values == {"mood": {"mood": "calm"}, "city": "Lisbon"}
    assert result.extraction_failures == ()
    (call,) = driver.extraction_calls
    assert call.role == "extractor" and call.model == "openai/gpt-5-mini" and call.temperature == 0.0
    assert call.messages[0].content == EXTRACTION_SYSTEM
    assert call.messages[-2].content == OBSERVED  # the exchange it just had
    assert 'Prior value: "Porto"' in call.messages[-1].content
    assert call.response_schema is not None and set(call.response_schema["properties"]) == {"mood", "city"}
    assert "$defs" not in call.response_schema["properties"]["mood"]


def test_a_malformed_extraction_answer_is_asked_for_once_more() -> None:
    driver = Driver([OBSERVED], ["Sure! The city is Lisbon.", '```json\n{"city": "Lisbon"}\n```'])
    result = run(driver, observation(), _extracting(CITY))
    assert result.extracted_values == {"city": "Lisbon"}
    first, second = driver.extraction_calls
    assert second.messages[:len(first.messages)] == first.messages
    assert second.messages[-2].content == "Sure! The city is Lisbon."
    assert second.messages[-1].content.startswith("That was not a valid JSON object (invalid JSON")


def test_a_malformed_extraction_answer_twice_fails_every_slug_but_not_the_cycle() -> None:
    driver = Driver([OBSERVED], ["[1, 2]", "[3]", '{"city": "never asked"}'])
    result = run(driver, observation(), _extracting(CITY, AGE))
    assert result.ok and result.extracted_values == {}
    assert result.extraction_failures == (("city", "a JSON list, not an object"), ("age", "a JSON list, not an object"))
    assert len(driver.extraction_calls) == 2


def test_a_failed_extraction_call_fails_every_slug_but_not_the_cycle() -> None:
    driver = Driver([OBSERVED], [ModelError("rate limited", kind="rate_limited")])
    result = run(driver, observation(), _extracting(CITY))
    assert result.ok and "green tea" in result.observations
    assert result.extraction_failures == (("city", "the extraction call failed: rate limited"),)
    assert len(driver.extraction_calls) == 1


def test_a_value_that_breaks_its_schema_fails_only_its_own_slug() -> None:
    driver = Driver([OBSERVED], ['{"city": "Lisbon", "age": "forty", "mood": {"since": "May"}}'])
    result = run(driver, observation(), _extracting(CITY, AGE, MOOD))
    assert result.extracted_values == {"city": "Lisbon"}
    failed = dict(result.extraction_failures)
    assert set(failed) == {"age", "mood"}
    assert failed["age"].startswith("the value does not match the schema: (root): 'forty'")


def test_an_invalid_schema_fails_its_slug_and_the_others_are_still_extracted() -> None:
    broken = Extractor(name="broken", instructions="x", schema={"invalid": True})
    driver = Driver([OBSERVED], ['{"city": "Lisbon"}'])
    result = run(driver, observation(), _extracting(broken, CITY))
    assert result.extracted_values == {"city": "Lisbon"}
    assert result.extraction_failures == (("broken", "invalid schema: not a schema"),)


def test_a_dynamic_schema_that_gives_none_asks_for_nothing() -> None:
    later = Extractor(name="later", instructions="x", schema=lambda _context: None)
    driver = Driver([OBSERVED])
    result = run(driver, observation(), _extracting(later))
    assert result.ok and driver.extraction_calls == [] and result.extraction_failures == ()


@pytest.mark.parametrize("offline", [True, False])
def test_the_offline_model_extracts_no_structured_values(offline: bool) -> None:
    driver = Driver([OBSERVED])
    result = run(driver, observation(offline=offline), _extracting(CITY),
                 model=ServingModel(structured_output=False))
    assert driver.extraction_calls == []
    assert result.extraction_failures == (("city", "the offline model does not extract structured values"),)


# -- inline values, on_extracted and where values are kept ------------------------------------------------------------

def test_on_extracted_replaces_a_value_and_its_failure_is_its_extractors_alone() -> None:
    seen: list[tuple[Any, Any]] = []

    def shout(context: Any) -> str:
        seen.append((context.previous, context.current))
        return str(context.current).upper()

    def explode(_context: Any) -> None:
        raise RuntimeError("boom")

    city = Extractor(name="city", instructions="x", schema={"type": "string"}, on_extracted=shout)
    age = Extractor(name="age", instructions="x", schema={"type": "integer"}, on_extracted=explode)
    driver = Driver([OBSERVED], ['{"city": "Lisbon", "age": 40}'], extracted={"city": "Porto"})
    result = run(driver, observation(), _extracting(city, age))
    assert result.extracted_values == {"city": "LISBON"}
    assert result.extraction_failures == (("age", "onExtracted failed: RuntimeError: boom"),)
    assert seen == [("Porto", "Lisbon")]


def test_a_value_kept_out_of_the_metadata_still_reaches_on_extracted() -> None:
    seen: list[Any] = []
    private = Extractor(name="notes", instructions="x", metadata_key_path=False,
                        on_extracted=lambda context: seen.append(context.current))
    nested = Extractor(name="topic", instructions="x", metadata_key_path="extracted.profile.topic")
    answer = f"{OBSERVED}\n<notes>private</notes>\n<topic>tea</topic>"
    result = run(Driver([answer]), observation(), _extracting(private, nested))
    assert result.extracted_values == {"profile.topic": "tea"}
    assert seen == ["private"]


def test_the_prior_values_shown_to_the_observer_come_from_each_storage_key() -> None:
    topic = Extractor(name="topic", instructions="x", metadata_key_path="extracted.profile.topic")
    driver = Driver([OBSERVED], extracted={"profile.topic": "coffee", "topic": "stale"})
    run(driver, observation(), _extracting(topic))
    task = driver.calls[0].task
    assert task is not None and task.prior_extracted == {"topic": "coffee"}


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": 1}', ({"a": 1}, "")),
    ('```json\n{"a": 1}\n```', ({"a": 1}, "")),
    ("   ", (None, "empty answer")),
    ('"a"', (None, "a JSON str, not an object")),
])
def test_an_extraction_answer_is_one_json_object_possibly_fenced(text: str, expected: tuple[Any, str]) -> None:
    assert parse_json_object(text) == expected
