"""The documented configuration errors, each naming its option, and per-record threshold overrides."""

from __future__ import annotations

from typing import Any

import pytest

from om_stream.errors import ConfigError
from tests.support.config_options import NO_BUFFERING, at, merge, refused, resolve

# --- documented errors, each naming its option --------------------------------------------------------------------

@pytest.mark.parametrize("observation", [{"bufferTokens": 30_000}, {"bufferTokens": 45_000},
                                         {"messageTokens": 5_000, "bufferTokens": 5_000}])
def test_buffer_tokens_at_or_above_message_tokens_is_refused(observation: dict[str, Any]) -> None:
    assert refused({"observation": observation}).field == "observation.bufferTokens"


@pytest.mark.parametrize("value", [0, 0.0, -1, -0.5, True])
def test_buffer_tokens_not_positive_is_refused(value: Any) -> None:
    # 0 must not be read as false (which would silently turn buffering off)
    assert refused({"observation": {"bufferTokens": value}}).field == "observation.bufferTokens"


@pytest.mark.parametrize("value", [1.5, 5, 999, 0, -0.1])
def test_buffer_activation_neither_ratio_nor_retained_tokens_is_refused(value: float) -> None:
    assert refused({"observation": {"bufferActivation": value}}).field == "observation.bufferActivation"


@pytest.mark.parametrize("value", [30_000, 50_000])
def test_buffer_activation_retaining_the_whole_threshold_is_refused(value: int) -> None:
    assert refused({"observation": {"bufferActivation": value}}).field == "observation.bufferActivation"


@pytest.mark.parametrize("value", [0, 0.5, 0.99])
def test_block_after_below_one_is_refused(value: float) -> None:
    assert refused({"observation": {"blockAfter": value}}).field == "observation.blockAfter"


@pytest.mark.parametrize("value", [100, 200, 29_999])
def test_absolute_block_after_below_message_tokens_is_refused(value: int) -> None:
    assert refused({"observation": {"blockAfter": value}}).field == "observation.blockAfter"


@pytest.mark.parametrize("value", [0.9, 100, 39_999])
def test_reflection_block_after_below_observation_tokens_is_refused(value: float) -> None:
    assert refused({"reflection": {"blockAfter": value}}).field == "reflection.blockAfter"


@pytest.mark.parametrize("value", [0, -0.5, 1.01, 1_000])
def test_reflection_buffer_activation_outside_zero_one_is_refused(value: float) -> None:
    assert refused({"reflection": {"bufferActivation": value}}).field == "reflection.bufferActivation"


@pytest.mark.parametrize("observation", [{}, {"bufferTokens": 5_000}])
def test_share_token_budget_with_async_buffering_is_refused(observation: dict[str, Any]) -> None:
    error = refused({"shareTokenBudget": True, "observation": observation})
    assert error.field == "shareTokenBudget"
    assert "bufferTokens" in error.reason


@pytest.mark.parametrize(("options", "field"), [
    ({"observation": {"bufferTokens": 5_000}}, "observation.bufferTokens"),
    ({"observation": {"bufferActivation": 0.5}}, "observation.bufferActivation"),
    ({"observation": {"blockAfter": 1.5}}, "observation.blockAfter"),
    ({"reflection": {"bufferActivation": 0.5}}, "reflection.bufferActivation"),
    ({"reflection": {"blockAfter": 1.5}}, "reflection.blockAfter"),
])
def test_async_options_with_resource_scope_are_refused(options: dict[str, Any], field: str) -> None:
    assert refused(merge({"scope": "resource"}, options)).field == field


@pytest.mark.parametrize(("options", "field"), [
    ({"observation": {"bufferActivation": 0.5}}, "observation.bufferActivation"),
    ({"observation": {"blockAfter": 1.5}}, "observation.blockAfter"),
    ({"reflection": {"bufferActivation": 0.5}}, "reflection.bufferActivation"),
    ({"reflection": {"blockAfter": 1.5}}, "reflection.blockAfter"),
])
def test_buffering_options_while_buffer_tokens_is_false_are_refused(options: dict[str, Any], field: str) -> None:
    assert refused(merge(NO_BUFFERING, options)).field == field


@pytest.mark.parametrize("value", [-1, -0.5, float("inf"), float("-inf")])
def test_previous_observer_tokens_negative_or_infinite_is_refused(value: float) -> None:
    assert refused({"observation": {"previousObserverTokens": value}}).field == "observation.previousObserverTokens"


def test_previous_observer_tokens_zero_omits_and_false_disables_truncation() -> None:
    assert resolve({"observation": {"previousObserverTokens": 0}}).previous_observer_tokens == 0
    assert resolve({"observation": {"previousObserverTokens": False}}).previous_observer_tokens is None


