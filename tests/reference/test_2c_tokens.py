"""§2c of the reference: what a message costs against the thresholds, and the token budgets of the prompts.

om-stream counts text with tiktoken instead of the reference's word heuristic (README, "Where om-stream differs"):
the tests below check the counts it documents, and that everything around the text count behaves as described.
"""

from __future__ import annotations

import json

import pytest

from om_stream import FilePart, ImagePart, Memory, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.inputs import MessageAppended
from om_stream.core.prompts.parsing import parse_observer_output
from om_stream.core.prompts.transcript import (
    ARGS_TOKEN_LIMIT,
    RESULT_TOKEN_LIMIT,
    outline_args,
    render_messages,
    truncate_to_tokens,
)
from om_stream.core.tokens import CONVERSATION_OVERHEAD, MESSAGE_OVERHEAD, TokenAccountant
from om_stream.runtime.embedded import ManualClock
from tests.reference import START, START_MS, message
from tests.support.engine_cases import TEN, buffered
from tests.support.sim import Sim

COUNTER = TiktokenCounter()
ACCOUNTANT = TokenAccountant(COUNTER.count)


def one(part: object, model: str = "") -> int:
    """The tokens of a message holding only ``part``, without the per-message overhead."""
    msg = Message(message_id="x", thread_id="t", resource_id="r", role="user", created_at=START,
                  parts=(part,))  # type: ignore[arg-type]
    return ACCOUNTANT.message_tokens(msg, model) - MESSAGE_OVERHEAD


# -- 2c.1 text ------------------------------------------------------------------------------------------------------

async def test_thresholds_count_text_with_the_configured_tokenizer() -> None:
    text = "Internationalization of the checkout flow, 2026-03-14 (v2.1.0) — naïve café"
    for encoding in ("o200k_base", "cl100k_base"):
        async with Memory({"tokenEncoding": encoding}, clock=ManualClock(START_MS)) as om:
            await om.add_message(Message(message_id="m1", thread_id="t1", resource_id="r1", role="user",
                                         created_at=START, parts=(TextPart(text=text),)))
            state = om.state("t1", "r1")
        assert state is not None
        assert state.unobserved_tokens == TiktokenCounter(encoding).count(text) + MESSAGE_OVERHEAD


# -- 2c.2 messages --------------------------------------------------------------------------------------------------

def test_every_message_costs_a_fixed_overhead_and_a_conversation_one_more() -> None:
    assert ACCOUNTANT.message_tokens(message(1, "")) - MESSAGE_OVERHEAD == COUNTER.count("[id=m1] ")
    assert ACCOUNTANT.conversation_tokens([]) == 0
    assert ACCOUNTANT.conversation_tokens([10, 20]) == 30 + CONVERSATION_OVERHEAD


def test_a_tool_call_costs_its_name_and_arguments_and_a_result_is_counted_in_full() -> None:
    args = {"city": "Lisbon", "days": 3}
    call = one(ToolCallPart(tool_call_id="c1", tool_name="weather", args=args))
    assert call >= COUNTER.count("weather") + COUNTER.count(json.dumps(args))
    huge = "row " * (RESULT_TOKEN_LIMIT * 3)  # three times what the Observer is shown
    result = one(ToolResultPart(tool_call_id="c1", tool_name="weather", result=huge))
    assert result >= COUNTER.count(huge)


def test_reasoning_costs_nothing() -> None:
    assert one(ReasoningPart(text="let me think about this at length " * 50)) == 0


@pytest.mark.parametrize(("image", "model", "tokens"), [
    # Anthropic: long edge scaled to 1568, then width x height / 750
    (ImagePart(url="https://x/a.png", width=3136, height=1568), "anthropic/claude-sonnet-4-5", 1640),
    (ImagePart(url="https://x/a.png", width=750, height=750), "anthropic/claude-sonnet-4-5", 750),
    (ImagePart(url="https://x/a.png"), "anthropic/claude-sonnet-4-5", 1600),  # nothing known
    (ImagePart(url="https://x/a.png", size_bytes=100_000), "anthropic/claude-sonnet-4-5", 341),
    # Google (before Gemini 3): 258 per 768-px tile
    (ImagePart(url="https://x/a.png", width=1536, height=700), "google/gemini-2.5-flash", 516),
    # OpenAI: a base plus 512-px tiles at high detail; low detail is the base alone
    (ImagePart(url="https://x/a.png", width=1024, height=1024, detail="high"), "openai/gpt-4o", 85 + 4 * 170),
    (ImagePart(url="https://x/a.png", width=4096, height=4096, detail="low"), "openai/gpt-4o", 85),
    (ImagePart(url="https://x/a.png", size_bytes=3_000_000, detail="high"), "openai/gpt-4o", 85 + 6 * 170),
    (ImagePart(url="https://x/a.png", width=1024, height=1024, detail="high"), "openai/gpt-5", 70 + 4 * 140),
    (ImagePart(url="https://x/a.png", width=1024, height=1024, detail="high"), "openai/o3", 75 + 4 * 150),
    (ImagePart(url="https://x/a.png", detail="high"), "openai/gpt-4o-mini", 2833 + 5667),
])
def test_images_are_estimated_by_the_heuristics_of_the_provider_that_reads_them(image: ImagePart, model: str,
                                                                                tokens: int) -> None:
    assert one(image, model) == tokens


