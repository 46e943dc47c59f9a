"""Reading Observer/Reflector answers, recognising degenerate ones, and the Reflector's compression ladder."""

from __future__ import annotations

import random

import pytest

from om_stream.core.extractors import Extractor
from om_stream.core.prompts.degenerate import is_degenerate
from om_stream.core.prompts.ladder import Attempt, choose, max_level, next_level, start_level
from om_stream.core.prompts.parsing import MAX_LINE_CHARS, parse_observer_output, parse_reflector_output

MOOD = Extractor(name="Mood", instructions="How the user feels.")
PLAN = Extractor(name="Plan", instructions="The plan, as JSON.")

WELL_FORMED = """\
Some preamble the model should not have written.
<observations>
Date: Jun 6, 2026
* 🔴 (09:14) User stated they are moving to Lyon in September (meaning Sep 2026).
* 🟡 (09:20) Assistant compared moving companies:
  * -> Lyon Express insures pianos
</observations>
<current-task>
Primary: pick a moving company.
</current-task>
<suggested-response>Ask which date suits the user.</suggested-response>
<thread-title>Moving to Lyon</thread-title>
<mood>hopeful</mood>
"""


# -- well-formed, malformed, truncated ------------------------------------------------------------------------------

def test_well_formed_observer_answer() -> None:
    parsed = parse_observer_output(WELL_FORMED, extractors=(MOOD,))
    assert parsed.observations == ("Date: Jun 6, 2026\n"
                                   "* 🔴 (09:14) User stated they are moving to Lyon in September (meaning Sep 2026).\n"
                                   "* 🟡 (09:20) Assistant compared moving companies:\n"
                                   "  * -> Lyon Express insures pianos")
    assert parsed.current_task == "Primary: pick a moving company."
    assert parsed.suggested_response == "Ask which date suits the user."
    assert parsed.thread_title == "Moving to Lyon"
    assert parsed.extracted == {"mood": "hopeful"}
    assert (parsed.per_thread, parsed.degenerate, parsed.empty, parsed.extraction_failures) == (None, False, False,
                                                                                               ())


def test_several_blocks_are_concatenated_and_inline_mentions_ignored() -> None:
    text = ("<observations>\n* 🟡 (09:00) First, about the <observations> tag in HTML.\n</observations>\n"
            "chatter\n<observations>\n* 🟡 (09:05) Second.</observations>")
    parsed = parse_observer_output(text)
    assert parsed.observations == "* 🟡 (09:00) First, about the <observations> tag in HTML.\n* 🟡 (09:05) Second."


def test_hint_tags_inside_the_block_are_taken_out_of_the_observations() -> None:
    parsed = parse_observer_output("<observations>\n* 🟡 (09:00) A.\n<current-task>Do B</current-task>\n"
                                   "</observations>")
    assert parsed.observations == "* 🟡 (09:00) A."
    assert parsed.current_task == "Do B"


def test_no_tags_falls_back_to_list_items() -> None:
    text = ("Here is what I noticed:\nDate: Jun 6, 2026\n- 🔴 (09:14) User lives in Lyon.\n"
            "Some prose in between.\n1. 🟡 (09:20) Second item.\n* 🟢 (09:30) Third item.\nDate: Jun 7, 2026\n")
    parsed = parse_observer_output(text)
    assert parsed.observations == ("Date: Jun 6, 2026\n- 🔴 (09:14) User lives in Lyon.\n"
                                   "1. 🟡 (09:20) Second item.\n* 🟢 (09:30) Third item.")
    assert not parsed.empty


def test_no_tags_and_no_list_items() -> None:
    prose = "The user talked about moving to Lyon and the assistant helped."
    assert parse_observer_output(prose).empty
    reflected = parse_reflector_output(prose)
    assert reflected.observations == prose
    assert not reflected.empty


def test_truncated_answer_keeps_what_arrived() -> None:
    text = "<observations>\nDate: Jun 6, 2026\n* 🔴 (09:14) User lives in Lyon.\n* 🟡 (09:20) Assistant sugg"
    parsed = parse_observer_output(text)
    assert parsed.observations.endswith("* 🟡 (09:20) Assistant sugg")
    assert not parsed.empty
    cut_hint = parse_observer_output("<observations>\n* 🟡 (09:00) A.\n</observations>\n<current-task>Primary: fi")
    assert cut_hint.current_task == "Primary: fi"
    assert cut_hint.observations == "* 🟡 (09:00) A."
    cut_extractor = parse_observer_output("<observations>\n* 🟡 (09:00) A.\n</observations>\n<mood>calm",
                                          extractors=(MOOD,))
    assert cut_extractor.extracted == {"mood": "calm"}


