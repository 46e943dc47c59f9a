"""The ``observationalMemory`` option of the seeds: its forms, every option, defaults, encodings, scopes,
retrieval and extractors (the documented errors and overrides: ``test_config_errors.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from om_stream.core.config import ObserveHooks, OMConfig, RetrievalConfig
from om_stream.core.extractors import WORKING_MEMORY_SLUG, Extractor
from om_stream.core.model_spec import DEFAULT_MODEL, ModelByInputTokens, ModelWithRetries
from tests.support.config_options import NO_BUFFERING, PROFILE, TOPICS, at, merge, refused, resolve, snake

# --- the option's forms -------------------------------------------------------------------------------------------

def test_true_enables_om_with_the_default_model() -> None:
    config = resolve(True)
    assert config.enabled
    assert config.observer_model == config.reflector_model == "google/gemini-2.5-flash"


def test_false_disables_om() -> None:
    assert OMConfig.parse(False).enabled is False
    assert resolve(False).enabled is False


def test_object_enables_om_unless_enabled_is_false() -> None:
    assert resolve({}).enabled
    assert resolve({"scope": "thread"}).enabled
    assert resolve({"enabled": False}).enabled is False


def test_an_already_parsed_config_is_returned_as_is() -> None:
    config = OMConfig.parse({"temporalMarkers": True})
    assert OMConfig.parse(config) is config


# --- every option, in the seeds' camelCase and in snake_case ------------------------------------------------------

_OPTIONS: list[tuple[str, dict[str, Any], Any, Any]] = [
    ("enabled", {"enabled": False}, lambda r: r.enabled, False),
    ("model", {"model": "openai/gpt-5-mini"}, lambda r: (r.observer_model, r.reflector_model),
     ("openai/gpt-5-mini", "openai/gpt-5-mini")),
    ("scope", {"scope": "resource"}, lambda r: r.scope, "resource"),
    ("activateAfterIdle", {"activateAfterIdle": "5m"}, lambda r: r.observation_idle, 300_000),
    ("activateOnProviderChange", {"activateOnProviderChange": True}, lambda r: r.observation_provider_change, True),
    ("shareTokenBudget", merge({"shareTokenBudget": True}, NO_BUFFERING), lambda r: r.share_token_budget, True),
    ("temporalMarkers", {"temporalMarkers": True}, lambda r: r.temporal_markers, True),
    ("retrieval", {"retrieval": {"vector": True, "scope": "thread"}}, lambda r: r.retrieval,
     RetrievalConfig(vector=True, scope="thread")),
    ("obscureThreadIds", {"obscureThreadIds": True}, lambda r: r.obscure_thread_ids, True),
    ("tokenEncoding", {"tokenEncoding": "cl100k_base"}, lambda r: r.token_encoding, "cl100k_base"),
    ("observation.model", {"observation": {"model": "openai/gpt-5-mini"}}, lambda r: r.observer_model,
     "openai/gpt-5-mini"),
    ("observation.instruction", {"observation": {"instruction": "Focus on diets."}},
     lambda r: r.observation_instruction, "Focus on diets."),
    ("observation.threadTitle", {"observation": {"threadTitle": True}}, lambda r: r.thread_title, True),
    ("observation.extract", {"observation": {"extract": [PROFILE]}},
     lambda r: [e.slug for e in r.observation_extractors], ["user-profile"]),
    ("observation.manageWorkingMemory", {"observation": {"manageWorkingMemory": True}},
     lambda r: [e.slug for e in r.observation_extractors], [WORKING_MEMORY_SLUG]),
    ("observation.observeAttachments", {"observation": {"observeAttachments": ["image/*"]}},
     lambda r: r.observe_attachments, ("image/*",)),
    ("observation.messageTokens", {"observation": {"messageTokens": 20_000}}, lambda r: r.message_tokens, 20_000),
    ("observation.maxTokensPerBatch", {"observation": {"maxTokensPerBatch": 5_000}},
     lambda r: r.max_tokens_per_batch, 5_000),
    ("observation.modelSettings", {"observation": {"modelSettings": {"temperature": 0.7, "maxOutputTokens": 5_000}}},
     lambda r: (r.observer_settings.temperature, r.observer_settings.max_output_tokens), (0.7, 5_000)),
    ("observation.providerOptions", {"observation": {"providerOptions": {"openai": {"reasoningEffort": "low"}}}},
     lambda r: r.observer_provider_options, {"openai": {"reasoningEffort": "low"}}),
    ("observation.bufferTokens", {"observation": {"bufferTokens": 5_000}}, lambda r: r.buffer_tokens, 5_000),
    ("observation.bufferOnIdle", {"observation": {"bufferOnIdle": True}}, lambda r: r.buffer_on_idle, True),
    ("observation.bufferActivation", {"observation": {"bufferActivation": 0.7}}, lambda r: r.retention_floor, 9_000),
    ("observation.activateAfterIdle", {"observation": {"activateAfterIdle": "1hr"}}, lambda r: r.observation_idle,
     3_600_000),
    ("observation.activateOnProviderChange", {"observation": {"activateOnProviderChange": True}},
     lambda r: r.observation_provider_change, True),
    ("observation.blockAfter", {"observation": {"blockAfter": 1.5}}, lambda r: r.block_after, 45_000),
    ("observation.previousObserverTokens", {"observation": {"previousObserverTokens": 500}},
     lambda r: r.previous_observer_tokens, 500),
    ("observation.continuationHints", {"observation": {"continuationHints": False}}, lambda r: r.observation_hints,
     False),
    ("reflection.model", {"reflection": {"model": "openai/gpt-5-mini"}}, lambda r: r.reflector_model,
     "openai/gpt-5-mini"),
    ("reflection.instruction", {"reflection": {"instruction": "Group health facts."}},
     lambda r: r.reflection_instruction, "Group health facts."),
    ("reflection.extract", {"reflection": {"extract": [TOPICS]}},
     lambda r: [e.slug for e in r.reflection_extractors], ["topics"]),
    ("reflection.observationTokens", {"reflection": {"observationTokens": 60_000}}, lambda r: r.observation_tokens,
     60_000),
    ("reflection.modelSettings", {"reflection": {"modelSettings": {"temperature": 0.2, "maxOutputTokens": 8_000}}},
     lambda r: (r.reflector_settings.temperature, r.reflector_settings.max_output_tokens), (0.2, 8_000)),
    ("reflection.providerOptions", {"reflection": {"providerOptions": {"google": {"thinkingConfig": {}}}}},
     lambda r: r.reflector_provider_options, {"google": {"thinkingConfig": {}}}),
    ("reflection.bufferActivation", {"reflection": {"bufferActivation": 0.25}},
     lambda r: r.reflection_buffer_activation, 0.25),
    ("reflection.activateAfterIdle", {"reflection": {"activateAfterIdle": "30s"}}, lambda r: r.reflection_idle,
     30_000),
    ("reflection.activateOnProviderChange", {"reflection": {"activateOnProviderChange": True}},
     lambda r: r.reflection_provider_change, True),
    ("reflection.blockAfter", {"reflection": {"blockAfter": 1.5}}, lambda r: r.reflection_block_after, 60_000),
    ("reflection.continuationHints", {"reflection": {"continuationHints": False}}, lambda r: r.reflection_hints,
     False),
]


@pytest.mark.parametrize(("options", "read", "expected"), [o[1:] for o in _OPTIONS], ids=[o[0] for o in _OPTIONS])
def test_every_option_is_accepted_in_camel_case_and_snake_case(options: dict[str, Any], read: Any,
                                                               expected: Any) -> None:
    camel, python = resolve(options), resolve(snake(options))
    assert read(camel) == expected
    assert read(resolve(True)) != expected  # the option really changed something
    assert camel == python


def test_hooks_object_is_accepted_and_excluded_from_serialisation() -> None:
    seen: list[str] = []
    hooks = ObserveHooks(on_observation_end=lambda **_: seen.append("end"))
    config = OMConfig.parse({"hooks": hooks, "temporalMarkers": True})
    assert config.hooks is hooks
    assert config.resolve().options.hooks is hooks
    assert "hooks" not in config.model_dump()
    assert "hooks" not in config.model_dump(by_alias=True)
    assert "hooks" not in config.model_dump_json()


def test_options_written_back_in_the_seeds_spelling_read_back_the_same() -> None:
    options = {
        "model": {"upTo": {"40000": "openai/gpt-5-mini", "10000": "google/gemini-2.5-flash"}},
        "activateAfterIdle": "auto",
        "retrieval": True,
        "observation": {"messageTokens": 20_000, "bufferTokens": 0.25, "bufferActivation": 4_000,
                        "blockAfter": 25_000, "observeAttachments": ["image/*", "application/pdf"],
                        "previousObserverTokens": 0},
        "reflection": {"observationTokens": 50_000, "bufferActivation": 0.4, "activateAfterIdle": 60_000},
    }
    first = OMConfig.parse(options)
    again = OMConfig.parse(first.model_dump(mode="json", by_alias=True))
    assert again.resolve() == first.resolve()


# --- defaults -----------------------------------------------------------------------------------------------------

def test_documented_defaults() -> None:
    config = resolve(True)
    assert config.scope == "thread"
    assert config.message_tokens == 30_000
    assert config.observation_tokens == 40_000
    assert config.max_tokens_per_batch == 10_000
    assert config.previous_observer_tokens == 2_000
    assert not config.share_token_budget
    assert not config.temporal_markers
    assert config.retrieval is None
    assert config.observation_idle is None
    assert config.reflection_idle is None
    assert not config.observation_provider_change
    assert not config.reflection_provider_change
    assert not config.thread_title
    assert config.observe_attachments is True
    assert not config.buffer_on_idle
    assert not config.obscure_thread_ids


def test_async_buffering_is_on_by_default_with_the_documented_sizes() -> None:
    config = resolve(True)
    assert config.async_buffering
    assert config.buffer_tokens == 6_000  # 0.2 x 30k
    assert config.buffer_activation == 0.8
    assert config.retention_floor == 6_000  # 20 % of 30k kept
    assert config.block_after == 36_000  # 1.2 x 30k
    assert config.reflection_buffer_activation == 0.5
    assert config.reflection_block_after == 48_000  # 1.2 x 40k


def test_defaults_follow_a_custom_message_threshold() -> None:
    config = resolve({"observation": {"messageTokens": 50_000}})
    assert (config.buffer_tokens, config.retention_floor, config.block_after) == (10_000, 10_000, 60_000)


@pytest.mark.parametrize("options", [{}, {"model": "default"}, {"observation": {"model": "default"}},
                                     {"reflection": {"model": "default"}}])
def test_default_model_is_gemini_flash_for_both_agents(options: dict[str, Any]) -> None:
    config = resolve(options)
    assert config.observer_model == config.reflector_model == DEFAULT_MODEL == "google/gemini-2.5-flash"


@pytest.mark.parametrize("model", [None, "default", {"upTo": {"10000": "google/gemini-2.5-flash",
                                                              "1000000": "openai/gpt-5-mini"}}])
def test_max_output_tokens_defaults_to_100000_for_the_default_selection(model: Any) -> None:
    config = resolve({} if model is None else {"model": model})
    assert config.observer_settings.max_output_tokens == 100_000
    assert config.reflector_settings.max_output_tokens == 100_000


@pytest.mark.parametrize("model", ["openai/gpt-5-mini",
                                   [{"model": "openai/gpt-5-mini", "maxRetries": 2}, {"model": "groq/llama"}]])
def test_custom_models_get_no_max_output_tokens_default(model: Any) -> None:
    config = resolve({"model": model})
    assert config.observer_settings.max_output_tokens is None
    assert config.reflector_settings.max_output_tokens is None


def test_user_model_settings_keep_the_defaults_they_do_not_set() -> None:
    config = resolve({"observation": {"modelSettings": {"temperature": 0.9}}})
    assert config.observer_settings.temperature == 0.9
    assert config.observer_settings.max_output_tokens == 100_000


def test_fallback_lists_and_token_tiers_are_kept_as_given() -> None:
    tiers = resolve({"model": {"upTo": {"10000": "a/small"}}})
    assert tiers.observer_model == ModelByInputTokens(up_to={10_000: "a/small"})
    chain = resolve({"observation": {"model": [{"model": "a/one", "maxRetries": 1}, {"model": "b/two"}]}})
    assert chain.observer_model == [ModelWithRetries(model="a/one", max_retries=1), ModelWithRetries(model="b/two")]


# --- ratio versus absolute encodings ------------------------------------------------------------------------------

def test_buffer_tokens_ratio_is_a_fraction_of_message_tokens() -> None:
    assert resolve({"observation": {"bufferTokens": 0.25}}).buffer_tokens == 7_500


@pytest.mark.parametrize(("value", "expected"), [(5_000, 5_000), (1, 1), (29_999, 29_999)])
def test_buffer_tokens_of_one_or_more_is_absolute(value: int, expected: int) -> None:
    assert resolve({"observation": {"bufferTokens": value}}).buffer_tokens == expected


def test_buffer_tokens_false_disables_all_async_buffering() -> None:
    config = resolve(NO_BUFFERING)
    assert not config.async_buffering
    assert config.buffer_tokens is config.block_after is config.buffer_activation is None
    assert config.reflection_buffer_activation is config.reflection_block_after is None
    assert config.retention_floor == 0
    assert config.message_limit == 30_000


def test_buffer_activation_ratio_is_the_fraction_removed() -> None:
    config = resolve({"observation": {"bufferActivation": 0.7}})
    assert config.buffer_activation == 0.7
    assert config.retention_floor == 9_000  # 30 % of 30k kept


def test_buffer_activation_of_1000_or_more_is_tokens_to_retain() -> None:
    assert resolve({"observation": {"bufferActivation": 4_000}}).retention_floor == 4_000
    assert resolve({"observation": {"bufferActivation": 1_000}}).retention_floor == 1_000


def test_buffer_activation_meaning_is_inverted_between_ratio_and_tokens() -> None:
    def floor(value: float) -> int:
        return resolve({"observation": {"bufferActivation": value}}).retention_floor

    assert floor(0.9) < floor(0.5)  # a higher ratio removes more
    assert floor(8_000) > floor(2_000)  # a higher token count keeps more


@pytest.mark.parametrize(("value", "expected"), [(1, 30_000), (1.5, 45_000), (99, 2_970_000)])
def test_block_after_below_100_is_a_multiplier_of_message_tokens(value: float, expected: int) -> None:
    assert resolve({"observation": {"blockAfter": value}}).block_after == expected


def test_block_after_of_100_or_more_is_absolute() -> None:
    assert resolve({"observation": {"blockAfter": 45_000}}).block_after == 45_000
    small = {"observation": {"messageTokens": 90}}
    assert resolve(merge(small, {"observation": {"blockAfter": 100}})).block_after == 100
    assert resolve(merge(small, {"observation": {"blockAfter": 99}})).block_after == 8_910


def test_reflection_block_after_uses_the_same_encoding_on_observation_tokens() -> None:
    assert resolve({"reflection": {"blockAfter": 1.5}}).reflection_block_after == 60_000
    assert resolve({"reflection": {"blockAfter": 50_000}}).reflection_block_after == 50_000


def test_reflection_buffer_activation_accepts_the_whole_ratio_range() -> None:
    assert resolve({"reflection": {"bufferActivation": 1}}).reflection_buffer_activation == 1
    assert resolve({"reflection": {"bufferActivation": 0.01}}).reflection_buffer_activation == 0.01


# --- durations and their inheritance ------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    (300_000, 300_000), (300_000.0, 300_000), (0, 0), ("5m", 300_000), ("1hr", 3_600_000), ("30s", 30_000),
    ("250ms", 250), ("2 hours", 7_200_000), ("1.5h", 5_400_000), ("10 MINUTES", 600_000), ("auto", "auto"),
    ("Auto", "auto"), (False, None),
])
def test_activate_after_idle_accepts_milliseconds_durations_auto_and_false(value: Any, expected: Any) -> None:
    assert resolve({"activateAfterIdle": value}).observation_idle == expected
    assert resolve({"observation": {"activateAfterIdle": value}}).observation_idle == expected
    assert resolve({"reflection": {"activateAfterIdle": value}}).reflection_idle == expected


@pytest.mark.parametrize("value", ["5 parsecs", "soon", "5", "m5", "-5m", "", True, -1, float("inf"), [5]])
@pytest.mark.parametrize("field", ["activateAfterIdle", "observation.activateAfterIdle",
                                   "reflection.activateAfterIdle"])
def test_bad_activate_after_idle_is_refused_naming_its_level(field: str, value: Any) -> None:
    assert refused(at(field, value)).field == field


def test_observation_inherits_the_top_level_idle_time() -> None:
    assert resolve({"activateAfterIdle": "5m"}).observation_idle == 300_000


def test_observation_idle_time_overrides_the_top_level_one() -> None:
    config = resolve({"activateAfterIdle": "5m", "observation": {"activateAfterIdle": "1hr"}})
    assert config.observation_idle == 3_600_000


def test_observation_idle_false_disables_the_inherited_value() -> None:
    assert resolve({"activateAfterIdle": "5m", "observation": {"activateAfterIdle": False}}).observation_idle is None


def test_reflection_never_inherits_the_top_level_idle_time() -> None:
    config = resolve({"activateAfterIdle": "5m"})
    assert config.reflection_idle is None
    only_reflection = resolve({"reflection": {"activateAfterIdle": "auto"}})
    assert only_reflection.reflection_idle == "auto"
    assert only_reflection.observation_idle is None


def test_observation_inherits_activate_on_provider_change_and_reflection_does_not() -> None:
    config = resolve({"activateOnProviderChange": True})
    assert config.observation_provider_change
    assert not config.reflection_provider_change


def test_observation_activate_on_provider_change_false_overrides_the_top_level() -> None:
    config = resolve({"activateOnProviderChange": True, "observation": {"activateOnProviderChange": False}})
    assert not config.observation_provider_change


def test_reflection_activate_on_provider_change_must_be_set_explicitly() -> None:
    config = resolve({"reflection": {"activateOnProviderChange": True}})
    assert config.reflection_provider_change
    assert not config.observation_provider_change


# --- model precedence ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "observer", "reflector"), [
    ({"model": "a/top"}, "a/top", "a/top"),
    ({"observation": {"model": "b/obs"}}, "b/obs", "b/obs"),
    ({"reflection": {"model": "c/refl"}}, "c/refl", "c/refl"),
    ({"observation": {"model": "b/obs"}, "reflection": {"model": "c/refl"}}, "b/obs", "c/refl"),
    ({}, DEFAULT_MODEL, DEFAULT_MODEL),
])
def test_observer_and_reflector_model_precedence(options: dict[str, Any], observer: str, reflector: str) -> None:
    config = resolve(options)
    assert (config.observer_model, config.reflector_model) == (observer, reflector)


def test_model_and_observation_model_together_is_an_error() -> None:
    error = refused({"model": "a/top", "observation": {"model": "b/obs"}})
    assert error.field == "model"
    assert "observation.model" in error.reason


def test_model_and_reflection_model_together_is_an_error() -> None:
    error = refused({"model": "a/top", "reflection": {"model": "c/refl"}})
    assert error.field == "model"
    assert "reflection.model" in error.reason


@pytest.mark.parametrize("field", ["model", "observation.model", "reflection.model"])
def test_empty_model_name_is_refused(field: str) -> None:
    assert refused(at(field, "  ")).field == field


# --- shareTokenBudget ---------------------------------------------------------------------------------------------

def test_share_token_budget_lets_messages_use_what_observations_leave_free() -> None:
    config = resolve(merge({"shareTokenBudget": True}, NO_BUFFERING))
    assert config.message_threshold(0) == 70_000
    assert config.message_threshold(10_000) == 60_000
    assert config.message_threshold(40_000) == 30_000
    assert config.message_threshold(55_000) == 30_000  # never below messageTokens
    assert config.observation_tokens == 40_000  # the reflection threshold stays a plain number


def test_share_token_budget_seeds_example() -> None:
    config = resolve({"shareTokenBudget": True, "observation": {"messageTokens": 20_000, "bufferTokens": False},
                      "reflection": {"observationTokens": 80_000}})
    assert config.message_threshold(30_000) == 70_000


def test_without_share_token_budget_the_message_threshold_is_fixed() -> None:
    config = resolve(True)
    assert config.message_threshold(0) == config.message_threshold(39_000) == 30_000


# --- resource scope -----------------------------------------------------------------------------------------------

def test_resource_scope_turns_async_buffering_off_and_obscures_thread_ids() -> None:
    config = resolve({"scope": "resource"})
    assert not config.async_buffering
    assert config.block_after is None
    assert config.reflection_buffer_activation is None
    assert config.obscure_thread_ids


def test_resource_scope_accepts_buffer_tokens_false_and_an_explicit_obscure_choice() -> None:
    assert not resolve({"scope": "resource", **NO_BUFFERING}).async_buffering
    assert not resolve({"scope": "resource", "obscureThreadIds": False}).obscure_thread_ids


def test_thread_scope_keeps_thread_ids_readable_unless_asked() -> None:
    assert not resolve({}).obscure_thread_ids
    assert resolve({"obscureThreadIds": True}).obscure_thread_ids


# --- retrieval, attachments, extractors ---------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    (True, RetrievalConfig(vector=False, scope="resource")),
    ({}, RetrievalConfig(vector=False, scope="resource")),
    ({"vector": True}, RetrievalConfig(vector=True, scope="resource")),
    ({"scope": "thread", "instructions": "Prefer the newest thread."},
     RetrievalConfig(scope="thread", instructions="Prefer the newest thread.")),
    (False, None),
])
def test_retrieval_forms(value: Any, expected: RetrievalConfig | None) -> None:
    assert resolve({"retrieval": value}).retrieval == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("auto", "auto"), (True, True), (False, False),
    (["image/*", "application/pdf"], ("image/*", "application/pdf")), (["*"], ("*",)),
])
def test_observe_attachments_forms(value: Any, expected: Any) -> None:
    assert resolve({"observation": {"observeAttachments": value}}).observe_attachments == expected


@pytest.mark.parametrize("value", ["sometimes", [""], ["image/*", "  "]])
def test_bad_observe_attachments_is_refused(value: Any) -> None:
    assert refused({"observation": {"observeAttachments": value}}).field == "observation.observeAttachments"


def test_extract_lists_take_extractor_objects_for_each_phase() -> None:
    config = resolve({"observation": {"extract": [PROFILE, TOPICS]}, "reflection": {"extract": [TOPICS]}})
    assert config.observation_extractors == (PROFILE, TOPICS)
    assert config.reflection_extractors == (TOPICS,)


@pytest.mark.parametrize("name", ["Current task", "suggested response", "Thread Title", "Observations", "User"])
def test_extractors_with_reserved_slugs_are_refused(name: str) -> None:
    error = refused({"observation": {"extract": [Extractor(name=name, instructions="x")]}})
    assert error.field == "observation.extract"


def test_extractors_sharing_a_slug_are_refused() -> None:
    twin = Extractor(name="USER PROFILE!", instructions="x")
    error = refused({"reflection": {"extract": [PROFILE, twin]}})
    assert error.field == "reflection.extract"
    assert "user-profile" in error.reason


def test_extract_entries_must_be_extractors() -> None:
    assert refused({"observation": {"extract": ["user profile"]}}).field.startswith("observation.extract")


def test_manage_working_memory_adds_the_working_memory_extractor_once() -> None:
    config = resolve({"observation": {"manageWorkingMemory": True, "extract": [PROFILE]}})
    assert [e.slug for e in config.observation_extractors] == ["user-profile", WORKING_MEMORY_SLUG]
    assert config.reflection_extractors == ()
    own = Extractor(name="Working memory", instructions="mine")
    config = resolve({"observation": {"manageWorkingMemory": True, "extract": [own]}})
    assert config.observation_extractors == (own,)


def test_without_manage_working_memory_no_extractor_is_added() -> None:
    assert resolve({"observation": {"extract": [PROFILE]}}).observation_extractors == (PROFILE,)
