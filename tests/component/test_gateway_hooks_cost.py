"""Lifecycle hooks, usage and cost of observation/reflection cycles, through the embedded runner, the gateway,
litellm and the fake OpenAI server."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from om_stream.adapters.gateway import ModelGateway, ModelPrice
from om_stream.core.config import ObserveHooks, OMConfig
from om_stream.core.events import OMEvent
from om_stream.core.messages import Message, TextPart
from om_stream.ports import Usage
from om_stream.runtime.cycles import CycleHookContext
from om_stream.runtime.embedded import ManualClock, Memory
from om_stream.testing import fake_openai
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI, RecordedRequest, Reply, Response
from om_stream.testing.fake_openai import Usage as ServerUsage
from tests.support.scripted_provider import OBSERVED, REFLECTED, START, fast_settings


def gateway(srv: FakeOpenAI, **changes: Any) -> ModelGateway:
    return ModelGateway(fast_settings(srv, **changes))


def message(i: int, text: str = "My name is Ada and I live in Lisbon.", role: str = "user") -> Message:
    return Message(message_id=f"m{i}", thread_id="t1", resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=i), parts=(TextPart(text=text),))


class Recorder:
    """Every hook, recording what it received."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, CycleHookContext]] = []

    def hooks(self) -> ObserveHooks:
        return ObserveHooks(on_observation_start=lambda c: self.calls.append(("observation_start", c)),
                            on_observation_end=lambda c: self.calls.append(("observation_end", c)),
                            on_reflection_start=lambda c: self.calls.append(("reflection_start", c)),
                            on_reflection_end=lambda c: self.calls.append(("reflection_end", c)))

    def named(self, name: str) -> list[CycleHookContext]:
        return [c for n, c in self.calls if n == name]


def options(raw: dict[str, Any], hooks: ObserveHooks) -> OMConfig:
    return OMConfig.parse(raw).model_copy(update={"hooks": hooks})


async def manual_cycle(config: OMConfig, model: ModelGateway, *, reflect: bool = False,
                       events: list[OMEvent] | None = None) -> Memory:
    sink = events if events is not None else []
    async with Memory(config, model=model, clock=ManualClock(0), on_event=lambda e, _i: sink.append(e)) as om:
        await om.add_message(message(1))
        await om.add_message(message(2, "Nice to meet you, Ada.", "assistant"))
        await om.observe("t1", "r1", force=True)
        await om.settle()
        if reflect:
            await om.reflect("t1", "r1")
            await om.settle()
    return om


async def test_manual_observation_hooks_get_ids_trigger_usage_cost_and_provider_metadata(srv: FakeOpenAI) -> None:
    srv.default = lambda _r: Reply(OBSERVED, usage=ServerUsage(1000, 500, cached_tokens=200, reasoning_tokens=100))
    seen = Recorder()

    await manual_cycle(options({"model": "openai/gpt-5-mini"}, seen.hooks()), gateway(srv))

    (start,), (end,) = seen.named("observation_start"), seen.named("observation_end")
    assert (start.thread_id, start.resource_id, start.trigger, start.usage) == ("t1", "r1", "manual", None)
    assert (end.thread_id, end.resource_id, end.trigger, end.cycle_id) == ("t1", "r1", "manual", start.cycle_id)
    assert end.usage == Usage(input_tokens=1000, output_tokens=500, cached_input_tokens=200, reasoning_tokens=100)
    # cached input is billed at gpt-5-mini's cached rate: 800 * 0.25/M + 200 * 0.025/M + 500 * 2/M
    assert end.cost_usd == pytest.approx(0.001205)
    assert end.provider_metadata["cost_source"] == "price_map"
    assert end.provider_metadata["gateway"]["route"] == "openai/gpt-5-mini"
    assert end.error is None and end.model == "openai/gpt-5-mini" and end.calls == 1


async def test_cost_matches_litellms_price_for_gpt5_mini(srv: FakeOpenAI) -> None:
    seen = Recorder()

    memory = await manual_cycle(options({"model": "openai/gpt-5-mini"}, seen.hooks()), gateway(srv))

    (end,) = seen.named("observation_end")
    assert end.cost_usd == pytest.approx(0.00125)  # 1000 in × $0.25/M + 500 out × $2/M
    assert memory.stats.observer.cost_usd == pytest.approx(0.00125)


