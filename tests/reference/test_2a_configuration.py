"""§2a of the reference: how the ``observationalMemory`` option is enabled, defaulted, resolved and validated.

Driven through the public ``OMConfig`` (and the embedded ``Memory`` where a setting shows in behaviour).
"""

from __future__ import annotations

from typing import Any

import pytest

from om_stream import ConfigError, InputRejected, Memory, OMConfig
from om_stream.core.config import ResolvedConfig
from om_stream.core.extractors import WORKING_MEMORY_SLUG, Extractor, WorkingMemoryExtractor
from om_stream.core.model_spec import ModelByInputTokens
from om_stream.core.ttl import resolve_idle_ms
from om_stream.runtime.embedded import ManualClock
from tests.reference import START_MS, message
from tests.support.engine_cases import TEN, buffered, events
from tests.support.sim import Sim


def resolve(options: Any) -> ResolvedConfig:
    return OMConfig.parse(options).resolve()


def refused(options: Any) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        resolve(options)
    return caught.value


# -- 2a.1 enabling --------------------------------------------------------------------------------------------------

def test_true_turns_memory_on_with_gemini_flash_for_both_agents() -> None:
    config = resolve(True)
    assert config.enabled
    assert (config.observer_model, config.reflector_model) == ("google/gemini-2.5-flash",) * 2


def test_an_options_object_turns_memory_on_unless_it_says_enabled_false() -> None:
    assert resolve({"scope": "thread"}).enabled
    assert not resolve({"enabled": False}).enabled
    assert not resolve(False).enabled


async def test_with_memory_off_messages_pass_through_unobserved() -> None:
    async with Memory(False, clock=ManualClock(START_MS)) as om:
        for i in range(1, 4):
            context = await om.add_message(message(i, "word " * 50))
        await om.observe("t1", force=True)
        await om.settle()
        assert context is not None and context.observations == ""
        assert [m.message_id for m in context.messages] == ["m1", "m2", "m3"]
        assert not om.events_by_type.get("data-om-observation-start")


# -- 2a.2 defaults --------------------------------------------------------------------------------------------------

def test_observation_thresholds_default_to_the_documented_sizes() -> None:
    config = resolve({})
    assert config.scope == "thread"
    assert config.message_tokens == 30_000
    assert config.buffer_tokens == 6_000  # 0.2 of messageTokens
    assert config.retention_floor == 6_000  # bufferActivation 0.8 removes 80 %
    assert config.block_after == 36_000  # 1.2 x messageTokens
    assert config.max_tokens_per_batch == 10_000
    assert config.previous_observer_tokens == 2_000
    assert not config.buffer_on_idle


def test_reflection_thresholds_default_to_the_documented_sizes() -> None:
    config = resolve({})
    assert config.observation_tokens == 40_000
    assert config.reflection_buffer_activation == 0.5  # background reflection from 20 000
    assert config.reflection_block_after == 48_000


def test_model_settings_default_to_temperature_0_3_and_0_and_a_large_output_limit() -> None:
    config = resolve({})
    assert (config.observer_settings.temperature, config.reflector_settings.temperature) == (0.3, 0.0)
    assert config.observer_settings.max_output_tokens == config.reflector_settings.max_output_tokens == 100_000


@pytest.mark.parametrize("model", [None, "default", {"upTo": {10_000: "openai/gpt-5-mini"}}])
def test_the_output_limit_default_goes_only_to_the_default_selection(model: Any) -> None:
    config = resolve({} if model is None else {"model": model})
    assert config.observer_settings.max_output_tokens == 100_000


def test_a_custom_model_gets_no_output_limit_default() -> None:
    config = resolve({"model": "openai/gpt-5-mini"})
    assert config.observer_settings.max_output_tokens is None
    assert config.reflector_settings.max_output_tokens is None


def test_provider_options_default_to_googles_thinking_budgets_and_are_replaced_whole() -> None:
    config = resolve({})
    assert config.observer_provider_options == {"google": {"thinkingConfig": {"thinkingBudget": 215}}}
    assert config.reflector_provider_options == {"google": {"thinkingConfig": {"thinkingBudget": 1024}}}
    mine = resolve({"observation": {"providerOptions": {"openai": {"reasoningEffort": "low"}}}})
    assert mine.observer_provider_options == {"openai": {"reasoningEffort": "low"}}  # no google key merged in


def test_feature_switches_default_off_and_hints_on() -> None:
    config = resolve({})
    assert config.observe_attachments is True  # the documentation's default (reference §5 item 2)
    assert not config.thread_title and not config.temporal_markers and not config.share_token_budget
    assert config.observation_hints and config.reflection_hints
    assert config.observation_instruction is None and config.observation_extractors == ()
    assert config.retrieval is None
    assert config.observation_idle is None and config.reflection_idle is None
    assert not config.observation_provider_change and not config.reflection_provider_change


