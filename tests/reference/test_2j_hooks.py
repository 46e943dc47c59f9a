"""§2j of the reference: lifecycle hooks, and the usage and provider metadata they report.

Through the embedded ``Memory`` with ``ObserveHooks`` and a ``FunctionModel`` answering with whole responses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from om_stream import Memory, ObserveHooks
from om_stream.core.extractors import Extractor
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse, Usage
from om_stream.runtime.cycles import CycleHookContext
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, CycleHookContext]] = []

    def hooks(self, *, failing: bool = False) -> ObserveHooks:
        def record(name: str) -> Callable[[CycleHookContext], None]:
            def hook(context: CycleHookContext) -> None:
                self.calls.append((name, context))
                if failing:
                    raise RuntimeError("a broken hook")
            return hook
        return ObserveHooks(on_observation_start=record("obs-start"), on_observation_end=record("obs-end"),
                            on_reflection_start=record("refl-start"), on_reflection_end=record("refl-end"))

    def named(self, name: str) -> list[CycleHookContext]:
        return [c for n, c in self.calls if n == name]


def priced(request: ChatRequest) -> ChatResponse:
    text = "{}" if request.role == "extractor" else observe_all(request)
    return ChatResponse(text=text, model="acme/m", usage=Usage(100, 10), cost_usd=0.5,
                        provider_metadata={"gateway": {"cost": 0.5, "role": request.role}})


async def run(options: dict[str, Any], answer: Callable[[ChatRequest], Any], recorder: Recorder, *,
              failing: bool = False, buffer: bool = False, reflect: bool = False) -> Memory:
    om = Memory({"model": "openai/gpt-5-mini", "hooks": recorder.hooks(failing=failing), **options},
                model=FunctionModel(answer), clock=ManualClock(START_MS))
    async with om:
        for i in range(1, 7 if buffer else 3):
            await om.add_message(message(i, "word " * 20, "user" if i % 2 else "assistant"))
            await om.settle()
        if not buffer:
            await om.observe("t1", force=True)
            await om.settle()
        if reflect:
            await om.reflect("t1")
            await om.settle()
    return om


async def test_hooks_bracket_every_cycle_with_its_thread_resource_and_trigger() -> None:
    recorder = Recorder()
    await run({}, priced, recorder, reflect=True)
    (start,) = recorder.named("obs-start")
    (end,) = recorder.named("obs-end")
    assert (start.thread_id, start.resource_id, start.trigger) == ("t1", "r1", "manual")
    assert end.cycle_id == start.cycle_id and end.error is None
    assert [c.trigger for c in recorder.named("refl-start")] == ["manual"]
    assert len(recorder.named("refl-end")) == 1


async def test_background_cycles_report_the_async_buffer_trigger() -> None:
    recorder = Recorder()
    await run({"observation": {"messageTokens": 1_000, "bufferTokens": 40}}, priced, recorder, buffer=True)
    starts = recorder.named("obs-start")
    assert starts and {c.trigger for c in starts} == {"async-buffer"}
    assert len(recorder.named("obs-end")) == len(starts)


async def test_the_end_hook_reports_usage_and_the_providers_metadata() -> None:
    recorder = Recorder()
    await run({}, priced, recorder)
    (end,) = recorder.named("obs-end")
    assert end.usage == Usage(100, 10)
    assert end.provider_metadata == {"gateway": {"cost": 0.5, "role": "observer"}}
    assert end.cost_usd == 0.5


async def test_usage_adds_up_every_call_of_a_cycle_including_structured_extraction() -> None:
    recorder = Recorder()
    profile = Extractor(name="profile", instructions="x", schema={"type": "object"})
    await run({"observation": {"extract": [profile]}}, priced, recorder)
    (end,) = recorder.named("obs-end")
    assert end.usage == Usage(200, 20) and end.calls == 2
    assert end.provider_metadata["gateway"]["role"] == "extractor"  # the last call that had some


async def test_a_failed_background_cycle_reports_its_error_on_the_end_hook_and_raises_nothing() -> None:
    def down(request: ChatRequest) -> str:
        raise ModelError("HTTP 503 from the provider", kind="server_error", status_code=503)

    recorder = Recorder()
    await run({"observation": {"messageTokens": 1_000, "bufferTokens": 40}}, down, recorder, buffer=True)
    ends = recorder.named("obs-end")
    assert ends and all(e.error and "503" in e.error and e.usage is None for e in ends)


async def test_a_hook_that_raises_never_fails_the_cycle() -> None:
    recorder = Recorder()
    om = await run({}, priced, recorder, failing=True)
    state = om.state("t1")
    assert state is not None and state.log, "the observation was committed"
    assert len(recorder.named("obs-end")) == 1


async def test_an_async_hook_is_awaited_before_the_cycle_is_applied() -> None:
    import asyncio

    finished: list[str] = []

    async def slow_end(context: CycleHookContext) -> None:
        await asyncio.sleep(0.01)
        finished.append(context.cycle_id)

    async with Memory({"model": "openai/gpt-5-mini", "hooks": ObserveHooks(on_observation_end=slow_end)},
                      model=FunctionModel(priced), clock=ManualClock(START_MS)) as om:
        await om.add_message(message(1, "hello"))
        await om.observe("t1", force=True)
        await om.settle()
        state = om.state("t1")
    assert state is not None and state.log and len(finished) == 1