@pytest.mark.parametrize(("options", "field"), [
    ({"observationalMemory": True}, "observationalMemory"),
    ({"messageTokens": 20_000}, "messageTokens"),
    ({"observation": {"messageTokenz": 20_000}}, "observation.messageTokenz"),
    ({"reflection": {"messageTokens": 20_000}}, "reflection.messageTokens"),
    ({"retrieval": {"vectors": True}}, "retrieval.vectors"),
])
def test_unknown_option_names_are_refused(options: dict[str, Any], field: str) -> None:
    assert refused(options).field == field


@pytest.mark.parametrize(("options", "field"), [
    ({"observation": {"messageTokens": 0}}, "observation.messageTokens"),
    ({"observation": {"messageTokens": -1}}, "observation.messageTokens"),
    ({"reflection": {"observationTokens": 0}}, "reflection.observationTokens"),
    ({"observation": {"maxTokensPerBatch": 0}}, "observation.maxTokensPerBatch"),
])
def test_non_positive_thresholds_are_refused(options: dict[str, Any], field: str) -> None:
    assert refused(options).field == field


@pytest.mark.parametrize("up_to", [{}, {"0": "a/b"}, {"-5": "a/b"}, {"1.5": "a/b"}, {"lots": "a/b"},
                                   {"10000": ""}])
@pytest.mark.parametrize("where", ["model", "observation.model", "reflection.model"])
def test_model_by_input_tokens_with_empty_map_or_bad_threshold_is_refused(where: str,
                                                                          up_to: dict[str, str]) -> None:
    error = refused(at(where, {"upTo": up_to}))
    assert error.field == f"{where}.upTo"
    assert "upTo" in error.reason


@pytest.mark.parametrize("where", ["model", "observation.model", "reflection.model"])
@pytest.mark.parametrize("chain", [[], [{"model": "a/b", "enabled": False}],
                                   [{"model": "a/b", "enabled": False}, {"model": "c/d", "enabled": False}]])
def test_fallback_list_without_an_enabled_entry_is_refused(where: str, chain: list[dict[str, Any]]) -> None:
    assert refused(at(where, chain)).field == where


def test_fallback_list_with_one_enabled_entry_is_accepted() -> None:
    config = resolve({"model": [{"model": "a/b", "enabled": False}, {"model": "c/d"}]})
    assert isinstance(config.observer_model, list)


@pytest.mark.parametrize(("options", "field"), [
    ({"scope": "global"}, "scope"),
    ({"retrieval": {"scope": "everywhere"}}, "retrieval.scope"),
    ({"tokenEncoding": "gpt2"}, "tokenEncoding"),
    ({"observation": {"modelSettings": {"temperature": 5}}}, "observation.modelSettings.temperature"),
    ({"observation": {"bufferTokens": "lots"}}, "observation.bufferTokens"),
])
def test_values_of_the_wrong_kind_are_refused_naming_the_option(options: dict[str, Any], field: str) -> None:
    assert refused(options).field == field


# --- per-record overrides -----------------------------------------------------------------------------------------

def test_message_override_resolves_ratios_against_the_new_threshold() -> None:
    config = resolve(True).with_overrides(10_000, None)
    assert (config.message_tokens, config.buffer_tokens, config.retention_floor, config.block_after) == (
        10_000, 2_000, 2_000, 12_000)
    assert config.observation_tokens == 40_000


def test_observation_override_moves_the_reflection_thresholds() -> None:
    config = resolve(True).with_overrides(None, 60_000)
    assert (config.observation_tokens, config.reflection_block_after, config.message_tokens) == (60_000, 72_000,
                                                                                                 30_000)


def test_overrides_keep_the_other_options() -> None:
    config = resolve({"model": "openai/gpt-5-mini", "temporalMarkers": True}).with_overrides(12_000, 20_000)
    assert config.observer_model == "openai/gpt-5-mini"
    assert config.temporal_markers


def test_no_override_returns_the_same_configuration() -> None:
    config = resolve(True)
    assert config.with_overrides(None, None) is config


@pytest.mark.parametrize("message_tokens", [6_000, 5_000, 100])
def test_message_override_at_or_below_buffer_tokens_is_refused(message_tokens: int) -> None:
    config = resolve({"observation": {"bufferTokens": 6_000}})
    with pytest.raises(ConfigError) as info:
        config.with_overrides(message_tokens, None)
    assert info.value.field == "observation.bufferTokens"


def test_message_override_at_or_below_retained_tokens_is_refused() -> None:
    config = resolve({"observation": {"bufferActivation": 4_000}})
    with pytest.raises(ConfigError) as info:
        config.with_overrides(4_000, None)
    assert info.value.field == "observation.bufferActivation"


@pytest.mark.parametrize("options", [True, NO_BUFFERING])
@pytest.mark.parametrize(("overrides", "field"), [((0, None), "observation.messageTokens"),
                                                  ((-5, None), "observation.messageTokens"),
                                                  ((None, 0), "reflection.observationTokens"),
                                                  ((None, -5), "reflection.observationTokens")])
def test_non_positive_overrides_are_refused(options: Any, overrides: tuple[int | None, int | None],
                                            field: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(options).with_overrides(*overrides)
    assert info.value.field == field
