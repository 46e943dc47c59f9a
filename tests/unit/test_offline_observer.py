"""The offline Observer: what it keeps of a conversation, in the format the parser reads.

Planted facts are drawn by the conversation shapes' own generator (``om_stream.replay.facts``: names, codes,
amounts, versions, dates, preferences, corrections) and buried among filler sentences (``om_stream.replay.prose``),
so nothing here can pass by recognising a sentence it was written for.
"""

from __future__ import annotations

import random
import re
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from om_stream.adapters.offline_dates import resolve_dates
from om_stream.adapters.offline_model import OfflineModel
from om_stream.adapters.offline_observer import observe
from om_stream.core.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.prompts.chat import ChatMessage
from om_stream.core.prompts.parsing import parse_observer_output
from om_stream.core.prompts.tasks import ObserverTask, ThreadBatch
from om_stream.ports import ChatRequest
from om_stream.replay import prose
from om_stream.replay.facts import FACT_KINDS, FactDraw, mentions

START = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)  # a Monday
_LINE = re.compile(r"^(?:Date: [A-Z][a-z]{2} \d{1,2}, \d{4}|\* (?:🔴|🟡|🟢|✅) \(\d{2}:\d{2}\) \S.*|  \* -> \S.*)$")


def said(index: int, role: str, text: str, *, at: datetime | None = None, thread: str = "t1") -> Message:
    return Message(message_id=f"m{index}", thread_id=thread, resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=at or START + timedelta(minutes=index), parts=(TextPart(text=text),))


def observed(*messages: Message, hints: bool = False, timezone: str = "UTC") -> str:
    text = observe(ObserverTask(messages=messages, want_hints=hints, timezone=timezone))
    parsed = parse_observer_output(text)
    assert not parsed.empty and not parsed.degenerate
    return parsed.observations


def line_with(observations: str, needle: str) -> str:
    found = [line for line in observations.splitlines() if mentions(line, needle)]
    assert found, f"{needle!r} not observed in:\n{observations}"
    return found[0]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), kind=st.sampled_from(FACT_KINDS), before=st.integers(0, 4),
       after=st.integers(0, 4))
def test_a_planted_fact_is_kept_word_for_word_and_marked_high(seed: int, kind: str, before: int,
                                                               after: int) -> None:
    rng = random.Random(seed)
    _drawn, fact = FactDraw(rng).statement(kind)  # type: ignore[arg-type]
    filler = [prose.sentence(rng, rng.randint(1, 3)).capitalize() + "." for _ in range(before + after)]
    text = " ".join([*filler[:before], fact.text, *filler[before:]])
    observations = observed(said(0, "user", text), said(1, "assistant", prose.paragraph(rng, 3)))
    line = line_with(observations, fact.needles[0])
    for needle in fact.needles:
        assert mentions(line, needle), (needle, line)
    assert line.startswith("* 🔴"), line