def test_empty_block_is_empty() -> None:
    parsed = parse_observer_output("<observations>\n</observations>")
    assert parsed.empty
    assert parsed.observations == ""


def test_long_lines_are_cut() -> None:
    long = " ".join(str(i) for i in range(3_000))  # ~14,000 chars that do not repeat
    parsed = parse_observer_output(f"<observations>\n* 🟡 (09:00) {long}\n* 🟡 (09:01) B.\n</observations>")
    first, second = parsed.observations.splitlines()
    assert len(first) == MAX_LINE_CHARS + len(" [truncated]")
    assert first.endswith(" [truncated]")
    assert second == "* 🟡 (09:01) B."


def test_stray_thread_tags_are_removed_in_single_thread_mode_only() -> None:
    text = '<observations>\n<thread id="x">\n* 🟡 (09:00) A.\n</thread>\n</observations>'
    assert parse_observer_output(text).observations == "* 🟡 (09:00) A."
    assert parse_reflector_output(text).observations == '<thread id="x">\n* 🟡 (09:00) A.\n</thread>'


def test_code_fences_around_the_answer_are_ignored() -> None:
    parsed = parse_reflector_output("```xml\n* 🟡 (09:00) A.\n```")
    assert parsed.observations == "* 🟡 (09:00) A."


# -- extractor values -----------------------------------------------------------------------------------------------

def test_extractor_values_from_json_and_tags_last_wins_unknown_ignored() -> None:
    text = ('<observations>\n* 🟡 (09:00) A.\n</observations>\n'
            '<extracted-values>{"mood": "tired", "plan": {"step": 1}, "secret": "x"}</extracted-values>\n'
            '<mood>rested</mood>\n<plan>{"step": 2, "city": "Lyon"}</plan>\n<secret>ignored</secret>')
    parsed = parse_observer_output(text, extractors=(MOOD, PLAN))
    assert parsed.extracted == {"mood": "rested", "plan": {"step": 2, "city": "Lyon"}}
    assert "secret" not in parsed.extracted
    assert "<mood>" not in parsed.observations
    earlier_tag = parse_observer_output('<mood>first</mood>\n<extracted-values>{"mood": "second"}</extracted-values>'
                                        "\n- 🟡 (09:00) A.", extractors=(MOOD,))
    assert earlier_tag.extracted == {"mood": "second"}


def test_tag_values_that_are_not_json_stay_strings() -> None:
    parsed = parse_observer_output("- 🟡 (09:00) A.\n<plan>[not json</plan>\n<mood>\"quoted\"</mood>",
                                   extractors=(MOOD, PLAN))
    assert parsed.extracted == {"plan": "[not json", "mood": "quoted"}


def test_invalid_json_block_is_a_failure_for_the_missing_values_only() -> None:
    parsed = parse_observer_output("- 🟡 (09:00) A.\n<extracted-values>{mood: oops</extracted-values>\n"
                                   "<plan>keep</plan>", extractors=(MOOD, PLAN))
    assert parsed.extracted == {"plan": "keep"}
    assert [slug for slug, _ in parsed.extraction_failures] == ["mood"]


def test_reflector_parses_hints_and_extractors() -> None:
    parsed = parse_reflector_output("<observations>\n* 🔴 (09:00) A.\n</observations>\n"
                                    "<suggested-response>Go on.</suggested-response>\n<mood>calm</mood>",
                                    extractors=(MOOD,))
    assert (parsed.observations, parsed.suggested_response, parsed.extracted) == ("* 🔴 (09:00) A.", "Go on.",
                                                                                  {"mood": "calm"})


# -- multi-thread ---------------------------------------------------------------------------------------------------

MULTI = """\
<observations>
<thread id="a1">
Date: Jun 6, 2026
* 🔴 (09:14) User is moving to Lyon.
<current-task>Pick movers.</current-task>
<thread-title>Moving</thread-title>
</thread>
<thread id="b2">
Date: Jun 6, 2026
* 🟡 (10:02) User asked for a phrase book.
</thread>
<thread id="c3">
</thread>
</observations>
<mood>busy</mood>
"""


