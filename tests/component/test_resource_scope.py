"""Resource scope through the embedded ``Memory``: what the agent of one thread sees of the user's other threads,
and what each thread of a shared observation keeps (its title, hints and extracted values)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from om_stream.core.extractors import Extractor
from om_stream.core.labels import thread_label
from om_stream.core.messages import Message, TextPart
from om_stream.core.prompts.tasks import ObserverTask
from om_stream.ports import ChatRequest
from om_stream.runtime.embedded import ManualClock, Memory
from om_stream.testing import FunctionModel

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
OTHER_BLOCK = re.compile(r'<other-conversation id="([^"]+)">\n(.*?)\n</other-conversation>', re.DOTALL)


def said(index: int, thread: str, text: str, role: str = "user") -> Message:
    return Message(message_id=f"m{index}", thread_id=thread, resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=index), parts=(TextPart(text=text),))


def other_conversations(blocks: list[str]) -> dict[str, str]:
    return {label: body for block in blocks for label, body in OTHER_BLOCK.findall(block)}


async def test_a_thread_sees_what_the_user_just_said_in_another_thread_of_the_resource() -> None:
    async with Memory({"scope": "resource"}, clock=ManualClock(int(START.timestamp() * 1000))) as om:
        first = await om.add_message(said(0, "a", "My dog is called Biscuit."))
        assert first is not None and other_conversations(first.system_blocks) == {}
        context = await om.add_message(said(1, "b", "What is my dog's name?"))
        assert context is not None
        others = other_conversations(context.system_blocks)
        label = thread_label("a", om.config.obscure_thread_ids)
        assert list(others) == [label]
        assert "My dog is called Biscuit." in others[label]
        assert "What is my dog's name?" not in others[label]  # the thread's own messages stay its raw messages
        assert [m.message_id for m in context.messages] == ["m1"]


async def test_each_part_of_another_thread_is_cut_and_obscured_ids_stay_obscured() -> None:
    long_text = "Biscuit " + "chews slippers " * 100
    async with Memory({"scope": "resource", "obscureThreadIds": True},
                      clock=ManualClock(int(START.timestamp() * 1000))) as om:
        await om.add_message(said(0, "thread-a", long_text))
        await om.add_message(said(1, "thread-a", "He is three.", role="assistant"))
        context = await om.add_message(said(2, "thread-b", "How old is my dog?"))
        assert context is not None
        others = other_conversations(context.system_blocks)
        assert list(others) == [thread_label("thread-a", True)]
        body = others[thread_label("thread-a", True)]
        assert "thread-a" not in "\n".join(context.system_blocks)
        assert "He is three." in body
        longest = max(len(line) for line in body.splitlines())
        assert longest < 560 < len(long_text)  # "User (09:00): " and the cut mark around 500 characters


async def test_other_threads_leave_the_context_once_they_are_observed() -> None:
    async with Memory({"scope": "resource", "observation": {"messageTokens": 1000}},
                      clock=ManualClock(int(START.timestamp() * 1000))) as om:
        await om.add_message(said(0, "a", "My dog is called Biscuit."))
        await om.add_message(said(1, "b", "What is my dog's name?"))
        await om.observe("b", "r1", force=True)
        await om.settle()
        context = await om.add_message(said(2, "b", "And his age?"))
        assert context is not None
        assert other_conversations(context.system_blocks) == {}
        assert "Biscuit" in context.observations


# -- per-thread metadata ---------------------------------------------------------------------------------------------

def _two_thread_answer(request: ChatRequest) -> str:
    task = request.task
    assert isinstance(task, ObserverTask) and task.threads
    blocks = []
    for batch in task.threads:
        topic = "Dog names" if any("dog" in m.text for m in batch.messages) else "Trip planning"
        blocks.append(f'<thread id="{batch.thread_id}">\nDate: Mar 2, 2026\n* 🔴 (09:00) {topic} came up.\n'
                      f"<current-task>Primary: help with {topic.lower()}</current-task>\n"
                      f"<thread-title>{topic}</thread-title>\n<mood>{'calm' if 'Dog' in topic else 'eager'}</mood>\n"
                      "</thread>")
    return "<observations>\n" + "\n".join(blocks) + "\n</observations>"


async def test_one_observation_of_several_threads_gives_each_thread_its_title_hints_and_values() -> None:
    model = FunctionModel(_two_thread_answer)
    events: list[Any] = []
    config = {"scope": "resource", "observation": {"messageTokens": 1000, "threadTitle": True,
                                                   "extract": [Extractor(name="mood", instructions="the mood")]}}
    async with Memory(config, model=model, clock=ManualClock(int(START.timestamp() * 1000)),
                      on_event=lambda event, _event_id: events.append(event)) as om:
        await om.add_message(said(0, "a", "My dog is called Biscuit."))
        await om.add_message(said(1, "b", "I plan a trip to Lisbon."))
        await om.observe("a", "r1", force=True)
        await om.settle()
        assert len(model.calls("observer")) == 1
        a = await om.store.get_thread_metadata("a")
        b = await om.store.get_thread_metadata("b")
        assert (a.title, a.current_task, a.extracted.get("mood")) == ("Dog names", "Primary: help with dog names",
                                                                     "calm")
        assert (b.title, b.current_task, b.extracted.get("mood")) == ("Trip planning",
                                                                     "Primary: help with trip planning", "eager")
        updates = sorted((e.thread_id, e.new_title) for e in events if e.event_type == "data-om-thread-update")
        assert updates == [("a", "Dog names"), ("b", "Trip planning")]
        context_b = await om.add_message(said(2, "b", "Which month is best?"))
        assert context_b is not None
        assert context_b.thread_title == "Trip planning"
        assert context_b.hints.current_task == "Primary: help with trip planning"


async def test_the_observer_is_given_each_threads_prior_metadata() -> None:
    model = FunctionModel(_two_thread_answer)
    config = {"scope": "resource", "observation": {"messageTokens": 1000, "threadTitle": True,
                                                   "extract": [Extractor(name="mood", instructions="the mood")]}}
    async with Memory(config, model=model, clock=ManualClock(int(START.timestamp() * 1000))) as om:
        await om.add_message(said(0, "a", "My dog is called Biscuit."))
        await om.add_message(said(1, "b", "I plan a trip to Lisbon."))
        await om.observe("a", "r1", force=True)
        await om.settle()
        await om.add_message(said(2, "a", "He likes the beach."))
        await om.add_message(said(3, "b", "In May, probably."))
        await om.observe("a", "r1", force=True)
        await om.settle()
        second = model.calls("observer")[1]
        task = second.task
        assert isinstance(task, ObserverTask)
        a, b = (thread_label(t, om.config.obscure_thread_ids) for t in ("a", "b"))
        priors = {batch.thread_id: (batch.prior_thread_title, batch.prior_current_task, batch.prior_extracted)
                  for batch in task.threads}
        assert priors == {a: ("Dog names", "Primary: help with dog names", {"mood": "calm"}),
                          b: ("Trip planning", "Primary: help with trip planning", {"mood": "eager"})}
        prompt = second.messages[1].content
        metadata = prompt.split("## Prior thread metadata", 1)[1]
        thread_b = metadata.split(f'<thread id="{b}">', 1)[1].split("</thread>", 1)[0]
        assert "<thread-title>Trip planning</thread-title>" in thread_b and "<mood>eager</mood>" in thread_b

