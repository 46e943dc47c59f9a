"""The gateway under failure, through litellm to the fake OpenAI server: retries and Retry-After, which failures are
transient, unfinished answers, circuit breakers, bulkheads, token budgets, per-call timeouts and the overall
deadline."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from om_stream.adapters.gateway import CircuitBreaker, GatewaySettings, ModelGateway, RetryPolicy, is_transient
from om_stream.adapters.litellm_model import model_error
from om_stream.adapters.offline import import_litellm
from om_stream.core.model_spec import ModelWithRetries
from om_stream.errors import BudgetExceeded, ModelError, ModelUnavailable
from om_stream.observability.metrics import Metrics
from om_stream.observability.model_metrics import ModelCallMetrics
from om_stream.ports import ChatMessage, ChatRequest
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI, Reply, Usage


@pytest.fixture
def srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=lambda _r: Reply("fine", usage=Usage(1000, 500))) as server:
        yield server


def settings(srv: FakeOpenAI, **changes: Any) -> GatewaySettings:
    base: dict[str, Any] = {"api_bases": {"*": srv.base_url}, "api_keys": {"*": "test"}, "timeout_s": 2.0,
                            "deadline_s": 5.0, "backoff_initial_s": 0.01, "backoff_max_s": 0.02,
                            "retry_after_max_s": 2.0, "max_retries": 2}
    return GatewaySettings(**{**base, **changes})


def chat(resource: str | None = "tenant-a") -> ChatRequest:
    return ChatRequest(role="observer", model="", resource_id=resource,
                       messages=(ChatMessage("system", "Observe."), ChatMessage("user", "My cat is called Miso.")))


def gaps(srv: FakeOpenAI) -> list[float]:
    times = [r.received_at for r in srv.requests]
    return [b - a for a, b in itertools.pairwise(times)]


# -- retries ---------------------------------------------------------------------------------------------------------

async def test_a_429_is_retried_after_its_retry_after(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.rate_limit(retry_after=0.6))
    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini")

    response = await gateway.complete(chat())

    assert response.text == "fine"
    assert len(srv.requests) == 2
    assert 0.6 <= gaps(srv)[0] < 1.2
    assert gateway.retry_count == 1
    assert response.provider_metadata["gateway"]["attempts"] == 2


async def test_retry_after_is_capped(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.rate_limit(retry_after=30))
    gateway = ModelGateway(settings(srv, retry_after_max_s=0.2), routes="openai/gpt-5-mini")

    await gateway.complete(chat())

    assert 0.2 <= gaps(srv)[0] < 0.8


async def test_server_errors_back_off_exponentially_up_to_max_retries(srv: FakeOpenAI) -> None:
    srv.default = lambda _r: ErrorReply.server_error()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    gateway = ModelGateway(settings(srv, backoff_initial_s=0.5, backoff_max_s=10, max_retries=3,
                                    breaker_failures=10), routes="openai/gpt-5-mini", sleep=sleep, rand=lambda: 0.5)

    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())

    assert len(srv.requests) == 4
    assert slept == [0.5, 1.0, 2.0]
    assert caught.value.kind == "server_error" and caught.value.status_code == 500
    assert gateway.retry_count == 3 and gateway.failure_count == 4


def test_retry_delays_have_jitter_within_bounds() -> None:
    policy = RetryPolicy(initial_s=1.0, max_s=8.0, jitter=0.2)

    assert policy.delay(0, None, lambda: 0.0) == pytest.approx(0.8)
    assert policy.delay(0, None, lambda: 1.0) == pytest.approx(1.2)
    assert policy.delay(5, None, lambda: 0.5) == pytest.approx(8.0)
    assert policy.delay(0, 3.0) == 3.0


async def test_a_client_error_is_not_retried(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.bad_request("messages: invalid"))
    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini")

    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())

    assert len(srv.requests) == 1
    assert caught.value.status_code == 400
    assert gateway.breaker("openai/gpt-5-mini").state == "closed"


# -- circuit breaker -------------------------------------------------------------------------------------------------

async def test_the_circuit_opens_after_consecutive_failures_then_half_opens_after_the_cooldown(
        srv: FakeOpenAI) -> None:
    srv.default = lambda _r: ErrorReply.server_error()
    gateway = ModelGateway(settings(srv, max_retries=0, breaker_failures=2, breaker_cooldown_s=0.3),
                           routes="openai/gpt-5-mini")

    for _ in range(2):
        with pytest.raises(ModelUnavailable):
            await gateway.complete(chat())
    assert gateway.breaker("openai/gpt-5-mini").state == "open"
    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())
    assert caught.value.kind == "circuit_open"
    assert len(srv.requests) == 2  # the open circuit kept the third call away from the model

    await asyncio.sleep(0.35)
    with pytest.raises(ModelUnavailable):  # the half-open probe fails: open again at once
        await gateway.complete(chat())
    assert len(srv.requests) == 3
    assert gateway.breaker("openai/gpt-5-mini").state == "open"

    await asyncio.sleep(0.35)
    srv.default = lambda _r: Reply("back")
    assert (await gateway.complete(chat())).text == "back"  # the probe succeeds: closed
    assert gateway.breaker("openai/gpt-5-mini").state == "closed"
    assert gateway.stats.circuit_skips == 1


async def test_an_open_circuit_skips_to_the_next_fallback_entry(srv: FakeOpenAI) -> None:
    srv.add_rule(ErrorReply.server_error(), model="gpt-4o-mini")
    gateway = ModelGateway(settings(srv, breaker_failures=1, breaker_cooldown_s=60),
                           routes=[ModelWithRetries(model="openai/gpt-4o-mini", max_retries=2),
                                   ModelWithRetries(model="openai/gpt-5-mini")])

    await gateway.complete(chat())
    await gateway.complete(chat())

    # first call: one failure opens gpt-4o-mini's circuit (no retry into an open circuit), then gpt-5-mini;
    # second call: straight to gpt-5-mini
    assert [r.model for r in srv.requests] == ["gpt-4o-mini", "gpt-5-mini", "gpt-5-mini"]


def test_a_half_open_circuit_lets_one_probe_through() -> None:
    breaker = CircuitBreaker(failures=1, cooldown_s=10)
    breaker.failure(now=0)

    assert not breaker.allow(5)
    assert breaker.allow(11)
    assert not breaker.allow(11)  # the probe is still out
    breaker.release()
    assert breaker.allow(12)


# -- bulkhead --------------------------------------------------------------------------------------------------------

async def test_concurrency_per_model_is_bounded(srv: FakeOpenAI) -> None:
    srv.default = lambda _r: Reply("slow", delay=0.3)
    gateway = ModelGateway(settings(srv, max_concurrency=1), routes="openai/gpt-5-mini")

    await asyncio.gather(gateway.complete(chat()), gateway.complete(chat()))

    assert gaps(srv)[0] >= 0.28


# -- budgets ---------------------------------------------------------------------------------------------------------

async def test_a_tenant_over_its_token_budget_is_refused_without_a_model_call(srv: FakeOpenAI) -> None:
    gateway = ModelGateway(settings(srv, budget_tokens=3_000, budget_window_s=60), routes="openai/gpt-5-mini")

    await gateway.complete(chat())  # 1 500 tokens used
    await gateway.complete(chat())  # 3 000
    with pytest.raises(BudgetExceeded) as caught:
        await gateway.complete(chat())
    await gateway.complete(chat("tenant-b"))  # another tenant has its own budget

    assert caught.value.kind == "budget_exceeded"
    assert "tenant-a" in str(caught.value)
    assert len(srv.requests) == 3
    assert gateway.stats.budget_refusals == 1


async def test_a_budget_override_and_a_failed_call_charges_nothing(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.bad_request())
    gateway = ModelGateway(settings(srv, budget_overrides={"tenant-a": 1_505}), routes="openai/gpt-5-mini")

    with pytest.raises(ModelUnavailable):
        await gateway.complete(chat())
    await gateway.complete(chat())  # the failed call's reservation was released
    with pytest.raises(BudgetExceeded):
        await gateway.complete(chat())
    await gateway.complete(chat("tenant-b"))  # no default limit: unbounded


# -- timeouts and the deadline ---------------------------------------------------------------------------------------

async def test_a_call_that_takes_too_long_times_out(srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("late", delay=3))
    gateway = ModelGateway(settings(srv, timeout_s=0.3, max_retries=0), routes="openai/gpt-5-mini")

    began = time.monotonic()
    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())

    assert caught.value.kind == "timeout"
    assert time.monotonic() - began < 1.0


async def test_nothing_makes_the_caller_wait_past_the_deadline(srv: FakeOpenAI) -> None:
    srv.default = lambda _r: Reply("late", delay=3)
    gateway = ModelGateway(settings(srv, timeout_s=0.3, deadline_s=0.8, max_retries=10, breaker_failures=50),
                           routes="openai/gpt-5-mini")

    began = time.monotonic()
    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())

    assert time.monotonic() - began < 1.0
    assert caught.value.kind in ("deadline", "timeout")


async def test_a_retry_after_beyond_the_deadline_is_not_waited_for(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.rate_limit(retry_after=5))
    gateway = ModelGateway(settings(srv, deadline_s=1.0, retry_after_max_s=10), routes="openai/gpt-5-mini")

    began = time.monotonic()
    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())

    assert time.monotonic() - began < 0.5
    assert caught.value.kind == "rate_limited"
    assert caught.value.retry_after == 5


async def test_call_observers_see_every_attempt_and_their_failures_are_contained(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.server_error())
    records: list[Any] = []

    def broken(_record: Any) -> None:
        raise RuntimeError("metrics backend down")

    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini", observers=[records.append, broken])

    await gateway.complete(chat())

    assert [(r.ok, r.error_kind, r.attempt) for r in records] == [(False, "server_error", 1), (True, None, 2)]
    assert records[1].cost_usd == pytest.approx(0.00125)


# -- which failures are worth another try ----------------------------------------------------------------------------

async def test_a_conflict_is_retried(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply(409, "Another request with this idempotency key is in progress.", "conflict"))
    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini")

    response = await gateway.complete(chat())

    assert response.text == "fine"
    assert len(srv.requests) == 2


async def test_an_answer_refused_by_litellms_json_schema_validation_is_not_retried(
        srv: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    # litellm raises its own HTTP 500 for an answer that does not match the schema: asking again is no cure
    monkeypatch.setattr(import_litellm(), "enable_json_schema_validation", True)
    srv.default = lambda _r: Reply('{"name": 7}')
    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini")
    request = replace(chat(), role="extractor", response_schema={
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})

    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(request)

    assert len(srv.requests) == 1
    assert caught.value.kind == "response_validation" and caught.value.status_code is None
    assert gateway.breaker("openai/gpt-5-mini").consecutive == 0


def test_missing_credentials_litellm_reports_as_a_server_error_are_not_transient() -> None:
    litellm = import_litellm()
    local = litellm.InternalServerError(  # what litellm raises, before any request, for an OpenAI model with no key
        message="OpenAIException - Missing credentials. Please pass an `api_key`, or set the OPENAI_API_KEY "
                "environment variable.", llm_provider="openai", model="gpt-5-mini")

    error = model_error(local)

    assert (error.kind, error.status_code) == ("auth", None)
    assert not is_transient(error)


@pytest.mark.parametrize(("error", "transient"), [
    (ModelError("Invalid API key provided"), False),
    (ModelError("AuthenticationError: authentication failed for this organization"), False),
    (ModelError("response schema validation failed: 'name' is a required property"), False),
    (ModelError("TypeError: acompletion() got an unexpected keyword argument 'thinking'", kind="TypeError"), False),
    (ModelError("read ECONNRESET"), True),
    (ModelError("httpx.RemoteProtocolError: Server disconnected without sending a response."), True),
    (ModelError("openai/gpt-5-mini: no answer within 2 s", kind="timeout"), True),
    (ModelError("Timeout (HTTP 408): Request timed out.", kind="timeout", status_code=408), True),
    (ModelError("conflict", kind="client_error", status_code=409), True),
    (ModelError("rate limited", kind="rate_limited", status_code=429), True),
    (ModelError("bad gateway", kind="server_error", status_code=502), True),
    (ModelError("bad request", kind="client_error", status_code=400), False),
    (ModelError("unauthorized", kind="client_error", status_code=401), False),
    (ModelError("unprocessable", kind="client_error", status_code=422), False),
    (ModelError("litellm.JSONSchemaValidationError", kind="response_validation", status_code=500), False),
])
def test_only_timeouts_connection_failures_and_retryable_statuses_are_transient(error: ModelError,
                                                                                 transient: bool) -> None:
    assert is_transient(error) is transient


# -- answers the model did not finish --------------------------------------------------------------------------------

async def test_an_answer_stopped_by_the_content_filter_is_a_failed_attempt_and_asked_again(srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("<observations>\n* 🔴 User", usage=Usage(1000, 20), finish_reason="content_filter"))
    records: list[Any] = []
    gateway = ModelGateway(settings(srv, budget_tokens=10_000), routes="openai/gpt-5-mini",
                           observers=[records.append])

    response = await gateway.complete(chat())

    assert response.text == "fine"
    assert len(srv.requests) == 2
    assert [(r.ok, r.error_kind) for r in records] == [(False, "incomplete"), (True, None)]
    assert records[0].usage is not None and records[0].usage.output_tokens == 20
    assert gateway.breaker("openai/gpt-5-mini").state == "closed"
    assert gateway.budget.used("tenant-a", time.monotonic()) == 1020 + 1500  # the cut answer was paid for too


@pytest.mark.parametrize("provider_reason", ["other", "unknown", "error", "OTHER", "SAFETY", "content_filter"])
async def test_an_unfinished_answer_fails_the_call_after_its_retries_with_the_reason(
        srv: FakeOpenAI, provider_reason: str) -> None:
    # litellm maps "other", "unknown" and "error" to "stop" (and Gemini's OTHER and SAFETY to content_filter): the
    # gateway reads the provider's own reason
    srv.default = lambda _r: Reply("<observations>\n* 🔴 User is", finish_reason=provider_reason)
    gateway = ModelGateway(settings(srv, max_retries=2), routes="openai/gpt-5-mini")

    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())

    assert len(srv.requests) == 3
    assert caught.value.kind == "incomplete"
    expected = "content_filter" if provider_reason in ("OTHER", "SAFETY") else provider_reason
    assert f"finish reason {expected!r}" in str(caught.value)


async def test_an_unfinished_answer_moves_on_to_the_next_fallback_entry(srv: FakeOpenAI) -> None:
    srv.add_rule(Reply("partial", finish_reason="content_filter"), model="gpt-4o-mini")
    gateway = ModelGateway(settings(srv), routes=[ModelWithRetries(model="openai/gpt-4o-mini", max_retries=1),
                                                  ModelWithRetries(model="openai/gpt-5-mini")])

    response = await gateway.complete(chat())

    assert response.text == "fine"
    assert [r.model for r in srv.requests] == ["gpt-4o-mini", "gpt-4o-mini", "gpt-5-mini"]


async def test_a_truncated_answer_is_still_an_answer(srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("<observations>\n* 🔴 User is Ada.", finish_reason="length"))
    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini")

    response = await gateway.complete(chat())

    assert response.finish_reason == "length"
    assert len(srv.requests) == 1


async def test_an_unfinished_answer_is_counted_as_spend_in_the_metrics(srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("<observations>\n* 🔴 User", usage=Usage(1000, 500), finish_reason="content_filter"))
    metrics = Metrics.create()
    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini", observers=[ModelCallMetrics(metrics)])

    await gateway.complete(chat())

    labels = {"gen_ai_request_model": "openai/gpt-5-mini", "om_role": "observer"}
    spent = metrics.registry.get_sample_value("om_model_cost_usd_total", labels)
    assert spent == pytest.approx(2 * 0.00125)  # both answers were billed, the cut one too
    assert gateway.stats.cost_usd == pytest.approx(2 * 0.00125)
    assert metrics.registry.get_sample_value("om_model_calls_total", {**labels, "outcome": "error"}) == 1
