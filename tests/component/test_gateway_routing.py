"""Model routing through the gateway, litellm and the fake OpenAI server: which model each role reaches, with which
settings, provider options, headers, API base and key."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from om_stream.adapters.gateway import GatewaySettings, ModelGateway
from om_stream.core.config import OMConfig
from om_stream.core.events import OMEvent
from om_stream.core.messages import Message, TextPart
from om_stream.errors import ConfigError, ModelUnavailable
from om_stream.ports import ChatMessage, ChatRequest
from om_stream.runtime.embedded import ManualClock, Memory
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI
from tests.support.scripted_provider import START, fast_settings

settings = fast_settings


def message(i: int, text: str = "My name is Ada and I live in Lisbon.", role: str = "user") -> Message:
    return Message(message_id=f"m{i}", thread_id="t1", resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=i), parts=(TextPart(text=text),))


async def observe_once(options: dict[str, Any], gateway: ModelGateway, *, reflect: bool = False,
                       text: str = "My name is Ada and I live in Lisbon.") -> list[OMEvent]:
    events: list[OMEvent] = []
    async with Memory(options, model=gateway, clock=ManualClock(0), on_event=lambda e, _i: events.append(e)) as om:
        await om.add_message(message(1, text))
        await om.add_message(message(2, "Nice to meet you, Ada.", "assistant"))
        await om.observe("t1", "r1", force=True)
        await om.settle()
        if reflect:
            await om.reflect("t1", "r1")
            await om.settle()
    return events


def chat(role: str = "observer", model: str = "", **changes: Any) -> ChatRequest:
    return ChatRequest(role=role, model=model, messages=(ChatMessage("system", "You are the Observer."),  # type: ignore[arg-type]
                                                         ChatMessage("user", "Hello")), **changes)


async def test_a_litellm_model_string_reaches_that_model(srv: FakeOpenAI) -> None:
    gateway = ModelGateway(settings(srv), routes="openai/gpt-5-mini")

    response = await gateway.complete(chat())

    assert [r.model for r in srv.requests] == ["gpt-5-mini"]
    assert srv.requests[0].path == "/v1/chat/completions"
    assert response.model == "openai/gpt-5-mini"
    assert response.provider_metadata["gateway"]["provider_model"] == "gpt-5-mini"


@pytest.mark.parametrize("spec", ["google/gemini-2.5-flash", "default", None])
async def test_the_seeds_google_default_takes_litellms_gemini_route_with_its_thinking_budget(
        srv: FakeOpenAI, spec: str | None) -> None:
    options: dict[str, Any] = {} if spec is None else {"model": spec}
    events = await observe_once(options, ModelGateway(settings(srv)))

    request = srv.requests[0]
    assert request.path == "/v1/models/gemini-2.5-flash:generateContent"
    config = request.body["generationConfig"]
    assert config["thinkingConfig"]["thinkingBudget"] == 215  # the Observer's default providerOptions.google
    # the 100 000-token output default goes to the default selection only, not to an explicit model name
    assert config.get("max_output_tokens") == (None if spec == "google/gemini-2.5-flash" else 100_000)
    assert config["temperature"] == 0.3
    failed = [e for e in events if e.event_type == "data-om-observation-failed"]
    assert failed and "404" in (failed[0].error or "")  # the fake server speaks OpenAI only: a clean failure


async def test_observation_and_reflection_models_are_routed_per_role(srv: FakeOpenAI) -> None:
    options = {"observation": {"model": "openai/gpt-5-mini"}, "reflection": {"model": "openai/gpt-4o-mini"}}

    await observe_once(options, ModelGateway(settings(srv)), reflect=True)

    observer = [r.model for r in srv.requests if "Observations to reflect on" not in r.prompt_text]
    reflector = [r.model for r in srv.requests if "Observations to reflect on" in r.prompt_text]
    assert set(observer) == {"gpt-5-mini"}
    assert reflector and set(reflector) == {"gpt-4o-mini"}


async def test_one_sub_model_configures_both_agents(srv: FakeOpenAI) -> None:
    await observe_once({"reflection": {"model": "openai/gpt-4o-mini"}}, ModelGateway(settings(srv)), reflect=True)

    assert {r.model for r in srv.requests} == {"gpt-4o-mini"}
    assert len(srv.requests) >= 2


def test_model_with_a_sub_model_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"observation\.model"):
        OMConfig.parse({"model": "openai/gpt-5-mini", "observation": {"model": "openai/gpt-4o-mini"}})


async def test_explicit_gateway_routes_win_over_the_options(srv: FakeOpenAI) -> None:
    gateway = ModelGateway(settings(srv), routes="openai/gpt-4o-mini")

    await observe_once({"model": "openai/gpt-5-mini"}, gateway)

    assert {r.model for r in srv.requests} == {"gpt-4o-mini"}


async def test_model_settings_reach_the_model_and_custom_models_get_no_output_default(srv: FakeOpenAI) -> None:
    await observe_once({"model": "openai/gpt-4o-mini"}, ModelGateway(settings(srv)))
    await observe_once({"model": "openai/gpt-4o-mini",
                        "observation": {"modelSettings": {"temperature": 0.7, "maxOutputTokens": 1234}}},
                       ModelGateway(settings(srv)))

    plain, tuned = srv.requests[0].body, srv.requests[1].body
    assert "max_tokens" not in plain and "max_completion_tokens" not in plain
    assert plain["temperature"] == 0.3
    assert tuned["temperature"] == 0.7
    assert tuned["max_tokens"] == 1234


async def test_provider_options_reach_only_their_provider(srv: FakeOpenAI) -> None:
    options = {"model": "openai/gpt-5-mini",
               "observation": {"providerOptions": {"openai": {"reasoningEffort": "low"},
                                                   "google": {"thinkingConfig": {"thinkingBudget": 99}}}}}

    await observe_once(options, ModelGateway(settings(srv)))

    body = srv.requests[0].body
    assert body["reasoning_effort"] == "low"
    assert "thinking" not in body and "thinkingConfig" not in str(body)


async def test_api_base_from_the_providers_env_var_and_key_from_settings(srv: FakeOpenAI) -> None:
    gateway = ModelGateway(GatewaySettings(api_keys={"openai": "sk-from-settings"}), routes="openai/gpt-5-mini",
                           environ={"OPENAI_API_BASE": srv.base_url})

    await gateway.complete(chat())

    assert srv.requests[0].headers["authorization"] == "Bearer sk-from-settings"


async def test_a_model_specific_api_base_wins_over_the_providers(srv: FakeOpenAI) -> None:
    gateway = ModelGateway(GatewaySettings(api_bases={"openai": "http://127.0.0.1:9/v1",
                                                      "openai/gpt-5-mini": srv.base_url},
                                           api_keys={"*": "k"}), routes="openai/gpt-5-mini")

    await gateway.complete(chat())

    assert len(srv.requests) == 1


async def test_model_by_input_tokens_picks_the_smallest_covering_threshold(srv: FakeOpenAI) -> None:
    options = {"model": {"upTo": {4_000: "openai/gpt-4o-mini", 1_000_000: "openai/gpt-5-mini"}}}

    await observe_once(options, ModelGateway(settings(srv)))
    await observe_once(options, ModelGateway(settings(srv)), text="Ada likes long walks. " * 1500)

    small, *rest = srv.requests
    assert small.model == "gpt-4o-mini"
    assert {r.model for r in rest if "long walks. Ada likes long walks." in r.prompt_text} == {"gpt-5-mini"}
    # the default-selection output limit applies to ModelByInputTokens (the seeds)
    assert small.body["max_tokens"] == 100_000


async def test_model_by_input_tokens_overflow_fails_the_cycle_cleanly_and_memory_lives_on(srv: FakeOpenAI) -> None:
    options = {"model": {"upTo": {100: "openai/gpt-4o-mini"}}}
    events: list[OMEvent] = []
    gateway = ModelGateway(settings(srv))
    async with Memory(options, model=gateway, clock=ManualClock(0), on_event=lambda e, _i: events.append(e)) as om:
        await om.add_message(message(1))
        await om.observe("t1", "r1", force=True)
        await om.settle()
        context = await om.add_message(message(2, "Still here?"))

    failed = [e for e in events if e.event_type == "data-om-observation-failed"]
    assert failed and "exceeds the largest ModelByInputTokens threshold (100)" in (failed[0].error or "")
    assert srv.requests == []
    assert context is not None and [m.message_id for m in context.messages][-1] == "m2"
    assert gateway.stats.input_too_large >= 1


async def test_model_by_input_tokens_overflow_is_a_model_unavailable_error(srv: FakeOpenAI) -> None:
    from om_stream.core.model_spec import ModelByInputTokens

    gateway = ModelGateway(settings(srv), routes=ModelByInputTokens(up_to={1: "openai/gpt-5-mini"}))

    with pytest.raises(ModelUnavailable) as caught:
        await gateway.complete(chat())

    assert caught.value.kind == "input_too_large"


async def test_fallback_list_tries_entries_in_order_with_their_own_retries_settings_and_headers(
        srv: FakeOpenAI) -> None:
    srv.add_rule(ErrorReply.server_error(), model="gpt-4o-mini")
    options = {"model": [
        {"model": "openai/gpt-4o-mini", "maxRetries": 1},
        {"model": "openai/o3-mini", "enabled": False},
        {"model": "openai/gpt-5-mini", "modelSettings": {"maxOutputTokens": 77}, "headers": {"x-tenant": "acme"},
         "providerOptions": {"openai": {"reasoningEffort": "minimal"}}},
        {"model": "openai/gpt-4.1-mini"},
    ]}
    gateway = ModelGateway(settings(srv))

    await observe_once(options, gateway)

    assert [r.model for r in srv.requests] == ["gpt-4o-mini", "gpt-4o-mini", "gpt-5-mini"]
    served = srv.requests[2]
    assert served.headers["x-tenant"] == "acme"
    assert served.body["max_completion_tokens"] == 77
    assert served.body["reasoning_effort"] == "minimal"
    assert gateway.retry_count == 2
    assert gateway.failure_count == 2


async def test_a_non_transient_error_moves_to_the_next_entry_without_retrying(srv: FakeOpenAI) -> None:
    srv.add_rule(ErrorReply.bad_request("model not found"), model="gpt-4o-mini")
    from om_stream.core.model_spec import ModelWithRetries

    gateway = ModelGateway(settings(srv), routes=[ModelWithRetries(model="openai/gpt-4o-mini", max_retries=3),
                                                   ModelWithRetries(model="openai/gpt-5-mini")])

    response = await gateway.complete(chat())

    assert [r.model for r in srv.requests] == ["gpt-4o-mini", "gpt-5-mini"]
    assert response.provider_metadata["gateway"]["entry"] == 1


async def test_an_extractor_request_naming_a_model_goes_to_that_model(srv: FakeOpenAI) -> None:
    gateway = ModelGateway(settings(srv), routes="openai/gpt-4o-mini")

    await gateway.complete(chat(role="extractor", model="openai/gpt-5-mini"))
    await gateway.complete(chat(role="extractor"))

    assert [r.model for r in srv.requests] == ["gpt-5-mini", "gpt-4o-mini"]


async def test_the_chosen_tier_is_reported_in_the_provider_metadata(srv: FakeOpenAI) -> None:
    from om_stream.core.model_spec import ModelByInputTokens

    gateway = ModelGateway(settings(srv), routes=ModelByInputTokens(up_to={10: "openai/gpt-4o-mini",
                                                                           500: "openai/gpt-5-mini"}))

    request = ChatRequest(role="observer", model="", messages=(ChatMessage("user", "Ada likes long walks. " * 5),))
    response = await gateway.complete(request)

    assert response.provider_metadata["gateway"]["tier"] == 500
    assert srv.requests[0].model == "gpt-5-mini"


async def test_the_workers_gateway_routes_from_the_options_with_the_memory_settings(srv: FakeOpenAI) -> None:
    from om_stream.adapters.gateway import build_gateway
    from om_stream.settings import MemorySettings

    config = OMConfig.parse({"observation": {"model": "openai/gpt-4o-mini"},
                             "reflection": {"model": "openai/gpt-5-mini"}}).resolve()
    gateway = build_gateway(config, MemorySettings(api_base=srv.base_url, api_key="sk-worker"))  # type: ignore[arg-type]

    await gateway.complete(chat())
    await gateway.complete(chat(role="reflector"))

    assert [r.model for r in srv.requests] == ["gpt-4o-mini", "gpt-5-mini"]
    assert srv.requests[0].headers["authorization"] == "Bearer sk-worker"