def test_retrieval_true_means_a_resource_wide_recall_tool_without_search() -> None:
    retrieval = resolve({"retrieval": True}).retrieval
    assert retrieval is not None and retrieval.scope == "resource" and not retrieval.vector


# -- 2a.3 model resolution ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "observer", "reflector"), [
    ({"model": "a/top"}, "a/top", "a/top"),
    ({"observation": {"model": "a/obs"}}, "a/obs", "a/obs"),
    ({"reflection": {"model": "a/refl"}}, "a/refl", "a/refl"),
    ({"observation": {"model": "a/obs"}, "reflection": {"model": "a/refl"}}, "a/obs", "a/refl"),
])
def test_one_sub_model_configures_both_agents_and_each_prefers_its_own(options: dict[str, Any], observer: str,
                                                                      reflector: str) -> None:
    config = resolve(options)
    assert (config.observer_model, config.reflector_model) == (observer, reflector)


@pytest.mark.parametrize("phase", ["observation", "reflection"])
def test_a_top_level_model_cannot_be_combined_with_a_phase_model(phase: str) -> None:
    error = refused({"model": "a/top", phase: {"model": "a/other"}})
    assert error.field == "model" and phase in str(error)


def test_models_may_be_a_name_a_token_tiered_selector_or_a_fallback_list() -> None:
    tiered = resolve({"model": {"upTo": {40_000: "b/big", 10_000: "a/small"}}}).observer_model
    assert isinstance(tiered, ModelByInputTokens) and tiered.thresholds() == [10_000, 40_000]
    chain = resolve({"model": [{"model": "a/first", "maxRetries": 2}, {"model": "b/second"}]}).observer_model
    assert isinstance(chain, list) and [(e.model, e.max_retries) for e in chain] == [("a/first", 2), ("b/second", 0)]


def test_a_token_tiered_selector_picks_the_smallest_tier_that_covers_the_input() -> None:
    selector = ModelByInputTokens(up_to={40_000: "b/big", 10_000: "a/small"})
    assert selector.resolve(1) == selector.resolve(10_000) == "a/small"
    assert selector.resolve(10_001) == "b/big"
    with pytest.raises(ValueError, match="exceeds"):
        selector.resolve(40_001)


@pytest.mark.parametrize("tiers", [{}, {0: "a/m"}, {-5: "a/m"}, {"inf": "a/m"}, {10: ""}, {10: 3}])
def test_a_token_tiered_selector_refuses_empty_or_invalid_tiers(tiers: dict[Any, Any]) -> None:
    refused({"model": {"upTo": tiers}})


@pytest.mark.parametrize(("model", "level"), [("google/gemini-2.5-flash", 2), ("openai/gpt-5-mini", 1)])
def test_automatic_reflection_starts_gentler_except_for_gemini_flash(model: str, level: int) -> None:
    sim = Sim({"model": model, "observation": {"messageTokens": 20, "bufferTokens": False},
               "reflection": {"observationTokens": 40}})
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle()
    reflections = [r for r in sim.requests if r.__class__.__name__ == "RequestReflection" and r.kind == "sync"]
    assert reflections and reflections[0].compression_start_level == level  # type: ignore[union-attr]


# -- 2a.4 when async buffering is on --------------------------------------------------------------------------------

def test_buffer_tokens_false_turns_off_observation_and_reflection_buffering() -> None:
    config = resolve({"observation": {"bufferTokens": False}})
    assert not config.async_buffering
    assert config.block_after is None and config.reflection_buffer_activation is None
    assert config.reflection_block_after is None and config.retention_floor == 0


def test_resource_scope_turns_buffering_off_by_itself() -> None:
    config = resolve({"scope": "resource"})
    assert not config.async_buffering and config.reflection_buffer_activation is None


@pytest.mark.parametrize("option", [{"observation": {"bufferTokens": 0.2}},
                                    {"observation": {"bufferActivation": 0.8}},
                                    {"reflection": {"bufferActivation": 0.5}}])
def test_asking_for_buffering_in_resource_scope_is_an_error(option: dict[str, Any]) -> None:
    error = refused({"scope": "resource", **option})
    assert "resource" in str(error)


def test_a_shared_token_budget_needs_buffering_off() -> None:
    assert refused({"shareTokenBudget": True}).field == "shareTokenBudget"
    assert resolve({"shareTokenBudget": True, "observation": {"bufferTokens": False}}).share_token_budget


