"""The agent's context: cache-stable blocks, closed tags, hints, and relative dates on the conversation's time."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from om_stream.core.commands import ContextSpec
from om_stream.core.context import CONTINUATION_REMINDER, annotate_relative_times, render_context
from om_stream.core.messages import Message, TextPart


def spec(segments: tuple[str, ...], **overrides: object) -> ContextSpec:
    base = ContextSpec(record_key="t1", thread_id="t1", resource_id="r1", version=3, through_message_id="m9",
                       generation=0, segment_ids=segments, segment_boundaries=tuple(range(len(segments))),
                       message_ids=("m9",), message_tokens=12, observation_tokens=40, current_task=None,
                       suggested_response=None, thread_title=None)
    return replace(base, **overrides)  # type: ignore[arg-type]


def message(mid: str = "m9") -> Message:
    return Message(message_id=mid, thread_id="t1", resource_id="r1", role="user",
                   created_at=datetime(2026, 3, 10, 9, 0, tzinfo=UTC), parts=(TextPart(text="hi"),))


NOW = int(datetime(2026, 3, 10, 12, 0, tzinfo=UTC).timestamp() * 1000)
TEXTS = {"s1": "Date: Mar 1, 2026\n* 🔴 (09:00) User stated the launch is on Friday (meaning Mar 6, 2026).",
         "s2": "Date: Mar 9, 2026\n* 🟡 (10:00) User asked about partitions."}


def test_each_segment_is_its_own_block_between_opening_and_closing_tags() -> None:
    rendered = render_context(spec(("s1", "s2")), TEXTS, [message()], now_ms=NOW)
    blocks = list(rendered.system_blocks)
    start = blocks.index("<observations>")
    assert blocks[start + 3] == "</observations>"
    assert blocks[start + 1].startswith("Date: Mar 1, 2026")
    assert rendered.observations.startswith("<observations>\n")
    assert rendered.observations.endswith("\n</observations>")


def test_a_new_segment_leaves_every_earlier_block_byte_identical() -> None:
    before = render_context(spec(("s1",)), TEXTS, [message()], now_ms=NOW).system_blocks
    after = render_context(spec(("s1", "s2")), TEXTS, [message()], now_ms=NOW).system_blocks
    closing = before.index("</observations>")
    assert after[:closing] == before[:closing]  # the prompt-cache prefix is unchanged


def test_relative_dates_use_the_conversation_time_not_the_wall_clock() -> None:
    text, last = annotate_relative_times(TEXTS["s1"], date(2026, 3, 10))
    assert "Date: Mar 1, 2026 (1 week ago)" in text
    assert "(meaning Mar 6, 2026) - 4 days ago" in text
    assert last == date(2026, 3, 1)
    later, _ = annotate_relative_times(TEXTS["s1"], date(2026, 6, 10))
    assert "(3 months ago)" in later


def test_past_plans_are_marked_likely_done() -> None:
    text, _ = annotate_relative_times("* 🔴 (09:00) User will present to the board (meaning Mar 6, 2026).",
                                      date(2026, 3, 10))
    assert "4 days ago, likely already happened" in text


@pytest.mark.parametrize(("note", "relative"), [
    ("(estimated May 27-28, 2023)", "2 weeks ago"),  # a range: its first day, May 27
    ("(estimated May 27–28, 2023)", "2 weeks ago"),
    ("(estimated early May 2023)", "1 month ago"),  # early: the 7th
    ("(meaning mid May 2023)", "3 weeks ago"),  # mid: the 15th
    ("(estimated late May 2023)", "2 weeks ago"),  # late: the 23rd
    ("(estimated mid-to-late May 2023)", "3 weeks ago"),  # the first of the two: mid
    ("(estimated April to May 2023)", "2 months ago"),  # across months: the first month's 1st
    ("(estimated May 2023)", "1 month ago"),
])
def test_estimated_and_ranged_dates_are_annotated_like_plain_ones(note: str, relative: str) -> None:
    """Issue 30: the Observer is told to write estimated dates; the reference annotates ranges and vague dates."""
    text, _ = annotate_relative_times(f"* 🟡 (09:00) User went to the coast {note}.", date(2023, 6, 10))
    assert text == f"* 🟡 (09:00) User went to the coast {note} - {relative}."


def test_an_estimated_date_without_a_year_is_left_alone() -> None:
    line = "* 🟡 (09:00) User went to the coast (estimated late May)."
    assert annotate_relative_times(line, date(2023, 6, 10))[0] == line


def test_looking_forward_to_a_past_event_marks_it_likely_done() -> None:
    text, _ = annotate_relative_times("* 🟡 (09:00) User is looking forward to the concert (meaning May 30, 2023).",
                                      date(2023, 6, 10))
    assert text.endswith("- 1 week ago, likely already happened.")


def test_a_past_plan_with_a_vague_date_is_marked_likely_done() -> None:
    text, _ = annotate_relative_times("* 🔴 (09:00) User will move (estimated late May 2023).", date(2023, 6, 10))
    assert text.endswith("(estimated late May 2023) - 2 weeks ago, likely already happened.")


def test_gaps_between_date_groups_are_marked() -> None:
    rendered = render_context(spec(("s1", "s2")), TEXTS, [message()], now_ms=NOW)
    assert any(block.startswith("[1 week later]") for block in rendered.system_blocks)


def test_each_day_is_introduced_once_across_the_groups_of_that_day() -> None:
    texts = {"a": "Date: Mar 9, 2026\n* 🟡 (09:00) User asked about partitions.",
             "b": "Date: Mar 9, 2026\n* 🟡 (11:00) User asked about replicas.\nDate: Mar 9, 2026\n* (11:30) more",
             "c": "Date: Mar 10, 2026\n* 🔴 (08:00) User chose three replicas."}
    rendered = render_context(spec(("a", "b", "c")), texts, [message()], now_ms=NOW)
    assert rendered.observations.count("Date: Mar 9, 2026") == 1
    assert rendered.observations.count("Date: Mar 10, 2026") == 1
    assert "asked about replicas" in rendered.observations and "(11:30) more" in rendered.observations


def test_hints_follow_the_observations_and_the_continuation_reminder_is_added() -> None:
    rendered = render_context(spec(("s1",), current_task="finish the plan", suggested_response="ask about dates"),
                              TEXTS, [message()], now_ms=NOW)
    assert "<current-task>\nfinish the plan\n</current-task>" in rendered.system_blocks
    assert rendered.system_blocks[-1] == "<suggested-response>\nask about dates\n</suggested-response>"
    assert rendered.continuation == CONTINUATION_REMINDER
    hidden = render_context(spec(("s1",), current_task="x"), TEXTS, [message()], now_ms=NOW, hints=False)
    assert not any("current-task" in b for b in hidden.system_blocks)


def test_no_memory_means_no_system_blocks_and_no_reminder() -> None:
    rendered = render_context(spec(()), {}, [message()], now_ms=NOW)
    assert rendered.system_blocks == ()
    assert rendered.continuation is None
    assert [m.message_id for m in rendered.messages] == ["m9"]


def test_observation_group_tags_are_not_shown_to_the_agent() -> None:
    texts = {"g": '<observation-group id="ab12" range="m1:m4">\n* 🔴 (09:00) User likes tea.\n</observation-group>'}
    rendered = render_context(spec(("g",)), texts, [message()], now_ms=NOW)
    assert "observation-group" not in rendered.observations
    assert "User likes tea." in rendered.observations


def test_retrieval_mode_teaches_the_tool_and_heads_each_group_with_its_ranges() -> None:
    from om_stream.core.config import RetrievalConfig
    from om_stream.core.recall.instructions import recall_instructions

    instructions = recall_instructions(RetrievalConfig(vector=True), search_available=False)
    headings = {"s1": "## Group `s1`\n_range: m1:m4_", "s2": "## Group `s2`\n_range: m5:m8_"}
    rendered = render_context(spec(("s1", "s2")), TEXTS, [message()], now_ms=NOW, extra_instructions=instructions,
                              group_headings=headings)
    first = rendered.system_blocks[0]
    assert "_range: <firstId>:<lastId>_" in first and 'mode "search"' not in first  # no index: no search offered
    start = rendered.system_blocks.index("<observations>")
    assert rendered.system_blocks[start + 1].startswith("## Group `s1`\n_range: m1:m4_\nDate: Mar 1, 2026")
    assert rendered.system_blocks[start + 2].startswith("## Group `s2`\n_range: m5:m8_\n")
