"""§2f of the reference: resource scope, where every thread of a resource shares one observation log.

Through the simulator (batching arithmetic) and the embedded ``Memory`` with a ``FunctionModel`` Observer that
answers one ``<thread>`` section per thread it is shown.
"""

from __future__ import annotations

import re

from om_stream import Memory
from om_stream.core.commands import RequestObservation
from om_stream.core.labels import thread_label
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message
from tests.support.engine_cases import TEN, events
from tests.support.sim import Sim

_THREAD = re.compile(r'<thread id="([^"]+)">(.*?)</thread>', re.DOTALL)


def observe_threads(request: ChatRequest) -> str:
    """One section per thread shown, with a line per message and that thread's own hints and title."""
    if request.role == "reflector":
        return "<observations>\n* 🔴 (09:00) condensed\n</observations>"
    sections = []
    for label, body in _THREAD.findall(request.messages[2].content):
        lines = "\n".join(f"* 🔴 (09:00) saw {i}" for i in re.findall(r"\[id=(\w+)\]", body))
        sections.append(f'<thread id="{label}">\nDate: Mar 2, 2026\n{lines}\n'
                        f"<current-task>task of {label}</current-task>\n"
                        f"<thread-title>Topic {label}</thread-title>\n</thread>")
    return "<observations>\n" + "\n".join(sections) + "\n</observations>"


def resource(**observation: object) -> dict[str, object]:
    return {"scope": "resource", "model": "openai/gpt-5-mini",
            "observation": {"messageTokens": 10_000, **observation}, "reflection": {"observationTokens": 100_000}}


def observations(sim: Sim) -> list[RequestObservation]:
    return [r for r in sim.requests if isinstance(r, RequestObservation)]


# -- 2f.1 one record, no buffering, the whole resource counts -------------------------------------------------------

def test_all_threads_of_a_resource_count_towards_one_threshold_without_buffering() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 40}, "reflection": {"observationTokens": 10_000}})
    sim.say("a", "user", TEN)
    sim.say("b", "user", TEN)
    sim.say("c", "user", TEN)
    assert len(sim.states) == 1 and not observations(sim)
    sim.say("a", "assistant", TEN)  # 40 tokens across three threads
    assert observations(sim) and all(r.kind == "sync" for r in observations(sim))
    assert not events(sim, "data-om-buffering-start")


# -- 2f.2 which threads, in which batches ---------------------------------------------------------------------------

def test_the_largest_threads_are_observed_first_until_the_threshold_is_covered() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 60, "maxTokensPerBatch": 1_000},
               "reflection": {"observationTokens": 10_000}})
    sim.say("small", "user", TEN)
    for _ in range(3):
        sim.say("big", "user", TEN)
    sim.say("mid", "user", TEN)
    sim.say("mid", "assistant", TEN)  # 60: big (30) and mid (20) then small (10) would be needed
    (request,) = observations(sim)
    assert set(request.thread_ids) == {"big", "mid", "small"}
    sim.settle()
    sim.say("small", "user", TEN)
    for _ in range(5):
        sim.say("big", "user", TEN)
    sim.say("mid", "user", TEN)  # big alone (50) nearly covers it; the crossing thread is included
    chosen = observations(sim)[-1].thread_ids
    assert "big" in chosen and len(chosen) < 3


def test_threads_go_into_batches_of_whole_threads_under_max_tokens_per_batch() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 100, "maxTokensPerBatch": 25},
               "reflection": {"observationTokens": 10_000}})
    for thread in ("a", "b", "c"):
        sim.say(thread, "user", TEN)
        sim.say(thread, "assistant", TEN)
    sim.say("d", "user", " ".join(["w"] * 39))  # a 40-token thread: too big for a batch, a batch of its own
    batches = observations(sim)
    assert sorted(len(r.thread_ids) for r in batches) == [1, 1, 1, 1]
    assert all(len({sim.messages[m].thread_id for m in r.message_ids}) == 1 for r in batches)
    assert [r.message_tokens for r in batches if r.thread_ids == ("d",)] == [40]


def test_every_batch_is_shown_the_whole_resource_log() -> None:
    sim = Sim({"scope": "resource", "observation": {"messageTokens": 40, "maxTokensPerBatch": 25},
               "reflection": {"observationTokens": 10_000}})
    for thread in ("a", "b"):
        sim.say(thread, "user", TEN)
        sim.say(thread, "assistant", TEN)
    sim.settle()
    log = tuple(s.id for s in sim.state("a").log)
    assert log
    for thread in ("a", "b"):
        sim.say(thread, "user", TEN)
        sim.say(thread, "assistant", TEN)
    later = observations(sim)[-2:]
    assert len(later) == 2 and all(r.previous_segment_ids == log for r in later)