# -- 2a.5 validation ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("observation", "field"), [
    ({"bufferTokens": 0}, "observation.bufferTokens"),
    ({"bufferTokens": -1}, "observation.bufferTokens"),
    ({"bufferTokens": 30_000}, "observation.bufferTokens"),  # not below messageTokens
    ({"bufferActivation": 0}, "observation.bufferActivation"),
    ({"bufferActivation": 5}, "observation.bufferActivation"),  # neither a ratio nor tokens to retain
    ({"bufferActivation": 30_000}, "observation.bufferActivation"),  # would retain the whole threshold
    ({"blockAfter": 20_000}, "observation.blockAfter"),  # below messageTokens
    ({"previousObserverTokens": -1}, "observation.previousObserverTokens"),
    ({"previousObserverTokens": float("inf")}, "observation.previousObserverTokens"),
])
def test_observation_sizes_that_cannot_work_are_refused_naming_the_option(observation: dict[str, Any],
                                                                         field: str) -> None:
    assert refused({"observation": observation}).field == field


def test_block_after_without_buffering_is_refused() -> None:
    assert refused({"observation": {"bufferTokens": False, "blockAfter": 1.5}}).field == "observation.blockAfter"
    assert refused({"observation": {"bufferTokens": False},
                    "reflection": {"blockAfter": 1.5}}).field == "reflection.blockAfter"


@pytest.mark.parametrize(("reflection", "field"), [
    ({"bufferActivation": 0}, "reflection.bufferActivation"),
    ({"bufferActivation": 1.5}, "reflection.bufferActivation"),
    ({"blockAfter": 30_000}, "reflection.blockAfter"),  # below observationTokens
])
def test_reflection_sizes_that_cannot_work_are_refused_naming_the_option(reflection: dict[str, Any],
                                                                        field: str) -> None:
    assert refused({"reflection": reflection}).field == field


def test_previous_observer_tokens_false_is_accepted_as_no_budget() -> None:
    assert resolve({"observation": {"previousObserverTokens": False}}).previous_observer_tokens is None


@pytest.mark.parametrize(("value", "ms"), [(300_000, 300_000), (0, 0), ("5m", 300_000), ("1hr", 3_600_000),
                                           ("30 Seconds", 30_000), ("250ms", 250), ("2 H", 7_200_000),
                                           ("auto", "auto"), (False, None)])
def test_idle_times_read_milliseconds_duration_strings_auto_and_false(value: Any, ms: Any) -> None:
    assert resolve({"activateAfterIdle": value}).observation_idle == ms


@pytest.mark.parametrize("where", ["activateAfterIdle", "observation.activateAfterIdle",
                                   "reflection.activateAfterIdle"])
@pytest.mark.parametrize("value", ["soon", "5 fortnights", -1, True])
def test_an_unreadable_idle_time_is_refused_naming_where_it_was_set(where: str, value: Any) -> None:
    options: dict[str, Any] = {}
    target = options
    *parents, leaf = where.split(".")
    for parent in parents:
        target = target.setdefault(parent, {})
    target[leaf] = value
    assert refused(options).field == where


@pytest.mark.parametrize(("actor", "retention", "minutes"), [
    ("openai/gpt-5-mini", "24h", 60), ("openai/gpt-4o", "in_memory", 5),
    ("openai/gpt-4o", None, 5), ("openai/gpt-5", None, 5), ("openai/gpt-5.2-pro", None, 5),
    ("openai/o3", None, 60), ("google/gemini-2.5-pro", None, 24 * 60), ("deepseek/deepseek-chat", None, 60),
    ("groq/llama-3.3-70b", None, 120), ("anthropic/claude-sonnet-4-5", None, 5), ("xai/grok-4", None, 5),
    ("openrouter/some-model", None, 5), ("acme/unknown", None, 5),
])
def test_auto_idle_time_follows_the_actors_prompt_cache_lifetime(actor: str, retention: Any, minutes: int) -> None:
    assert resolve_idle_ms("auto", actor, retention) == minutes * 60_000


def test_auto_idle_time_reads_the_openai_retention_the_actor_asked_for() -> None:
    sim = Sim({"activateAfterIdle": "auto", **buffered()})
    sim.say("t1", "user", " ".join(["w"] * 14))
    sim.say("t1", "assistant", " ".join(["w"] * 14))
    sim.settle(1_000)
    # a 24-hour retention makes the idle time one hour: ten minutes of silence activate nothing
    sim.apply(sim.state().key, "r1", _said(sim, "m3", "openai/gpt-5-mini", "24h"))
    sim.say("t1", "user", TEN, advance_ms=10 * 60_000)
    assert not events(sim, "data-om-activation")
    sim.say("t1", "user", TEN, advance_ms=61 * 60_000)
    assert events(sim, "data-om-activation")[0].triggered_by == "ttl"


