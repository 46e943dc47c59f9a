"""Model naming (ModelByInputTokens, fallback lists, providers) and the Extractor API of the seeds."""

from __future__ import annotations

from typing import Any

import pytest

from om_stream.core.extractors import (
    BUILT_IN_SLUGS,
    RESERVED_SLUGS,
    WORKING_MEMORY_SLUG,
    ExtractionContext,
    Extractor,
    WorkingMemoryExtractor,
    slugify,
    validate_extractors,
)
from om_stream.core.model_spec import (
    DEFAULT_MODEL,
    ModelByInputTokens,
    ModelWithRetries,
    is_default_selection,
    model_name,
    provider_of,
)

SEEDS_TIERS = {10_000: "google/gemini-2.5-flash", 40_000: "openai/gpt-5-mini", 1_000_000: "openai/gpt-5.6-sol"}


# --- ModelByInputTokens -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("order", [list(SEEDS_TIERS), list(reversed(SEEDS_TIERS)), [40_000, 1_000_000, 10_000]])
def test_thresholds_are_sorted_whatever_the_key_order(order: list[int]) -> None:
    selector = ModelByInputTokens(up_to={k: SEEDS_TIERS[k] for k in order})
    assert selector.thresholds() == [10_000, 40_000, 1_000_000]
    assert selector.resolve(20_000) == "openai/gpt-5-mini"


@pytest.mark.parametrize(("tokens", "model"), [
    (0, "google/gemini-2.5-flash"), (10_000, "google/gemini-2.5-flash"), (10_001, "openai/gpt-5-mini"),
    (40_000, "openai/gpt-5-mini"), (40_001, "openai/gpt-5.6-sol"), (1_000_000, "openai/gpt-5.6-sol"),
])
def test_the_smallest_covering_threshold_picks_the_model(tokens: int, model: str) -> None:
    assert ModelByInputTokens(up_to=SEEDS_TIERS).resolve(tokens) == model


def test_input_above_the_largest_threshold_raises_value_error() -> None:
    selector = ModelByInputTokens(up_to=SEEDS_TIERS)
    with pytest.raises(ValueError, match="1000000"):
        selector.resolve(1_000_001)


def test_yaml_string_keys_are_token_counts() -> None:
    selector = ModelByInputTokens.model_validate({"upTo": {"40000": "openai/gpt-5-mini",
                                                           "10000": "google/gemini-2.5-flash"}})
    assert selector.thresholds() == [10_000, 40_000]
    assert selector.resolve(10_000) == "google/gemini-2.5-flash"
    assert selector == ModelByInputTokens(up_to={10_000: "google/gemini-2.5-flash", 40_000: "openai/gpt-5-mini"})


@pytest.mark.parametrize("up_to", [{}, {0: "a/b"}, {-10: "a/b"}, {"1.5": "a/b"}, {"inf": "a/b"}, {"many": "a/b"},
                                   {10: ""}, {10: 5}])
def test_empty_map_bad_thresholds_and_non_model_values_are_refused(up_to: dict[Any, Any]) -> None:
    with pytest.raises(ValueError, match="upTo"):
        ModelByInputTokens(up_to=up_to)


def test_only_the_default_selection_is_default() -> None:
    assert is_default_selection(None)
    assert is_default_selection("default")
    assert is_default_selection(ModelByInputTokens(up_to=SEEDS_TIERS))
    assert not is_default_selection("google/gemini-2.5-flash")
    assert not is_default_selection([ModelWithRetries(model="google/gemini-2.5-flash")])


def test_model_with_retries_reads_the_seeds_spelling() -> None:
    entry = ModelWithRetries.model_validate({"model": "openai/gpt-5-mini", "maxRetries": 3, "enabled": False,
                                             "modelSettings": {"maxOutputTokens": 900}})
    assert (entry.max_retries, entry.enabled, entry.model_settings and entry.model_settings.max_output_tokens) == (
        3, False, 900)


# --- provider_of and model_name -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "provider"), [
    ("openai/gpt-5-mini", "openai"), ("Anthropic/claude-sonnet-4", "anthropic"), ("google/gemini-2.5-flash", "google"),
    ("groq/llama-3.3-70b", "groq"), ("gpt-4o", "openai"), ("o3-mini", "openai"), ("claude-3-haiku", "anthropic"),
    ("gemini-2.5-pro", "google"), ("grok-4", "xai"), ("deepseek-chat", "deepseek"), ("llama-3", ""), ("", ""),
    (None, ""),
])
def test_provider_of(model: str | None, provider: str) -> None:
    assert provider_of(model) == provider