def test_a_fact_after_a_long_first_sentence_of_filler_is_kept() -> None:
    """Found by the property test above (seed 234): a first sentence of 190 characters that said nothing was
    preferred to the fact after it, which then no longer fit the line's budget."""
    test_a_planted_fact_is_kept_word_for_word_and_marked_high.hypothesis.inner_test(  # type: ignore[attr-defined]
        seed=234, kind="number", before=1, after=0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_a_correction_is_kept_with_its_new_value(seed: int) -> None:
    rng = random.Random(seed)
    update = FactDraw(rng).update()
    assert update is not None
    _kind, old, new = update
    observations = observed(said(0, "user", old.text), said(1, "assistant", prose.sentence(rng) + "."),
                            said(2, "user", f"{prose.sentence(rng).capitalize()}. {new.text}"))
    line = line_with(observations, new.needles[-1])
    assert line.startswith("* 🔴") and all(mentions(line, n) for n in new.needles), line


def test_a_request_to_remember_is_high_priority_and_says_so() -> None:
    observations = observed(said(0, "user", "Ok. Remember that the gate code for the depot is 4471."),
                            said(1, "user", "Please keep that in mind."))
    line = line_with(observations, "4471")
    assert line.startswith("* 🔴 (09:00) User asked the assistant to remember:")
    assert "Ok." not in line  # an acknowledgement is not part of the fact


def test_questions_are_recorded_as_questions_not_as_facts() -> None:
    observations = observed(said(0, "user", "Which option is cheaper in the long run?"))
    assert observations.splitlines()[1] == "* 🟡 (09:00) User asked: Which option is cheaper in the long run?"


def test_a_fact_stated_beside_a_question_makes_the_line_high() -> None:
    line = observed(said(0, "user", "We already run Redis 7.2 in production. Is that a problem?")).splitlines()[1]
    assert line.startswith("* 🔴 (09:00) User stated: We already run Redis 7.2 in production.")


def test_one_date_header_per_day_in_the_task_time_zone() -> None:
    rng = random.Random(7)
    moments = sorted(START + timedelta(hours=rng.randint(0, 24 * 6), minutes=rng.randint(0, 59)) for _ in range(40))
    messages = [said(i, "user" if i % 2 == 0 else "assistant", prose.sentence(rng).capitalize() + ".", at=moment)
                for i, moment in enumerate(moments)]
    for zone in ("UTC", "America/New_York", "Asia/Tokyo"):
        observations = observed(*messages, timezone=zone)
        headers = [line for line in observations.splitlines() if line.startswith("Date:")]
        days = sorted({m.created_at.astimezone(ZoneInfo(zone)).date() for m in messages})
        assert headers == [f"Date: {d:%b} {d.day}, {d.year}" for d in days]


def test_every_line_is_in_the_observer_format() -> None:
    rng = random.Random(3)
    messages = []
    for index in range(30):
        role = ("user", "assistant")[index % 2]
        messages.append(said(index, role, prose.paragraph(rng, rng.choice([1, 3, 8]))))
    call = Message(message_id="c1", thread_id="t1", resource_id="r1", role="assistant",
                   created_at=START + timedelta(minutes=40),
                   parts=(ToolCallPart(tool_call_id="k1", tool_name="fetch_metrics", args={"metric": "lag"}),))
    result = Message(message_id="c2", thread_id="t1", resource_id="r1", role="tool",
                     created_at=START + timedelta(minutes=41),
                     parts=(ToolResultPart(tool_call_id="k1", tool_name="fetch_metrics",
                                           result='{"max_lag": 1843, "partitions": 6}'),))
    observations = observed(*messages, call, result)
    for line in observations.splitlines():
        assert _LINE.match(line), line
    assert "fetch_metrics(metric=lag): max_lag=1843, partitions=6" in observations


def test_a_long_message_is_cut_down_to_its_telling_sentences() -> None:
    rng = random.Random(11)
    document = " ".join(prose.sentence(rng, 2).capitalize() + "." for _ in range(60))
    middle = len(document) // 2
    cut_at = document.index(". ", middle) + 2
    text = document[:cut_at] + "My locker code is 5521 and I use it daily. " + document[cut_at:]
    observations = observed(said(0, "user", text))
    assert "5521" in observations
    assert len(observations) < len(text) / 3


def test_replies_that_only_restate_the_user_are_not_recorded_again() -> None:
    observations = observed(said(0, "user", "I'm vegetarian, for the team dinner after the launch."),
                            said(1, "assistant", "Noted: you're vegetarian. I'll keep it in mind for the dinner."),
                            said(2, "user", "What partition count do you suggest?"),
                            said(3, "assistant", "Twelve partitions leave room for twelve workers."))
    assert "Noted" not in observations
    assert "  * -> Assistant: Twelve partitions leave room for twelve workers." in observations


def test_relative_dates_are_resolved_against_the_message_date() -> None:
    monday = START.date()
    assert resolve_dates("let's start the pilot next monday", monday) == ["meaning Feb 9, 2026"]
    assert resolve_dates("i fly out tomorrow", monday) == ["meaning Feb 3, 2026"]
    assert resolve_dates("the review is in 3 days", monday) == ["meaning Feb 5, 2026"]
    assert resolve_dates("the board meets on march 10", monday) == ["meaning Mar 10, 2026"]
    assert resolve_dates("we met on january 20", monday) == ["meaning Jan 20, 2027"]
    assert resolve_dates("we met on january 20, it was fun", monday) == ["meaning Jan 20, 2026"]
    assert resolve_dates("we move in september", monday) == ["estimated Sep 2026"]
    assert resolve_dates("let's talk next week", monday) == ["estimated week of Feb 9, 2026"]
    assert resolve_dates("the rotation changes every monday", monday) == []
    assert resolve_dates("the launch is on 2026-03-14", monday) == []
    line = observed(said(0, "user", "Let's start the pilot next Monday.")).splitlines()[1]
    assert line.endswith("(meaning Feb 9, 2026)")


def test_hints_name_the_latest_request_and_whether_the_assistant_replied() -> None:
    messages = (said(0, "user", "Draft three bullet points for the board slide."),
                said(1, "assistant", "Here they are: ordered, replayable, single writer."),
                said(2, "user", "Can you remind me what my deadlines are?"))
    parsed = parse_observer_output(observe(ObserverTask(messages=messages, want_hints=True)))
    assert parsed.current_task is not None
    assert "Can you remind me what my deadlines are?" in parsed.current_task
    assert "has not replied yet" in parsed.current_task
    assert parsed.suggested_response and "then wait for the user" in parsed.suggested_response
    replied = parse_observer_output(observe(ObserverTask(messages=(*messages, said(3, "assistant", "March 10.")),
                                                         want_hints=True)))
    assert replied.current_task and "waiting for the user" in replied.current_task
    carried = parse_observer_output(observe(ObserverTask(messages=(said(4, "assistant", "One more thing."),),
                                                         prior_current_task="Primary: plan the pilot",
                                                         want_hints=True)))
    assert carried.current_task == "Primary: plan the pilot"


def test_a_batch_with_nothing_but_a_reminder_still_answers() -> None:
    reminder = said(0, "system", "<system-reminder>2 hours later — Monday 2026-02-02 11:00 UTC</system-reminder>")
    observations = observed(reminder)
    assert "2 hours later" in observations
    assert "2 hours later" not in observed(reminder, said(1, "user", "Back again."))


def test_images_and_confirmations() -> None:
    photo = Message(message_id="m0", thread_id="t1", resource_id="r1", role="user", created_at=START,
                    parts=(TextPart(text="Here is the error."), ImagePart(url="https://x.test/crash.png",
                                                                           filename="crash.png")))
    observations = observed(photo, said(1, "assistant", "Restart the exporter with --reset."),
                            said(2, "user", "That worked, thanks!"))
    assert "(shared image: crash.png)" in observations
    assert "* ✅ (09:02) User confirmed it worked: Restart the exporter with --reset." in observations


def test_each_thread_of_a_resource_gets_its_own_block() -> None:
    task = ObserverTask(messages=(), want_hints=True, threads=(
        ThreadBatch(thread_id="a1", messages=(said(0, "user", "My name is Ingrid Novak.", thread="a"),)),
        ThreadBatch(thread_id="b2", messages=(said(1, "user", "What is a good phrase book?", thread="b"),))))
    parsed = parse_observer_output(observe(task), multi_thread=True)
    assert parsed.per_thread is not None and set(parsed.per_thread) == {"a1", "b2"}
    assert "Ingrid Novak" in parsed.per_thread["a1"].observations
    assert parsed.per_thread["b2"].current_task and "phrase book" in parsed.per_thread["b2"].current_task


def test_the_observer_is_deterministic_and_fast() -> None:
    rng = random.Random(5)
    messages = tuple(said(i, ("user", "assistant")[i % 2], prose.paragraph(rng, rng.choice([1, 2, 4])))
                     for i in range(400))
    task = ObserverTask(messages=messages[:8], want_hints=True)
    assert observe(task) == observe(task)
    began = time.process_time()
    for start in range(0, len(messages), 8):
        observe(ObserverTask(messages=messages[start:start + 8], want_hints=True))
    per_message = (time.process_time() - began) / len(messages)
    assert per_message < 0.001, f"{per_message * 1000:.3f} ms per message"


@pytest.mark.parametrize("text", ["ok", "thanks!", "nice"])
def test_a_bare_acknowledgement_is_minor(text: str) -> None:
    assert observed(said(0, "user", text)).splitlines()[1].startswith("* 🟢")


async def test_the_model_answers_observer_tasks_with_usage() -> None:
    task = ObserverTask(messages=(said(0, "user", "My passport expires on 2028-09-12."),))
    response = await OfflineModel(len).complete(ChatRequest(role="observer", model="offline", task=task,
                                                            messages=(ChatMessage(role="user", content="abc"),)))
    assert response.usage.input_tokens == 3 and response.usage.output_tokens == len(response.text)
    assert "2028-09-12" in response.text and response.cost_usd == 0.0