def test_multi_thread_split_with_per_thread_hints() -> None:
    parsed = parse_observer_output(MULTI, extractors=(MOOD,), multi_thread=True)
    assert parsed.per_thread is not None
    assert set(parsed.per_thread) == {"a1", "b2", "c3"}
    a1, b2, c3 = parsed.per_thread["a1"], parsed.per_thread["b2"], parsed.per_thread["c3"]
    assert a1.observations == "Date: Jun 6, 2026\n* 🔴 (09:14) User is moving to Lyon."
    assert (a1.current_task, a1.thread_title) == ("Pick movers.", "Moving")
    assert b2.observations.endswith("phrase book.")
    assert b2.current_task is None
    assert c3.empty
    assert not parsed.empty
    assert parsed.extracted == {"mood": "busy"}
    assert parsed.current_task is None  # hints belong to their thread
    assert '<thread id="b2">\nDate: Jun 6, 2026' in parsed.observations


def test_multi_thread_unclosed_thread_and_answer() -> None:
    text = '<observations>\n<thread id="a1">\n* 🟡 (09:00) A.\n<thread id="b2">\n* 🟡 (09:01) B, cut sh'
    parsed = parse_observer_output(text, multi_thread=True)
    assert parsed.per_thread is not None
    assert parsed.per_thread["a1"].observations == "* 🟡 (09:00) A."
    assert parsed.per_thread["b2"].observations == "* 🟡 (09:01) B, cut sh"


def test_multi_thread_without_thread_blocks_leaves_per_thread_empty() -> None:
    parsed = parse_observer_output("<observations>\n* 🟡 (09:00) A.\n</observations>", multi_thread=True)
    assert parsed.per_thread == {}
    assert parsed.observations == "* 🟡 (09:00) A."
    all_empty = parse_observer_output('<observations>\n<thread id="a">\n</thread>\n</observations>',
                                      multi_thread=True)
    assert all_empty.empty


# -- degenerate output ----------------------------------------------------------------------------------------------

def _realistic_log(lines: int = 400) -> str:
    rng = random.Random(7)
    subjects = ["User", "Assistant", "User's manager", "The build", "The migration script", "The client"]
    verbs = ["stated", "asked about", "fixed", "reviewed", "postponed", "compared", "rewrote", "measured"]
    things = ["the pagination bug in api/list.py", "flight prices to Lisbon", "the Kafka consumer lag",
              "their daughter's school schedule", "the Cassandra schema", "a vegetarian lasagne recipe",
              "the Q3 budget spreadsheet", "test coverage of the parser", "the rent increase", "a piano mover"]
    out = []
    for i in range(lines):
        if i % 25 == 0:
            out.append(f"Date: Jun {1 + i // 25}, 2026")
        mark = rng.choice(["🔴", "🟡", "🟡", "🟢", "✅"])
        out.append(f"* {mark} ({8 + i % 12:02d}:{i % 60:02d}) {rng.choice(subjects)} {rng.choice(verbs)} "
                   f"{rng.choice(things)} (item {i}, {rng.randint(2, 900)} units).")
        if i % 7 == 0:
            out.append(f"  * -> {rng.choice(things)} was linked to ticket #{1000 + i}")
    return "\n".join(out)


def test_a_normal_long_observation_log_is_not_degenerate() -> None:
    log = _realistic_log()
    assert len(log) > 20_000
    assert not is_degenerate(log)
    assert not parse_observer_output(f"<observations>\n{log}\n</observations>").degenerate


def test_repeated_windows_are_degenerate() -> None:
    looping = "I will now observe the conversation carefully and write it down. " * 80
    assert "\n" not in looping
    assert is_degenerate(looping)


def test_duplicate_lines_are_degenerate() -> None:
    lines = [f"* 🟡 (09:{i:02d}) Distinct observation number {i} about something." for i in range(15)]
    lines += ["* 🟡 (09:30) The user asked again about the same thing."] * 40
    text = "\n".join(lines)
    assert len(text) >= 2_000
    assert is_degenerate(text)


def test_a_giant_line_is_degenerate() -> None:
    giant = "".join(str(i) for i in range(13_000))
    assert len(giant) > 50_000
    assert is_degenerate(giant)
    assert not is_degenerate(giant[:1_999])  # under 2,000 chars nothing is checked


def test_degenerate_answer_is_rejected_whole() -> None:
    looping = "<observations>\n" + "* 🟡 (09:00) The user said hello and the assistant replied.\n" * 100
    parsed = parse_observer_output(looping + "</observations>\n<current-task>x</current-task>")
    assert parsed.degenerate
    assert parsed.empty
    assert parsed.observations == ""
    assert parsed.current_task is None
    assert parse_reflector_output(looping).degenerate


