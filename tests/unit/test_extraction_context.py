"""What extractors are given and how their values are read (``core.cycles.extraction``): the observed messages
and the active log reach ``on_extracted``; a value written as JSON text is read as JSON before its schema judges
it; a multi-thread observation gives each thread its own hints, title and values."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from om_stream.core.commands import ThreadPrior
from om_stream.core.cycles import CycleStep, ReadExtracted
from om_stream.core.extractors import ExtractionContext, Extractor
from om_stream.core.labels import thread_label
from om_stream.core.messages import TextPart
from om_stream.core.prompts.parsing import parse_observer_output
from om_stream.core.prompts.tasks import ObserverTask
from tests.support.config_options import resolve
from tests.support.cycle_driver import OBSERVED, Driver, message, observation, reflected, reflection, run


def _extracting(*extractors: Extractor, **options: Any) -> Any:
    return resolve({"observation": {"extract": list(extractors)}, "reflection": {"extract": list(extractors)},
                    **options})


# -- on_extracted's context ---------------------------------------------------------------------------------------

def test_on_extracted_is_given_the_observed_messages_and_the_active_log() -> None:
    seen: list[ExtractionContext] = []
    mood = Extractor(name="mood", instructions="x", on_extracted=seen.append)
    later = message("m2").model_copy(update={"parts": (TextPart(text="Tea again, please."),)})
    driver = Driver([f"{OBSERVED}\n<mood>cheerful</mood>"], messages={"m1": message(), "m2": later},
                    segments={"p1": "* 🔴 (08:00) User lives in Porto."})
    run(driver, observation(message_ids=("m1", "m2"), previous=("p1",)), _extracting(mood))
    assert len(seen) == 1
    context = seen[0]
    assert [m.message_id for m in context.observed_messages] == ["m1", "m2"]
    assert context.active_observations == "* 🔴 (08:00) User lives in Porto."
    assert "green tea" in context.raw_observations and context.current == "cheerful"


def test_on_extracted_after_a_reflection_is_given_the_log_it_condensed() -> None:
    seen: list[ExtractionContext] = []
    mood = Extractor(name="mood", instructions="x", on_extracted=seen.append)
    driver = Driver([reflected(5) + "\n<mood>calm</mood>"], segments={"s1": "* 🔴 a\n* 🟡 b\n* 🟡 c"})
    run(driver, reflection(), _extracting(mood))
    assert len(seen) == 1
    assert seen[0].active_observations == "* 🔴 a\n* 🟡 b\n* 🟡 c"
    assert seen[0].observed_messages == ()


# -- values are read as JSON first ----------------------------------------------------------------------------------

AGE = Extractor(name="age", instructions="The user's age.", schema={"type": "integer"})
CITY = Extractor(name="city", instructions="Where the user lives.", schema={"type": "string"})


class Profile(BaseModel):
    name: str
    age: int | None = None


PROFILE = Extractor(name="profile", instructions="The user's profile.", schema=Profile)


def test_a_number_written_as_text_is_read_as_the_number() -> None:
    driver = Driver([OBSERVED], ['{"age": "7", "city": "7"}'])
    result = run(driver, observation(), _extracting(AGE, CITY))
    assert result.extraction_failures == ()
    assert result.extracted_values == {"age": 7, "city": "7"}  # a string schema keeps the string


def test_an_object_written_as_json_text_is_read_as_the_object() -> None:
    driver = Driver([OBSERVED], ['{"profile": "{\\"name\\": \\"Ada\\", \\"age\\": 36}"}'])
    result = run(driver, observation(), _extracting(PROFILE))
    assert result.extracted_values == {"profile": {"name": "Ada", "age": 36}}


def test_text_that_is_neither_json_nor_the_schemas_type_still_fails_its_slug() -> None:
    driver = Driver([OBSERVED], ['{"age": "seven"}'])
    result = run(driver, observation(), _extracting(AGE))
    assert result.extracted_values == {}
    assert [slug for slug, _ in result.extraction_failures] == ["age"]


# -- several threads in one observation --------------------------------------------------------------------------------

@dataclass
class ThreadsDriver(Driver):
    """A driver whose threads each have their own stored values."""

    by_thread: dict[str, dict[str, Any]] = field(default_factory=dict)

    def answer(self, step: CycleStep) -> Any:
        if isinstance(step, ReadExtracted):
            self.steps.append(step)
            return self.by_thread.get(step.thread_id, {})
        return super().answer(step)


MOOD = Extractor(name="mood", instructions="The user's mood.")


def _two_threads(config: Any) -> tuple[str, str]:
    return thread_label("ta", config.obscure_thread_ids), thread_label("tb", config.obscure_thread_ids)


def test_each_thread_of_a_multi_thread_answer_gets_its_own_hints_title_and_values() -> None:
    config = resolve({"scope": "resource", "observation": {"bufferTokens": False, "threadTitle": True,
                                                           "extract": [MOOD]}})
    a, b = _two_threads(config)
    answer = (f'<observations>\n<thread id="{a}">\n* 🔴 (09:00) User has a dog.\n<current-task>Dog care</current-task>'
              f"\n<thread-title>Dog care</thread-title>\n<mood>calm</mood>\n</thread>\n"
              f'<thread id="{b}">\n* 🔴 (09:01) User plans a trip.\n<thread-title>Trip plans</thread-title>\n'
              f"</thread>\n</observations>\n<mood>curious</mood>")
    driver = ThreadsDriver([answer], messages={"m1": message("m1", "ta"), "m2": message("m2", "tb")})
    result = run(driver, observation(message_ids=("m1", "m2"), thread_ids=("ta", "tb")), config)
    assert set(result.thread_metadata) == {"ta", "tb"}
    ta, tb = result.thread_metadata["ta"], result.thread_metadata["tb"]
    assert (ta.current_task, ta.thread_title, ta.extracted_values) == ("Dog care", "Dog care", {"mood": "calm"})
    # a value written for the whole answer is every thread's unless the thread wrote its own
    assert (tb.current_task, tb.thread_title, tb.extracted_values) == (None, "Trip plans", {"mood": "curious"})
    assert (result.current_task, result.thread_title) == ("Dog care", "Dog care")  # the first thread's


def test_on_extracted_runs_once_per_thread_with_that_threads_previous_value_and_messages() -> None:
    seen: list[tuple[str | None, Any, Any, tuple[str, ...]]] = []

    def record(context: ExtractionContext) -> None:
        seen.append((context.thread_id, context.previous, context.current,
                     tuple(m.message_id for m in context.observed_messages)))

    mood = Extractor(name="mood", instructions="x", on_extracted=record)
    config = resolve({"scope": "resource", "observation": {"bufferTokens": False, "extract": [mood]}})
    a, b = _two_threads(config)
    answer = (f'<observations>\n<thread id="{a}">\n* 🔴 A.\n<mood>calm</mood>\n</thread>\n'
              f'<thread id="{b}">\n* 🔴 B.\n<mood>eager</mood>\n</thread>\n</observations>')
    driver = ThreadsDriver([answer], messages={"m1": message("m1", "ta"), "m2": message("m2", "tb")},
                           by_thread={"ta": {"mood": "sleepy"}, "tb": {"mood": "bored"}})
    run(driver, observation(message_ids=("m1", "m2"), thread_ids=("ta", "tb")), config)
    assert seen == [("ta", "sleepy", "calm", ("m1",)), ("tb", "bored", "eager", ("m2",))]


def test_the_observer_is_shown_each_threads_prior_metadata() -> None:
    config = resolve({"scope": "resource", "observation": {"bufferTokens": False, "threadTitle": True,
                                                           "extract": [MOOD]}})
    a, b = _two_threads(config)
    answer = f'<observations>\n<thread id="{a}">\n* 🔴 A.\n</thread>\n</observations>'
    driver = ThreadsDriver([answer], messages={"m1": message("m1", "ta"), "m2": message("m2", "tb")},
                           by_thread={"ta": {"mood": "calm"}, "tb": {"mood": "eager"}})
    request = replace(observation(message_ids=("m1", "m2"), thread_ids=("ta", "tb")), thread_priors=(
        ThreadPrior("ta", current_task="Walk the dog", title="Dog care"),
        ThreadPrior("tb", suggested_response="Ask about dates", title="Trip plans")))
    run(driver, request, config)
    task = driver.calls[0].task
    assert isinstance(task, ObserverTask)
    shown = {t.thread_id: (t.prior_current_task, t.prior_suggested_response, t.prior_thread_title,
                           t.prior_extracted) for t in task.threads}
    assert shown == {a: ("Walk the dog", None, "Dog care", {"mood": "calm"}),
                     b: (None, "Ask about dates", "Trip plans", {"mood": "eager"})}
    assert "inside each <thread> block" in driver.calls[0].messages[0].content  # where its values go
    prompt = driver.calls[0].messages[1].content
    section = prompt.split(f'<thread id="{b}">', 1)[1].split("</thread>", 1)[0]
    assert "<suggested-response>Ask about dates</suggested-response>" in section
    assert "<thread-title>Trip plans</thread-title>" in section and "<mood>eager</mood>" in section


def test_a_multi_thread_answer_keeps_values_written_inside_a_thread_for_that_thread() -> None:
    text = ('<observations>\n<thread id="a1">\n* 🔴 A.\n<mood>calm</mood>\n</thread>\n'
            '<thread id="b2">\n* 🔴 B.\n</thread>\n</observations>\n<mood>eager</mood>')
    parsed = parse_observer_output(text, extractors=(MOOD,), multi_thread=True)
    assert parsed.per_thread is not None
    assert parsed.per_thread["a1"].extracted == {"mood": "calm"}
    assert parsed.per_thread["b2"].extracted == {}
    assert parsed.extracted == {"mood": "eager"}
    assert "<mood>" not in parsed.observations