async def test_the_observer_sees_each_thread_under_its_label_with_its_own_prior_metadata() -> None:
    model = FunctionModel(observe_threads)
    async with Memory(resource(), model=model, clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "about dogs", thread="a", resource="u1"))
        await om.add_message(message(2, "about cats", thread="b", resource="u1"))
        await om.observe("a", "u1", force=True)
        await om.settle()
        await om.add_message(message(3, "more dogs", thread="a", resource="u1"))
        await om.add_message(message(4, "more cats", thread="b", resource="u1"))
        await om.observe("a", "u1", force=True)
        await om.settle()
    first, second = model.calls("observer")
    labels = {t: thread_label(t, True) for t in "ab"}
    assert all(f'<thread id="{labels[t]}">' in first.messages[2].content for t in "ab")
    assert '<thread id="a">' not in first.messages[2].content  # obscured by default in resource scope
    task = second.messages[1].content
    for t in "ab":
        assert f'<thread id="{labels[t]}">\n<current-task>task of {labels[t]}</current-task>' in task


async def test_a_structured_value_of_a_multi_thread_observation_goes_to_each_observed_thread() -> None:
    from pydantic import BaseModel

    from om_stream.core.extractors import Extractor

    class Profile(BaseModel):
        name: str | None = None

    def answer(request: ChatRequest) -> str:
        return '{"profile": {"name": "Ada"}}' if request.role == "extractor" else observe_threads(request)

    model = FunctionModel(answer)
    profile = Extractor(name="profile", instructions="x", schema=Profile)
    async with Memory(resource(extract=[profile]), model=model, clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "I am Ada", thread="a", resource="u1"))
        await om.add_message(message(2, "hello", thread="b", resource="u1"))
        await om.observe("a", "u1", force=True)
        await om.settle()
        values = {t: (await om.store.get_thread_metadata(t)).extracted for t in "ab"}
    assert len(model.calls("observer")) == 1 and len(model.calls("extractor")) == 1
    assert values == {"a": {"profile": {"name": "Ada"}}, "b": {"profile": {"name": "Ada"}}}


# -- 2f.3 what the observations do to the log and the threads -------------------------------------------------------

async def test_each_threads_observations_are_appended_in_their_own_thread_section() -> None:
    model = FunctionModel(observe_threads)
    async with Memory(resource(), model=model, clock=ManualClock(START_MS)) as om:
        for i, thread in enumerate("abab", start=1):
            await om.add_message(message(i, f"turn {i}", thread=thread, resource="u1"))
            if i % 2 == 0:
                await om.observe("a", "u1", force=True)
                await om.settle()
        context = await om.context("a")
        state = om.state("a", "u1")
    assert context is not None and state is not None and len(state.log) == 2
    labels = [thread_label(t, True) for t in "ab"]
    sections = _THREAD.findall(context.observations)
    assert [label for label, _ in sections] == labels * 2  # appended, never merged into an earlier section
    assert "saw m1" in sections[0][1] and "saw m3" in sections[2][1]


async def test_each_thread_gets_its_own_hints_title_and_title_event() -> None:
    seen: list[object] = []
    model = FunctionModel(observe_threads)
    async with Memory({**resource(threadTitle=True)}, model=model, clock=ManualClock(START_MS),
                      on_event=lambda e, _i: seen.append(e)) as om:
        await om.add_message(message(1, "about dogs", thread="a", resource="u1"))
        await om.add_message(message(2, "about cats", thread="b", resource="u1"))
        await om.observe("a", "u1", force=True)
        await om.settle()
        contexts = {t: await om.context(t) for t in "ab"}
    for thread in "ab":
        label = thread_label(thread, True)
        context = contexts[thread]
        assert context is not None
        assert context.hints.current_task == f"task of {label}"
        assert context.thread_title == f"Topic {label}"
    updates = [e for e in seen if e.event_type == "data-om-thread-update"]
    assert sorted(e.thread_id for e in updates) == ["a", "b"]  # type: ignore[attr-defined]


async def test_a_thread_the_observer_left_out_gets_no_section_and_counts_as_observed() -> None:
    def first_thread_only(request: ChatRequest) -> str:
        answer = observe_threads(request)
        sections = _THREAD.findall(answer)
        label, body = sections[0]
        return f'<observations>\n<thread id="{label}">{body}</thread>\n</observations>'

    async with Memory(resource(), model=FunctionModel(first_thread_only), clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "about dogs", thread="a", resource="u1"))
        await om.add_message(message(2, "about cats", thread="b", resource="u1"))
        await om.observe("a", "u1", force=True)
        await om.settle()
        context = await om.context("b")
        state = om.state("a", "u1")
    assert context is not None and state is not None
    assert [label for label, _ in _THREAD.findall(context.observations)] == [thread_label("a", True)]
    assert state.unobserved == []


# -- 2f.4 the other conversations -----------------------------------------------------------------------------------

async def test_an_agent_sees_what_the_user_said_in_their_other_threads_and_is_not_observed_yet() -> None:
    async with Memory(resource(), clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "My dog is called Biscuit.", thread="a", resource="u1"))
        await om.add_message(message(2, "x" * 2_000, thread="a", resource="u1"))
        context = await om.add_message(message(3, "What is my dog's name?", thread="b", resource="u1"))
    assert context is not None
    block = next(b for b in context.system_blocks if "<other-conversation" in b)
    label = thread_label("a", True)
    assert f'<other-conversation id="{label}">' in block and "Biscuit" in block
    assert "What is my dog's name?" not in block  # the thread's own messages are its raw messages
    longest = max(len(line) for line in block.splitlines())
    assert longest < 600  # each part is cut to a glimpse
    assert [m.message_id for m in context.messages] == ["m3"]