async def test_turn_sync_and_async_buffer_triggers(srv: FakeOpenAI) -> None:
    sync, buffered = Recorder(), Recorder()
    long = "My name is Ada and I live in Lisbon with my two cats, Miso and Tofu. " * 8

    for recorder, raw in ((sync, {"observation": {"messageTokens": 60, "bufferTokens": False}}),
                          (buffered, {"observation": {"messageTokens": 400, "bufferTokens": 0.2}})):
        config = options({"model": "openai/gpt-5-mini", **raw}, recorder.hooks())
        async with Memory(config, model=gateway(srv), clock=ManualClock(0)) as om:
            for i in range(4):
                await om.add_message(message(i, long, "user" if i % 2 == 0 else "assistant"))
                await om.settle()

    assert {c.trigger for c in sync.named("observation_end")} == {"turn-sync"}
    assert "async-buffer" in {c.trigger for c in buffered.named("observation_end")}
    assert all(c.usage is not None and c.cost_usd is not None for c in buffered.named("observation_end"))


async def test_reflection_hooks_sum_usage_over_compression_attempts(srv: FakeOpenAI) -> None:
    big = "<observations>\n" + "\n".join(f"* 🔴 (09:{i:02d}) User stated fact number {i} about Lisbon."
                                          for i in range(40)) + "\n</observations>"
    reflections = iter([Reply(big, usage=ServerUsage(1000, 500)), Reply(REFLECTED, usage=ServerUsage(800, 100))])
    srv.add_rule(Reply(OBSERVED, usage=ServerUsage(1000, 500)), contains="New message history to observe")

    def reflector(_request: RecordedRequest) -> Response:
        return next(reflections)

    srv.default = reflector
    seen = Recorder()
    config = options({"model": "openai/gpt-5-mini", "reflection": {"observationTokens": 200}}, seen.hooks())

    await manual_cycle(config, gateway(srv), reflect=True)

    (start,), (end,) = seen.named("reflection_start"), seen.named("reflection_end")
    assert start.trigger == end.trigger == "manual"
    assert end.calls == 2  # the first attempt did not compress below the target: one more level
    assert end.usage == Usage(input_tokens=1800, output_tokens=600)
    assert end.cost_usd == pytest.approx((1800 * 0.25 + 600 * 2) / 1e6)


async def test_a_failed_cycle_reports_its_error_and_no_usage(srv: FakeOpenAI) -> None:
    srv.default = lambda _r: ErrorReply.server_error()
    seen = Recorder()
    events: list[OMEvent] = []

    await manual_cycle(options({"model": "openai/gpt-5-mini"}, seen.hooks()), gateway(srv), events=events)

    (end,) = seen.named("observation_end")
    assert end.error is not None and "HTTP 500" in end.error
    assert end.error_kind == "server_error"
    assert end.usage is None and end.cost_usd is None
    assert any(e.event_type == "data-om-observation-failed" for e in events)


async def test_a_budget_refusal_fails_the_cycle_with_budget_exceeded(srv: FakeOpenAI) -> None:
    seen = Recorder()
    events: list[OMEvent] = []

    await manual_cycle(options({"model": "openai/gpt-5-mini"}, seen.hooks()), gateway(srv, budget_tokens=10),
                       events=events)

    (end,) = seen.named("observation_end")
    assert end.error_kind == "budget_exceeded"
    assert srv.requests == []
    failed = [e for e in events if e.event_type == "data-om-observation-failed"]
    assert failed and "token budget" in (failed[0].error or "")


async def test_an_unknown_model_has_an_unknown_cost_not_zero(srv: FakeOpenAI) -> None:
    seen = Recorder()

    memory = await manual_cycle(options({"model": "openai/my-private-model"}, seen.hooks()), gateway(srv))

    (end,) = seen.named("observation_end")
    assert end.usage is not None and end.cost_usd is None
    assert memory.stats.observer.unknown_cost_calls == 1