def test_an_image_at_auto_detail_is_counted_at_high_detail() -> None:
    # the larger of the two possible counts, so a threshold never under-counts what the provider may bill
    assert one(ImagePart(url="https://x/a.png", width=512, height=400), "openai/gpt-4o") == 85 + 170
    assert one(ImagePart(url="https://x/a.png", width=1024, height=1024), "openai/gpt-4o") == 85 + 4 * 170


def test_a_gemini_3_image_costs_its_media_resolutions_fixed_amount() -> None:
    # Gemini 3 bills an image by media resolution, not by tiles: 1 120 tokens when none is specified
    assert one(ImagePart(url="https://x/a.png", width=3000, height=3000), "google/gemini-3-pro-preview") == 1_120
    assert one(ImagePart(url="https://x/a.png", width=300, height=300), "google/gemini-3-pro-preview") == 1_120


@pytest.mark.parametrize(("model", "tokens"), [("google/gemini-2.5-flash", 5_000), ("anthropic/claude", 33_333),
                                               ("openai/gpt-4o", 25_000)])
def test_a_pdf_is_estimated_by_its_size_for_the_provider(model: str, tokens: int) -> None:
    assert one(FilePart(url="https://x/a.pdf", mime_type="application/pdf", size_bytes=100_000), model) == tokens
    small = one(FilePart(url="https://x/a.pdf", mime_type="application/pdf", size_bytes=100), model)
    assert small == {"google/gemini-2.5-flash": 258, "anthropic/claude": 1_500, "openai/gpt-4o": 500}[model]


def test_other_files_cost_a_quarter_token_per_byte_or_their_descriptor_when_the_size_is_unknown() -> None:
    assert one(FilePart(url="https://x/notes.txt", mime_type="text/plain", size_bytes=4_000)) == 1_000
    unknown = one(FilePart(url="https://x/notes.txt", mime_type="text/plain", filename="notes.txt"))
    assert 0 < unknown < 40


def test_an_image_sent_as_a_file_is_counted_as_an_image() -> None:
    as_file = FilePart(url="https://x/a.png", mime_type="image/png", size_bytes=100_000)
    assert one(as_file, "anthropic/claude-sonnet-4-5") == one(ImagePart(url="https://x/a.png", size_bytes=100_000),
                                                            "anthropic/claude-sonnet-4-5")


def test_counting_an_image_by_url_makes_no_network_call() -> None:
    # the test session's network guard refuses every connection beyond loopback: a probe would fail the test
    assert one(ImagePart(url="https://images.example.com/photo.jpg"), "openai/gpt-4o") > 0


# -- 2c.3 counted once ----------------------------------------------------------------------------------------------

def test_a_message_is_counted_once_when_it_arrives_and_a_resend_is_not_counted_again() -> None:
    sim = Sim(buffered())
    first = sim.say("t1", "user", TEN)
    before = sim.state().unobserved_tokens
    sim.apply(sim.state().key, "r1", MessageAppended(first))
    assert sim.state().unobserved_tokens == before == 10


def test_observation_text_is_recounted_when_it_is_written() -> None:
    sim = Sim(buffered())
    for _ in range(3):
        sim.say("t1", "user", TEN)
        sim.settle()
    chunk = sim.state().buffered[0]
    assert chunk.tokens == sim.accountant.count_text(sim.segments[chunk.id])


# -- 2c.4 budgets in the prompts ------------------------------------------------------------------------------------

def test_the_observer_sees_a_long_tool_result_cut_to_its_budget_with_a_note() -> None:
    huge = {"rows": [f"row {i} of the export" for i in range(6_000)]}
    tool = Message(message_id="m2", thread_id="t1", resource_id="r1", role="tool", created_at=START,
                   parts=(ToolResultPart(tool_call_id="c1", tool_name="export", result=huge),))
    text = render_messages([tool], COUNTER.count).text
    assert COUNTER.count(text) < RESULT_TOKEN_LIMIT + 100
    assert "tokens truncated]" in text


def test_tool_arguments_are_shown_as_a_bounded_outline() -> None:
    args = {"query": "q" * 500, "filters": {f"k{i}": i for i in range(50)},
            "deep": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}}
    outline = outline_args(args, COUNTER.count)
    assert "(500 chars)" in outline  # a long string becomes a preview with its size
    assert "30 more keys" in outline  # at most 20 entries per container
    assert '"f"' not in outline  # at most five levels deep
    assert COUNTER.count(outline_args({"x": ["word"] * 5_000}, COUNTER.count)) <= ARGS_TOKEN_LIMIT + 20


def test_a_cut_never_splits_a_surrogate_pair() -> None:
    text = "\ud83d\ude00" * 4_000  # an emoji as a UTF-16 pair, as JSON-decoded strings may hold it
    cut = truncate_to_tokens(text, 50, len)
    kept = cut.split("\n[…", 1)[0]
    assert len(kept) % 2 == 0


def test_an_observation_line_over_ten_thousand_characters_is_cut() -> None:
    long_line = "* 🔴 " + " ".join(str(i) for i in range(5_000))  # over 20 000 characters, none repeated
    parsed = parse_observer_output(f"<observations>\n{long_line}\n</observations>")
    (line,) = parsed.observations.splitlines()
    assert len(line) <= 10_000 + len(" [truncated]") and line.endswith("[truncated]")
