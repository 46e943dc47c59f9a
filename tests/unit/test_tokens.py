"""Token accounting with the real tiktoken counter, 'auto' idle TTLs per provider, and temporal gap wording."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.config import OMConfig
from om_stream.core.messages import FilePart, ImagePart, Message, Part, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.temporal import gap_text
from om_stream.core.tokens import CONVERSATION_OVERHEAD, MESSAGE_OVERHEAD, TokenAccountant
from om_stream.core.ttl import auto_ttl_ms, resolve_idle_ms
from om_stream.errors import ConfigError

MINUTE, HOUR = 60_000, 3_600_000
KB = 1024


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter()


@pytest.fixture(scope="module")
def accountant(counter: TiktokenCounter) -> TokenAccountant:
    return TokenAccountant(counter)


def message(*parts: Part, model: str | None = None) -> Message:
    return Message(message_id="m-1", thread_id="t-1", resource_id="r-1", role="user",
                   created_at=datetime(2025, 3, 1, tzinfo=UTC), parts=parts, model=model)


def image(accountant: TokenAccountant, model: str, **fields: Any) -> int:
    return accountant.part_tokens(ImagePart(url="https://example.com/cat.png", **fields), model)


def pdf(accountant: TokenAccountant, model: str, size: int) -> int:
    return accountant.part_tokens(FilePart(mime_type="application/pdf", size_bytes=size), model)


def big_tool_output() -> list[dict[str, Any]]:
    """A realistic tool result (rows of a query) whose JSON is over 50 000 characters."""
    return [{"id": i, "sku": hashlib.md5(str(i).encode()).hexdigest()[:8], "qty": i * 7 % 13} for i in range(1_500)]


# --- text and messages --------------------------------------------------------------------------------------------

def test_hello_world_is_two_o200k_tokens(counter: TiktokenCounter) -> None:
    assert counter.name == "o200k_base"
    assert counter("hello world") == 2
    assert counter("") == 0


def test_every_message_costs_a_fixed_overhead(accountant: TokenAccountant) -> None:
    assert accountant.message_tokens(message(TextPart(text="hello world"))) == 2 + MESSAGE_OVERHEAD
    assert accountant.message_tokens(message()) == MESSAGE_OVERHEAD
    two_parts = message(TextPart(text="hello world"), TextPart(text="hello world"))
    assert accountant.message_tokens(two_parts) == 4 + MESSAGE_OVERHEAD


def test_conversation_overhead_only_for_non_empty_lists(accountant: TokenAccountant) -> None:
    assert accountant.conversation_tokens([]) == 0
    assert accountant.conversation_tokens([6]) == 6 + CONVERSATION_OVERHEAD
    assert accountant.conversation_tokens([6, 10]) == 16 + CONVERSATION_OVERHEAD


def test_tool_call_counts_its_name_and_full_arguments(accountant: TokenAccountant, counter: TiktokenCounter) -> None:
    args = {"query": "weather in Paris", "days": 3}
    part = ToolCallPart(tool_call_id="c1", tool_name="get_weather", args=args)
    expected = counter("get_weather") + counter(json.dumps(args, sort_keys=True))
    assert expected < accountant.part_tokens(part) <= expected + 5
    huge = ToolCallPart(tool_call_id="c2", tool_name="write_file", args={"content": json.dumps(big_tool_output())})
    assert accountant.part_tokens(huge) > 10_000


def test_a_50k_character_tool_result_is_counted_in_full(accountant: TokenAccountant, counter: TiktokenCounter) -> None:
    rows = big_tool_output()
    text = json.dumps(rows)
    assert len(text) > 50_000
    as_text = accountant.part_tokens(ToolResultPart(tool_call_id="c1", tool_name="query", result=text))
    as_object = accountant.part_tokens(ToolResultPart(tool_call_id="c1", tool_name="query", result=rows))
    # the Observer later sees a truncated copy; the threshold must see what the agent really sends
    assert as_text >= counter(text) > 20_000
    assert as_object >= counter(json.dumps(rows, sort_keys=True)) > 20_000


def test_counts_are_deterministic_across_counters_and_calls(counter: TiktokenCounter) -> None:
    msg = message(TextPart(text="Ship the release on Friday after QA signs off."),
                  ToolResultPart(tool_call_id="c1", tool_name="query", result=big_tool_output()[:50]),
                  ImagePart(url="https://example.com/a.png", width=1200, height=900))
    first = TokenAccountant(counter).message_tokens(msg, "openai/gpt-4o")
    assert TokenAccountant(counter).message_tokens(msg, "openai/gpt-4o") == first
    assert TokenAccountant(TiktokenCounter()).message_tokens(msg, "openai/gpt-4o") == first  # cold cache


def test_the_actor_model_argument_wins_over_the_message_model(accountant: TokenAccountant) -> None:
    msg = message(ImagePart(url="https://example.com/a.png", width=1000, height=1000), model="anthropic/claude-4")
    assert accountant.message_tokens(msg) == MESSAGE_OVERHEAD + 1334  # the message's own model: Anthropic
    assert accountant.message_tokens(msg, "google/gemini-2.5-flash") == MESSAGE_OVERHEAD + 1032


# --- images -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "low"), [("openai/gpt-4o", 85), ("", 85), ("openai/gpt-4o-mini", 2833),
                                            ("openai/gpt-5-mini", 70)])
def test_openai_low_detail_costs_the_base_only(accountant: TokenAccountant, model: str, low: int) -> None:
    assert image(accountant, model, detail="low", width=4000, height=3000) == low


@pytest.mark.parametrize(("width", "height", "tokens"), [
    (1024, 1024, 765),  # scaled to 768 x 768: 4 tiles
    (2048, 4096, 1105),  # 768 x 1536: 6 tiles
    (4096, 8192, 1105),  # first fit in 2048, then the same
    (512, 512, 255),  # 1 tile
    (1000, 500, 425),  # shortest side under 768: 2 x 1 tiles
])
def test_openai_high_detail_tiles(accountant: TokenAccountant, width: int, height: int, tokens: int) -> None:
    assert image(accountant, "openai/gpt-4o", detail="high", width=width, height=height) == tokens


def test_openai_auto_detail_is_high_only_for_large_images(accountant: TokenAccountant) -> None:
    assert image(accountant, "openai/gpt-4o", width=700, height=700) == 255
    assert image(accountant, "openai/gpt-4o", width=2000, height=1000) == 1105


def test_gpt_4o_mini_and_gpt_5_have_their_own_costs(accountant: TokenAccountant) -> None:
    assert image(accountant, "openai/gpt-4o-mini", detail="high", width=1024, height=1024) == 2833 + 4 * 5667
    assert image(accountant, "openai/gpt-5", detail="high", width=1024, height=1024) == 70 + 4 * 140


@pytest.mark.parametrize(("width", "height", "tokens"), [
    (1000, 1000, 1334),  # ceil(1e6 / 750)
    (3136, 3136, 3279),  # long edge capped at 1568 first
    (1568, 784, 1640),
    (200, 100, 27),
])
def test_anthropic_images_cost_width_times_height_over_750(accountant: TokenAccountant, width: int, height: int,
                                                          tokens: int) -> None:
    assert image(accountant, "anthropic/claude-sonnet-4", width=width, height=height) == tokens


@pytest.mark.parametrize(("width", "height", "tokens"), [(768, 768, 258), (769, 768, 516), (1000, 1000, 1032),
                                                         (3000, 200, 1032)])
def test_google_images_cost_258_per_768_pixel_tile(accountant: TokenAccountant, width: int, height: int,
                                                   tokens: int) -> None:
    assert image(accountant, "google/gemini-2.5-flash", width=width, height=height) == tokens


@pytest.mark.parametrize("model", ["google/gemini-3-pro-preview", "gemini/gemini-3-flash", "vertex_ai/gemini-3.1-pro",
                                   "google/gemini-4-ultra"])
def test_gemini_3_and_later_cost_a_fixed_amount_per_image(accountant: TokenAccountant, model: str) -> None:
    assert image(accountant, model, width=300, height=300) == 1120
    assert image(accountant, model, width=4000, height=3000) == 1120
    assert image(accountant, model, size_bytes=5_000 * KB) == 1120
    assert image(accountant, model) == 1120


def test_a_google_model_without_a_version_is_counted_by_tiles(accountant: TokenAccountant) -> None:
    assert image(accountant, "google/gemini-exp-1206", width=1000, height=1000) == 1032


@pytest.mark.parametrize(("model", "size", "tokens"), [
    ("openai/gpt-4o", 100 * KB, 255), ("openai/gpt-4o", 1_500 * KB, 765), ("openai/gpt-4o", 3_000 * KB, 1105),
    ("openai/gpt-4o", 10_000 * KB, 1445),
    ("anthropic/claude-4", 100 * KB, 341), ("anthropic/claude-4", 800 * KB, 1366),
    ("anthropic/claude-4", 2_000 * KB, 2048), ("anthropic/claude-4", 5_000 * KB, 2731),
])
def test_images_without_dimensions_are_estimated_by_byte_size(accountant: TokenAccountant, model: str, size: int,
                                                              tokens: int) -> None:
    assert image(accountant, model, size_bytes=size) == tokens


def test_images_with_nothing_known_fall_back_deterministically(accountant: TokenAccountant) -> None:
    assert image(accountant, "openai/gpt-4o") == 85 + 4 * 170
    assert image(accountant, "anthropic/claude-4") == 1600
    assert image(accountant, "google/gemini-2.5-flash") == 258


def test_base64_data_gives_the_image_size(accountant: TokenAccountant) -> None:
    small = base64.b64encode(b"\0" * 100_000).decode()
    large = base64.b64encode(b"\0" * 600_000).decode()
    assert accountant.part_tokens(ImagePart(data=small), "openai/gpt-4o") == 255
    assert accountant.part_tokens(ImagePart(data=large), "openai/gpt-4o") == 765
    data_url = "data:image/png;base64," + large
    assert accountant.part_tokens(ImagePart(data=data_url), "anthropic/claude-4") == 1366


@pytest.mark.parametrize("model", ["anthropic/claude-4", "openai/gpt-4o-mini", "openai/gpt-5", "google/gemini-2.5"])
def test_an_image_sent_as_a_file_costs_the_same_as_an_image(accountant: TokenAccountant, model: str) -> None:
    as_file = accountant.part_tokens(FilePart(mime_type="image/png", size_bytes=100 * KB), model)
    assert as_file == image(accountant, model, size_bytes=100 * KB)


# --- files --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "small", "large"), [
    ("google/gemini-2.5-flash", 258, 5_000),  # max(258, bytes / 20)
    ("anthropic/claude-4", 1_500, 33_333),  # max(1500, bytes / 3)
    ("openai/gpt-4o", 500, 25_000),  # max(500, bytes / 4)
    ("mistral/large", 500, 25_000),
])
def test_pdfs_are_estimated_per_provider(accountant: TokenAccountant, model: str, small: int, large: int) -> None:
    assert pdf(accountant, model, 1_000) == small
    assert pdf(accountant, model, 100_000) == large


def test_text_files_cost_a_token_per_four_bytes(accountant: TokenAccountant) -> None:
    assert accountant.part_tokens(FilePart(mime_type="text/csv", size_bytes=4_000)) == 1_000
    data = base64.b64encode(b"a,b\n" * 1_000).decode()
    assert accountant.part_tokens(FilePart(mime_type="text/csv", data=data)) == 1_000


def test_files_of_unknown_size_cost_their_descriptor(accountant: TokenAccountant) -> None:
    short = accountant.part_tokens(FilePart(mime_type="application/zip", url="https://x/a.zip", filename="a.zip"))
    longer = accountant.part_tokens(FilePart(mime_type="application/zip", url="https://x/a.zip",
                                             filename="quarterly-report-final-version-2.zip"))
    assert 0 < short < longer < 100


# --- the counter's cache and encodings ----------------------------------------------------------------------------

def test_repeated_texts_hit_the_cache() -> None:
    counter = TiktokenCounter()
    first = counter("the quick brown fox")
    hits, misses = counter.hits, counter.misses
    assert counter("the quick brown fox") == first
    assert (counter.hits, counter.misses) == (hits + 1, misses)


def test_long_texts_are_cached_by_digest_not_by_value() -> None:
    counter = TiktokenCounter()
    text = "observational memory " * 200
    tokens = counter(text)
    assert counter(text) == tokens
    assert counter.hits == 1
    assert text not in counter._cache  # the key is a short digest, so memory stays bounded


def test_the_cache_is_bounded() -> None:
    counter = TiktokenCounter(cache_size=2)
    counter("alpha")
    counter("beta")
    counter("alpha")
    assert (counter.hits, counter.misses) == (1, 2)
    counter("gamma")  # full: the cache starts over
    assert len(counter._cache) <= 2
    counter("alpha")
    assert counter.misses == 4
    assert counter("alpha") == counter("alpha")


def test_cl100k_base_can_be_chosen() -> None:
    cl100k = TiktokenCounter("cl100k_base")
    assert cl100k.name == "cl100k_base"
    assert cl100k("hello world") == 2
    japanese = "こんにちは世界、お元気ですか"
    assert cl100k(japanese) != TiktokenCounter()(japanese)
    assert OMConfig.parse({"tokenEncoding": "cl100k_base"}).resolve().token_encoding == "cl100k_base"


def test_unknown_encodings_are_refused() -> None:
    with pytest.raises(ValueError, match="r50k_base"):
        TiktokenCounter("r50k_base")
    with pytest.raises(ConfigError):
        OMConfig.parse({"tokenEncoding": "r50k_base"})


# --- 'auto' idle activation -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "ttl"), [
    ("openai/gpt-5-mini", 5 * MINUTE), ("openai/gpt-5", 5 * MINUTE), ("openai/gpt-4o", 5 * MINUTE),
    ("openai/gpt-5.1-codex", 5 * MINUTE), ("openai/o3", HOUR), ("openai/gpt-5.6-sol", HOUR),
    ("google/gemini-2.5-flash", 24 * HOUR), ("gemini-2.5-pro", 24 * HOUR),
    ("anthropic/claude-sonnet-4", 5 * MINUTE), ("groq/llama-3.3-70b", 2 * HOUR),
    ("deepseek/deepseek-chat", HOUR), ("xai/grok-4", 5 * MINUTE), ("mistral/large", 5 * MINUTE), (None, 5 * MINUTE),
])
def test_auto_ttl_follows_the_providers_prompt_cache_lifetime(model: str | None, ttl: int) -> None:
    assert auto_ttl_ms(model) == ttl


def test_resolve_idle_ms() -> None:
    assert resolve_idle_ms(None, "google/gemini-2.5-flash") is None
    assert resolve_idle_ms("auto", "google/gemini-2.5-flash") == 24 * HOUR
    assert resolve_idle_ms(90_000, "google/gemini-2.5-flash") == 90_000


# --- temporal gap wording -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("gap", "text"), [
    (2 * HOUR + 5 * MINUTE, "2 hours 5 minutes"),
    (3 * 24 * HOUR + 4 * HOUR, "3 days 4 hours"),
    (15 * MINUTE, "15 minutes"),
    (HOUR, "1 hour"),
    (24 * HOUR + HOUR + MINUTE, "1 day 1 hour"),  # two units at most
    (2 * HOUR + 5 * MINUTE + 59_000, "2 hours 5 minutes"),  # seconds are dropped
    (MINUTE, "1 minute"),
])
def test_gap_text(gap: int, text: str) -> None:
    assert gap_text(gap) == text


def test_reasoning_parts_cost_nothing(accountant: TokenAccountant) -> None:
    from om_stream.core.messages import ReasoningPart

    thinking = Message(message_id="r", thread_id="t", resource_id="r", role="assistant",
                       created_at=datetime(2026, 1, 1, tzinfo=UTC), parts=(ReasoningPart(text="long thought " * 200),))
    assert accountant.message_tokens(thinking) == MESSAGE_OVERHEAD


@pytest.mark.parametrize(("model", "base", "tile"), [("openai/o3", 75, 150), ("openai/o1-mini", 75, 150),
                                                     ("openai/computer-use-preview", 65, 129)])
def test_o_series_and_computer_use_image_rates(accountant: TokenAccountant, model: str, base: int, tile: int) -> None:
    image = ImagePart(url="https://x/y.png", detail="low")
    assert accountant.part_tokens(image, model) == base
    assert accountant.part_tokens(ImagePart(url="https://x/y.png"), model) == base + 4 * tile


def test_gpt_4o_mini_assumes_one_tile_without_size(accountant: TokenAccountant) -> None:
    assert accountant.part_tokens(ImagePart(url="https://x/y.png"), "openai/gpt-4o-mini") == 2833 + 5667