def test_model_name_of_each_kind_of_spec() -> None:
    assert model_name(None) == model_name("default") == DEFAULT_MODEL
    assert model_name("openai/gpt-5-mini") == "openai/gpt-5-mini"
    assert model_name(ModelByInputTokens(up_to={40_000: "b/large", 10_000: "a/small"})) == "a/small"
    chain = [ModelWithRetries(model="a/off", enabled=False), ModelWithRetries(model="b/on"),
             ModelWithRetries(model="c/last")]
    assert model_name(chain) == "b/on"


# --- extractor slugs ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "slug"), [
    ("User profile", "user-profile"), ("UPPER", "upper"), ("User's  Profile!!", "users-profile"),
    ('The "Best" Thing', "the-best-thing"), ("it’s done", "its-done"), ("Prefs 2", "prefs-2"),
    ("snake_case name", "snake-case-name"), ("  trim me  ", "trim-me"), ("--dash--", "dash"), ("a", "a"),
])
def test_slug_is_lowercase_with_hyphens_and_no_quotes(name: str, slug: str) -> None:
    assert slugify(name) == slug
    assert Extractor(name=name, instructions="x").slug == slug


@pytest.mark.parametrize("name", ["2nd thing", "42", "-", "!!!", "", "   "])
def test_slug_must_start_with_a_letter(name: str) -> None:
    with pytest.raises(ValueError, match="start with a letter"):
        Extractor(name=name, instructions="x")


def test_slug_is_derived_not_a_constructor_option() -> None:
    with pytest.raises(TypeError):
        Extractor(name="User profile", instructions="x", slug="other")  # type: ignore[call-arg]


@pytest.mark.parametrize("slug", sorted(RESERVED_SLUGS))
def test_reserved_slugs_are_refused(slug: str) -> None:
    with pytest.raises(ValueError, match="reserved") as info:
        validate_extractors([Extractor(name=slug.replace("-", " ").title(), instructions="x")], "observation.extract")
    assert str(info.value).startswith("observation.extract:")


def test_built_in_values_are_reserved() -> None:
    assert {"current-task", "suggested-response", "thread-title"} == BUILT_IN_SLUGS
    assert BUILT_IN_SLUGS <= RESERVED_SLUGS


def test_duplicate_slugs_are_refused() -> None:
    first, second = Extractor(name="User profile", instructions="a"), Extractor(name="user-profile", instructions="b")
    with pytest.raises(ValueError, match="user-profile") as info:
        validate_extractors([first, second], "reflection.extract")
    assert str(info.value).startswith("reflection.extract:")


def test_valid_extractors_are_kept_in_order() -> None:
    extractors = [Extractor(name=n, instructions="x") for n in ("Zeta", "Alpha", "Mood")]
    assert validate_extractors(extractors, "observation.extract") == tuple(extractors)


def test_non_extractor_entries_are_refused() -> None:
    with pytest.raises(ValueError, match="Extractor"):
        validate_extractors(["user profile"], "observation.extract")  # type: ignore[list-item]


# --- persistence path, modes, instructions ------------------------------------------------------------------------

def test_metadata_path_defaults_to_extracted_slug() -> None:
    assert Extractor(name="User profile", instructions="x").metadata_path() == "extracted.user-profile"


def test_metadata_path_false_disables_persistence() -> None:
    assert Extractor(name="User profile", instructions="x", metadata_key_path=False).metadata_path() is None


def test_metadata_path_is_used_as_given_or_as_a_prefix() -> None:
    assert Extractor(name="Mood", instructions="x", metadata_key_path="profile.mood").metadata_path() == "profile.mood"
    assert Extractor(name="Mood", instructions="x", metadata_key_path="custom.").metadata_path() == "custom.mood"


def test_metadata_path_true_is_refused() -> None:
    with pytest.raises(ValueError, match="metadataKeyPath"):
        Extractor(name="Mood", instructions="x", metadata_key_path=True)


def test_extractor_without_schema_is_inline_and_with_schema_is_structured() -> None:
    assert Extractor(name="Mood", instructions="x").inline
    assert not Extractor(name="Mood", instructions="x", schema={"type": "object"}).inline


def test_instructions_may_depend_on_the_runtime_context() -> None:
    extractor = Extractor(name="Mood", instructions=lambda ctx: f"{ctx.source} of {ctx.thread_id}")
    context = ExtractionContext(source="reflection", thread_id="t-1", resource_id=None)
    assert extractor.instructions_for(context) == "reflection of t-1"
    assert Extractor(name="Mood", instructions="fixed").instructions_for(context) == "fixed"


def test_working_memory_extractor_is_not_persisted_nor_shown_its_previous_value() -> None:
    extractor = WorkingMemoryExtractor(template="# Name\n# City")
    assert extractor.slug == WORKING_MEMORY_SLUG == "working-memory"
    assert extractor.metadata_path() is None
    assert not extractor.include_previous_extraction
    assert extractor.inline
    assert "# City" in extractor.instructions_for(ExtractionContext("observation", "t", "r"))
    assert not WorkingMemoryExtractor(schema={"type": "object"}).inline