# -- compression ladder ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "manual", "start", "top"), [
    ("gemini/gemini-2.5-flash", False, 2, 4), ("openai/gpt-4o-mini", False, 1, 4), ("Gemini-2.5-Flash-Lite", False,
                                                                                    2, 4),
    ("gemini/gemini-2.5-flash", True, 0, 3),
])
def test_start_and_max_levels(model: str, manual: bool, start: int, top: int) -> None:
    assert start_level(model, manual) == start
    assert max_level(start) == top


def test_next_level_escalates_until_under_target_or_top() -> None:
    assert next_level(1, 4) == 2
    assert next_level(1, 4, attempt_tokens=900, target_tokens=800) == 2
    assert next_level(1, 4, attempt_tokens=700, target_tokens=800) is None
    assert next_level(3, 3) is None
    assert next_level(4, 9) is None  # 4 is the last level whatever the caller says


def test_choose_first_under_target() -> None:
    attempts = [Attempt(1, "a" * 9, 900), Attempt(2, "a" * 7, 700), Attempt(3, "a" * 5, 500)]
    assert choose(attempts, 800) == attempts[1]


def test_choose_smallest_valid_when_none_under_target() -> None:
    attempts = [Attempt(1, "x", 950), Attempt(2, "x", 850), Attempt(3, "", 10), Attempt(4, "x", 5, valid=False),
                Attempt(4, "x", 900)]
    assert choose(attempts, 800) == attempts[1]  # the reference would keep the last one (900)
    assert choose(attempts) == attempts[1]


def test_choose_never_returns_an_empty_or_degenerate_attempt() -> None:
    assert choose([Attempt(1, "  \n", 0), Attempt(2, "x", 1, valid=False)], 100) is None
    assert choose([], 100) is None


# -- issue 30: a Reflector answer never closed, anchors copied, a placeholder for the values block -----------------

def test_reflector_answer_whose_block_is_never_closed_keeps_only_its_list_items() -> None:
    """The reference reads an unclosed ``<observations>`` block as no block at all and keeps the answer's list
    items (with their date lines): the model's prose after the list is not stored as memory."""
    text = ("Here is the condensed memory.\n<observations>\nDate: Jun 6, 2026\n"
            "* 🔴 (09:14) User stated they move to Lyon.\n  * -> in September\n"
            "I merged the older items and kept the recent ones in detail. Let me know if you want more.\n")
    parsed = parse_reflector_output(text)
    assert parsed.observations == ("Date: Jun 6, 2026\n* 🔴 (09:14) User stated they move to Lyon.\n"
                                   "  * -> in September")


def test_reflector_answer_never_closed_keeps_the_indented_body_of_an_item() -> None:
    text = ("<observations>\nDate: Jun 6, 2026\n* 🟡 (09:14) Assistant wrote the retry loop:\n"
            "    for attempt in range(3):\n        send()\n* 🔴 (09:20) User approved it.\n"
            "That is the whole memory, condensed.\n    (an indented afterthought)\n")
    parsed = parse_reflector_output(text)
    assert parsed.observations == ("Date: Jun 6, 2026\n* 🟡 (09:14) Assistant wrote the retry loop:\n"
                                   "    for attempt in range(3):\n        send()\n* 🔴 (09:20) User approved it.")


def test_reflector_answer_unclosed_without_list_items_keeps_what_arrived() -> None:
    parsed = parse_reflector_output("<observations>\nThe user moves to Lyon in September.")
    assert parsed.observations == "The user moves to Lyon in September."


def test_reflector_output_loses_anchor_ids_the_model_copied() -> None:
    text = ("<observations>\nDate: Jun 6, 2026\n* [O1] 🔴 (09:14) User stated A.\n"
            "* 🟡 (09:20) [O2-N3] Assistant listed B [O12].\n* 🟡 (09:30) Kept [Option 1] as written.\n"
            "</observations>")
    parsed = parse_reflector_output(text)
    assert parsed.observations == ("Date: Jun 6, 2026\n* 🔴 (09:14) User stated A.\n"
                                   "* 🟡 (09:20) Assistant listed B.\n* 🟡 (09:30) Kept [Option 1] as written.")


@pytest.mark.parametrize("placeholder", [
    "JSON object with the values of the extractors, if any",
    "{ ...values... }",
    "",
])
def test_placeholder_copied_into_the_values_block_is_nothing_extracted(placeholder: str) -> None:
    """An Observer that writes the prompt's placeholder where the JSON belongs extracted nothing: not a failure
    of every inline extractor."""
    parsed = parse_observer_output(f"<observations>\n* 🟡 (09:00) A.\n</observations>\n"
                                   f"<extracted-values>{placeholder}</extracted-values>", extractors=(MOOD, PLAN))
    assert parsed.extracted == {}
    assert parsed.extraction_failures == ()