async def test_a_price_override_prices_a_private_deployment(srv: FakeOpenAI) -> None:
    seen = Recorder()
    prices = {"openai/my-private-model": ModelPrice(input_per_million=1.0, output_per_million=4.0)}

    await manual_cycle(options({"model": "openai/my-private-model"}, seen.hooks()), gateway(srv, prices=prices))

    (end,) = seen.named("observation_end")
    assert end.cost_usd == pytest.approx((1000 * 1.0 + 500 * 4.0) / 1e6)
    assert end.provider_metadata["cost_source"] == "price_override"


async def test_a_provider_reported_cost_wins(srv: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    completion = fake_openai._completion

    def with_cost(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        body = completion(request, reply)
        body["usage"]["cost"] = 0.042  # as OpenRouter-style gateways report it
        return body

    monkeypatch.setattr(fake_openai, "_completion", with_cost)
    seen = Recorder()
    prices = {"openai/gpt-5-mini": ModelPrice(input_per_million=1.0, output_per_million=1.0)}

    await manual_cycle(options({"model": "openai/gpt-5-mini"}, seen.hooks()), gateway(srv, prices=prices))

    (end,) = seen.named("observation_end")
    assert end.cost_usd == pytest.approx(0.042)
    assert end.provider_metadata["cost_source"] == "provider"


async def test_a_cost_header_counts_as_provider_reported(srv: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    send = fake_openai._Handler._send

    def with_header(self: Any, status: int, text: str, headers: Any = None) -> None:
        send(self, status, text, {**(headers or {}), "x-request-cost": "0.007"})

    monkeypatch.setattr(fake_openai._Handler, "_send", with_header)
    seen = Recorder()

    await manual_cycle(options({"model": "openai/gpt-5-mini"}, seen.hooks()), gateway(srv))

    (end,) = seen.named("observation_end")
    assert end.cost_usd == pytest.approx(0.007)
    assert end.provider_metadata["cost_reported_by"] == "x-request-cost"


async def test_hook_exceptions_are_logged_and_never_fail_the_cycle(srv: FakeOpenAI,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    def broken(_context: CycleHookContext) -> None:
        raise RuntimeError("hook bug")

    events: list[OMEvent] = []
    config = options({"model": "openai/gpt-5-mini"}, ObserveHooks(on_observation_start=broken,
                                                                   on_observation_end=broken))
    with caplog.at_level(logging.ERROR, logger="om_stream.runtime.cycles"):
        await manual_cycle(config, gateway(srv), events=events)

    assert any(e.event_type == "data-om-observation-end" for e in events)
    assert sum("hook bug" in r.getMessage() or "hook bug" in str(r.exc_info) for r in caplog.records) == 2


async def test_async_hooks_are_awaited_with_a_timeout(srv: FakeOpenAI) -> None:
    done: list[str] = []

    async def quick(context: CycleHookContext) -> None:
        await asyncio.sleep(0.01)
        done.append(context.phase)

    async def stuck(_context: CycleHookContext) -> None:
        await asyncio.sleep(30)

    config = options({"model": "openai/gpt-5-mini"}, ObserveHooks(on_observation_start=stuck,
                                                                   on_observation_end=quick))
    async with Memory(config, model=gateway(srv), clock=ManualClock(0)) as om:
        om.runner.hook_timeout_s = 0.1
        await om.add_message(message(1))
        await asyncio.wait_for(om.observe("t1", "r1", force=True), 5)
        await asyncio.wait_for(om.settle(), 5)

    assert done == ["end"]


async def test_cycle_observers_get_start_and_end_of_every_cycle(srv: FakeOpenAI) -> None:
    seen: list[CycleHookContext] = []
    async with Memory({"model": "openai/gpt-5-mini"}, model=gateway(srv), clock=ManualClock(0)) as om:
        om.runner.observers.append(seen.append)
        await om.add_message(message(1))
        await om.observe("t1", "r1", force=True)
        await om.settle()

    assert [(c.phase, c.operation) for c in seen] == [("start", "observation"), ("end", "observation")]
    assert seen[1].cost_usd == pytest.approx(0.00125)