def _said(sim: Sim, msg_id: str, model: str, retention: str) -> Any:
    from datetime import UTC, datetime

    from om_stream import Message, TextPart
    from om_stream.core.inputs import MessageAppended
    sim.now += 1_000
    return MessageAppended(Message(message_id=msg_id, thread_id="t1", resource_id="r1", role="assistant",
                                   created_at=datetime.fromtimestamp(sim.now / 1000, UTC), model=model,
                                   prompt_cache_retention=retention,  # type: ignore[arg-type]
                                   parts=(TextPart(text="w w w"),)))


@pytest.mark.parametrize("command", ["observe", "reflect", "clear"])
async def test_a_command_without_a_thread_id_is_refused(command: str) -> None:
    async with Memory(clock=ManualClock(START_MS)) as om:
        with pytest.raises(InputRejected) as caught:
            await getattr(om, command)("")
        assert caught.value.reason == "invalid_fields"
        assert om.state("", "") is None


# -- 2a.6 shareTokenBudget ------------------------------------------------------------------------------------------

def test_a_shared_budget_lends_the_observation_space_to_messages() -> None:
    config = resolve({"shareTokenBudget": True, "observation": {"bufferTokens": False}})
    assert config.message_threshold(0) == 70_000  # 30k + 40k while the log is empty
    assert config.message_threshold(25_000) == 45_000
    assert config.message_threshold(40_000) == config.message_threshold(55_000) == 30_000  # never below its own
    assert config.observation_tokens == 40_000  # the reflection threshold stays as configured


def test_a_shared_budget_shows_in_the_status_thresholds() -> None:
    sim = Sim({"shareTokenBudget": True, "observation": {"messageTokens": 3_000, "bufferTokens": False},
               "reflection": {"observationTokens": 5_000}})
    sim.say("t1", "user", TEN)
    status = events(sim, "data-om-status")[-1]
    assert status.windows.active.messages.threshold == 8_000  # the whole budget: the log is empty
    assert status.windows.active.observations.threshold == 1_000  # what messages leave, at least 1 000


# -- 2a.7 options the embedded Memory and the worker honour ---------------------------------------------------------

def test_phase_level_idle_and_provider_change_settings_are_honoured() -> None:
    config = resolve({"observation": {"activateAfterIdle": "10m", "activateOnProviderChange": True},
                      "reflection": {"activateAfterIdle": "1h", "activateOnProviderChange": True}})
    assert (config.observation_idle, config.reflection_idle) == (600_000, 3_600_000)
    assert config.observation_provider_change and config.reflection_provider_change


def test_an_observation_idle_time_set_only_on_the_phase_activates_chunks() -> None:
    sim = Sim(buffered(activateAfterIdle="5m"))
    for _ in range(2):
        sim.say("t1", "user", " ".join(["w"] * 14))
        sim.say("t1", "assistant", " ".join(["w"] * 14))
        sim.settle(10_000)
    assert sim.state().buffered
    sim.say("t1", "user", TEN, advance_ms=6 * 60_000)
    assert [e.triggered_by for e in events(sim, "data-om-activation")][:1] == ["ttl"]


def test_thread_ids_are_obscured_in_resource_scope_unless_told_otherwise() -> None:
    assert resolve({"scope": "resource"}).obscure_thread_ids
    assert not resolve({"scope": "resource", "obscureThreadIds": False}).obscure_thread_ids
    assert not resolve({}).obscure_thread_ids
    assert resolve({"obscureThreadIds": True}).obscure_thread_ids


def test_managing_working_memory_adds_the_working_memory_extractor_once() -> None:
    added = resolve({"observation": {"manageWorkingMemory": True}}).observation_extractors
    assert [e.slug for e in added] == [WORKING_MEMORY_SLUG]
    mine = WorkingMemoryExtractor(template="# Profile")
    kept = resolve({"observation": {"manageWorkingMemory": True, "extract": [mine]}}).observation_extractors
    assert kept == (mine,)
    other = Extractor(name="mood", instructions="the user's mood")
    both = resolve({"observation": {"manageWorkingMemory": True, "extract": [other]}}).observation_extractors
    assert [e.slug for e in both] == ["mood", WORKING_MEMORY_SLUG]


def test_per_thread_overrides_change_only_the_two_thresholds() -> None:
    base = resolve({"observation": {"messageTokens": 10_000, "bufferTokens": 2_000}})
    overridden = base.with_overrides(4_000, 9_000)
    assert (overridden.message_tokens, overridden.observation_tokens) == (4_000, 9_000)
    assert overridden.buffer_tokens == base.buffer_tokens and overridden.observer_model == base.observer_model
    with pytest.raises(ConfigError):
        base.with_overrides(2_000, None)  # not above bufferTokens: refused, not silently ignored
