"""The recall tool's pure half: arguments, paging arithmetic, range cursors, rendering within the token budget,
listings, instructions, and group ranges that stay precise across reflections."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from om_stream.core.config import RetrievalConfig
from om_stream.core.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.recall import (
    MessageRange,
    MessagesResult,
    ObservationGroup,
    RecallHit,
    ThreadSummary,
    format_ranges,
    group_heading,
    observation_ranges,
    parse_arguments,
    ranges_from_json,
    ranges_to_json,
    recall_instructions,
    reflection_ranges,
)
from om_stream.core.recall.indexing import embedding_chunks, message_search_text
from om_stream.core.recall.listing import SearchItem, render_search, render_threads
from om_stream.core.recall.paging import (
    looks_like_range,
    page_flags,
    plan_page,
    range_candidates,
    slice_page,
)
from om_stream.core.recall.params import parse_instant
from om_stream.core.recall.render import fit_budget, format_timestamp, render_parts, truncate_tokens
from om_stream.errors import RecallError


def words(text: str) -> int:
    return len(text.split())


def msg(mid: str, *parts: object, role: str = "user") -> Message:
    return Message(message_id=mid, thread_id="t", resource_id="r", role=role,  # type: ignore[arg-type]
                   created_at=datetime(2026, 3, 10, 9, 15, 2, tzinfo=UTC), parts=parts)  # type: ignore[arg-type]


# -- arguments ---------------------------------------------------------------------------------------------------


def test_arguments_use_the_seeds_names_and_defaults() -> None:
    args = parse_arguments({"threadId": "current", "partIndex": 2, "cursor": "m1", "partType": "tool-call",
                            "toolName": "search"})
    assert (args.mode, args.anchor, args.detail) == ("messages", "start", "low")
    assert (args.thread_id, args.part_index, args.part_type, args.tool_name) == ("current", 2, "tool-call", "search")
    assert args.effective_limit() == 20 and args.effective_page() == 1
    assert parse_arguments({"thread_id": "t"}).thread_id == "t"  # snake_case too


@pytest.mark.parametrize(("data", "limit", "page"), [
    ({"limit": 100}, 20, 1), ({"page": 0}, 20, 1), ({"page": -3, "limit": 5}, 5, -3),
    ({"mode": "threads"}, 20, 0), ({"mode": "threads", "limit": 80, "page": 2}, 50, 2),
    ({"mode": "search", "query": "x"}, 10, 1), ({"mode": "search", "query": "x", "limit": 99}, 20, 1),
])
def test_limits_and_pages_are_normalised_per_mode(data: dict[str, object], limit: int, page: int) -> None:
    args = parse_arguments(data)
    assert (args.effective_limit(), args.effective_page()) == (limit, page)


@pytest.mark.parametrize(("data", "problem"), [
    ({"page": 51}, "page"), ({"page": -51}, "page"), ({"limit": 0}, "limit"), ({"partIndex": -1}, "partIndex"),
    ({"mode": "browse"}, "mode"), ({"detail": "medium"}, "detail"), ({"partType": "audio"}, "partType"),
    ({"before": "last week"}, "before"), ({"after": "2026-13-01"}, "after"), ({"mode": "search"}, "query"),
    ({"mode": "search", "query": "  "}, "query"), ({"charOffset": 5}, "charOffset"), ({"cursr": "m1"}, "cursr"),
    ({"cursor": ""}, "cursor"),
])
def test_invalid_arguments_are_refused_naming_the_argument(data: dict[str, object], problem: str) -> None:
    with pytest.raises(RecallError, match=problem):
        parse_arguments(data)


def test_dates_accept_a_day_or_an_instant() -> None:
    assert parse_instant("2026-03-15") == int(datetime(2026, 3, 15, tzinfo=UTC).timestamp() * 1000)
    assert parse_instant("2026-03-10T00:00:00Z") == int(datetime(2026, 3, 10, tzinfo=UTC).timestamp() * 1000)
    assert parse_instant("2026-03-10T02:00:00+02:00") == parse_instant("2026-03-10T00:00:00Z")


# -- paging ------------------------------------------------------------------------------------------------------


def test_cursor_pages_move_away_from_the_cursor_in_both_directions() -> None:
    assert plan_page(0, 5, from_cursor=True) == plan_page(1, 5, from_cursor=True)
    forward, backward = plan_page(3, 5, from_cursor=True), plan_page(-2, 5, from_cursor=True)
    assert (forward.forward, forward.skip, forward.need, forward.page) == (True, 10, 16, 3)
    assert (backward.forward, backward.skip, backward.need, backward.page) == (False, 5, 11, -2)
    end = plan_page(-2, 5, from_cursor=False, anchor="end")
    assert (end.forward, end.page, end.skip) == (False, 2, 5)


def test_a_backward_page_is_listed_oldest_first_with_honest_flags() -> None:
    plan = plan_page(-1, 3, from_cursor=True)
    window = [10, 9, 8, 7]  # read backward from the cursor (10)
    page = slice_page(plan, window)
    assert page.items == [8, 9, 10] and page.more_away
    assert page_flags(plan, page, beyond_anchor=True) == (True, True)
    assert page_flags(plan, page, beyond_anchor=False) == (False, True)
    last = slice_page(plan_page(-2, 3, from_cursor=True), window)
    assert last.items == [7] and not last.more_away
    assert page_flags(plan_page(-2, 3, from_cursor=True), last, beyond_anchor=False) == (True, False)


@given(total=st.integers(0, 60), limit=st.integers(1, 20), page=st.integers(1, 8))
def test_pages_from_the_start_tile_the_thread_without_gaps_or_overlap(total: int, limit: int, page: int) -> None:
    items = list(range(total))
    seen: list[int] = []
    for p in range(1, page + 1):
        plan = plan_page(p, limit, from_cursor=False)
        sliced = slice_page(plan, items[:plan.need])
        seen += sliced.items
        has_next, has_prev = page_flags(plan, sliced, beyond_anchor=False)
        assert has_next == (p * limit < total)
        assert has_prev == (p > 1 and total > 0)
    assert seen == items[:page * limit]


def test_ranges_are_recognised_and_split_at_every_colon() -> None:
    assert looks_like_range("a:b") and looks_like_range("a:b,c:d") and not looks_like_range("msg-1")
    assert not looks_like_range(":x") and not looks_like_range("x:")
    assert range_candidates("a:b,c:d") == range_candidates("a:b,c:d").__class__(("a",), ("d",))
    many = range_candidates("t:1:t:9")
    assert many.starts == ("t", "t:1", "t:1:t") and many.ends == ("1:t:9", "t:9", "9")


# -- rendering ---------------------------------------------------------------------------------------------------


def test_truncate_tokens_keeps_the_longest_prefix_within_the_budget() -> None:
    text = " ".join(f"w{i}" for i in range(50))
    cut = truncate_tokens(text, 10, words)
    assert words(cut) == 10 and text.startswith(cut) and truncate_tokens(text, 0, words) == ""
    assert truncate_tokens("short", 10, words) == "short"


def test_low_detail_tags_parts_with_their_stored_index_and_cuts_long_ones() -> None:
    long = " ".join(f"w{i}" for i in range(400))
    m = msg("m1", TextPart(text="hello"), ToolCallPart(tool_call_id="c", tool_name="search", args={"q": "x"}),
            ReasoningPart(text="think"), ImagePart(url="data:image/png;base64,AAAA"), TextPart(text=long))
    out = render_parts([m], words, budget=10_000).text
    assert out.startswith("**user (2026-03-10 09:15:02Z)** [m1]:")
    assert "  [p0] hello" in out and "  [p1] [Tool Call: search]" in out and "  [p2] think" in out
    assert "  [p3] [Image]" in out and "base64" not in out  # inline data is never shown
    assert 'recall cursor="m1" partIndex=4 detail="high"' in out and "w399" not in out
    only_tools = render_parts([m], words, part_type="tool-call", budget=10_000).text
    assert "[p1]" in only_tools and "[p0]" not in only_tools


def test_leftover_budget_re_expands_user_text_first() -> None:
    long = " ".join(f"u{i}" for i in range(150))
    other = " ".join(f"a{i}" for i in range(150))
    user, assistant = msg("m1", TextPart(text=long)), msg("m2", TextPart(text=other), role="assistant")
    result = msg("m3", ToolResultPart(tool_call_id="c", tool_name="f", result=" ".join(f"r{i}" for i in range(80))),
                 role="tool")
    roomy = render_parts([user, assistant, result], words, budget=1_000).text
    assert "u149" in roomy  # the user's 150 words fit the 200-token expansion
    assert "a99" in roomy and "a100" not in roomy  # other text keeps its 100-token cut
    assert "r40" in roomy and "r60" not in roomy  # a tool result grows from 20 to at most 50
    tight = render_parts([user, assistant], words, budget=240).text
    assert words(tight) <= 240 and "u103" in tight and "u149" not in tight  # what room there was, went to the user


def test_the_whole_answer_is_cut_at_the_budget_and_says_so() -> None:
    many = [msg(f"m{i}", TextPart(text=" ".join(["x"] * 90))) for i in range(30)]
    rendered = render_parts(many, words, budget=500)
    assert rendered.truncated and rendered.token_offset > 0
    assert words(rendered.text.split("\n[output cut")[0]) <= 500
    assert fit_budget("a b c", words, 5).truncated is False


def test_tool_results_and_errors_show_their_payload() -> None:
    ok = msg("m", ToolResultPart(tool_call_id="c", tool_name="f", result={"n": 1}))
    err = msg("m", ToolResultPart(tool_call_id="c", tool_name="f", result="boom", is_error=True))
    assert '"n": 1' in render_parts([ok], words, detail="high").text
    assert "[Tool Error: f]" in render_parts([err], words, detail="high").text


def test_timestamps_are_utc_to_the_second() -> None:
    assert format_timestamp(0) == "1970-01-01 00:00:00Z"


# -- listings ----------------------------------------------------------------------------------------------------


def test_threads_render_with_titles_dates_and_the_current_marker() -> None:
    threads = [ThreadSummary("t1", "r", "Trip", 0, 60_000), ThreadSummary("t2", "r", None, 0, 0)]
    text = render_threads(threads, "t1", words).text
    assert text.splitlines()[:3] == ["- **Trip** ← current", "  id: t1",
                                     "  updated: 1970-01-01 00:01:00Z | created: 1970-01-01 00:00:00Z"]
    assert "- **(untitled)**\n" in text
    assert render_threads([], None, words).text.startswith("No threads found")


def test_search_results_are_grouped_by_thread_best_thread_first() -> None:
    def hit(kind: str, source: str, thread: str, score: float) -> RecallHit:
        return RecallHit("r", thread, thread, kind, source, 0, f"text of {source}", 0, score,  # type: ignore[arg-type]
                         range="a:b,c:d" if kind == "group" else None, cursor="a" if kind == "group" else source)

    items = [SearchItem(hit("message", "m1", "t2", 0.9), ThreadSummary("t2", "r", "Other", 0, 0), "user", 0),
             SearchItem(hit("group", "g1", "t1", 0.8), ThreadSummary("t1", "r", None, 0, 0)),
             SearchItem(hit("message", "m2", "t2", 0.5), ThreadSummary("t2", "r", "Other", 0, 0), "assistant", 0)]
    text = render_search("pastry", items, "t1", words).text
    assert text.index('### Another thread: "Other"') < text.index('### Current thread: "(untitled)"')
    assert 'score 0.90 · message from user at 1970-01-01 00:00:00Z · cursor="m1"' in text
    assert 'observation group g1 · raw messages (first:last) a:b,c:d · cursor="a"' in text
    assert text.index("m1") < text.index("m2") < text.index("g1")


# -- instructions ------------------------------------------------------------------------------------------------


def test_instructions_differ_by_scope_and_search() -> None:
    resource = recall_instructions(RetrievalConfig(scope="resource"))
    thread = recall_instructions(RetrievalConfig(scope="thread"))
    searching = recall_instructions(RetrievalConfig(scope="resource", vector=True))
    assert 'mode "threads" lists the user\'s conversations' in resource and "another conversation" in resource
    assert "this conversation only" in thread and "another conversation" not in thread
    assert 'mode "search"' not in resource and 'mode "search"' not in thread
    assert 'mode "search"' in searching and "do not give up" in searching
    assert 'mode "search"' not in recall_instructions(RetrievalConfig(vector=True), search_available=False)
    assert recall_instructions(None) == ""
    custom = recall_instructions(RetrievalConfig(instructions="Always cite message ids."))
    assert custom.endswith("Additional recall guidance:\nAlways cite message ids.") and "partIndex" in custom


# -- groups ------------------------------------------------------------------------------------------------------


def test_a_resource_scope_observation_has_one_range_per_thread() -> None:
    covered = [("a0", "t1", 1), ("b0", "t2", 2), ("a1", "t1", 3), ("b1", "t2", 4), ("a2", "t1", 5)]
    ranges = observation_ranges(covered)
    assert ranges == (MessageRange("t1", "a0", "a2"), MessageRange("t2", "b0", "b1"))
    assert [(r.first_seq, r.last_seq) for r in ranges] == [(1, 5), (2, 4)]


def _run(first: int, last: int, thread: str = "t") -> MessageRange:
    return MessageRange(thread, f"m{first}", f"m{last}", first, last)


def test_reflections_join_runs_that_follow_each_other_and_keep_the_gaps() -> None:
    first = reflection_ranges([(_run(1, 4),), (_run(5, 9),), (_run(11, 12),)])
    assert format_ranges(first) == "m1:m9,m11:m12"  # m10 is in none of them: it stays a gap
    second = reflection_ranges([first, (_run(13, 15),), (_run(1, 4),)])  # a repeated range is listed once
    assert format_ranges(second) == "m1:m9,m11:m15"
    group = ObservationGroup("g", "t", "r", "reflection", "active", 2, "text", 3, ("t",), second, 0, 0)
    assert group_heading(group) == "## Group `g`\n_range: m1:m9,m11:m15_"
    assert group.range_text == "m1:m9,m11:m15"


def test_ranges_without_sequence_numbers_are_kept_apart() -> None:
    # rows stored before the sequence numbers were kept: nothing says they follow each other
    old = reflection_ranges([(MessageRange("t", "m1", "m4"),), (MessageRange("t", "m5", "m9"),)])
    assert format_ranges(old) == "m1:m4,m5:m9"
    assert ranges_from_json(ranges_to_json(old)) == old
    assert ranges_from_json('[["t", "m1", "m4"]]') == (MessageRange("t", "m1", "m4"),)
    mixed = ranges_from_json(ranges_to_json((_run(1, 4), _run(5, 6, "u"))))
    assert [(r.first_seq, r.last_seq) for r in mixed] == [(1, 4), (5, 6)]


@given(st.lists(st.tuples(st.sampled_from(["t1", "t2"]), st.integers(0, 3)), min_size=1, max_size=60),
       st.integers(1, 6))
def test_reflection_ranges_cover_exactly_the_messages_of_what_they_replace(
        messages: list[tuple[str, int]], group_size: int) -> None:
    """Messages of two threads in a record (seq = position), observed in order by groups of at most ``group_size``,
    some left out (skip > 0): a reflection of a reflection and the later groups covers exactly the observed
    messages, with one range per run of a thread's messages at consecutive seqs (as many as the gaps need, not as
    many as the groups)."""
    observed: list[tuple[str, str, int]] = []
    groups: list[tuple[MessageRange, ...]] = []
    current: list[tuple[str, str, int]] = []
    for seq, (thread, skip) in enumerate(messages):
        if skip == 0:  # observed, by the group in progress
            observed.append((f"m{seq}", thread, seq))
            current.append((f"m{seq}", thread, seq))
        if current and (skip or len(current) == group_size or seq == len(messages) - 1):
            groups.append(observation_ranges(current))  # a message left out ends a group: groups hold no gap
            current = []
    half = len(groups) // 2
    ranges = reflection_ranges([reflection_ranges(groups[:half]), *groups[half:]])
    thread_of = {f"m{seq}": thread for seq, (thread, _) in enumerate(messages)}
    covered = set()
    for item in ranges:
        assert item.first_seq is not None and item.last_seq is not None
        inside = {f"m{s}" for s in range(item.first_seq, item.last_seq + 1) if thread_of[f"m{s}"] == item.thread_id}
        covered |= inside
    assert covered == {m for m, _, _ in observed}
    for thread in ("t1", "t2"):
        seqs = [s for _, t, s in observed if t == thread]
        runs = sum(1 for i, s in enumerate(seqs) if i == 0 or s != seqs[i - 1] + 1)
        assert sum(1 for r in ranges if r.thread_id == thread) <= runs


# -- indexing ----------------------------------------------------------------------------------------------------


def test_long_texts_are_cut_into_chunks_that_fit_the_embedder() -> None:
    text = "\n".join(" ".join(f"l{line}w{i}" for i in range(30)) for line in range(10)) + "\n" + "x " * 500
    chunks = embedding_chunks(text, words, max_tokens=100, max_chunks=50)
    assert all(words(c) <= 100 for c in chunks) and len(chunks) >= 8
    assert " ".join(" ".join(chunks).split()) == " ".join(text.split())  # nothing lost, nothing repeated
    assert len(embedding_chunks(text, words, max_tokens=100, max_chunks=3)) == 3


def test_searchable_text_is_text_and_tool_traffic() -> None:
    m = msg("m", TextPart(text="hi"), ReasoningPart(text="secret thoughts"),
            ToolCallPart(tool_call_id="c", tool_name="f", args={"q": 1}))
    assert message_search_text(m) == 'hi\n[Tool Call: f]\n{\n  "q": 1\n}'


def test_result_models_serialise_with_the_seeds_field_names() -> None:
    result = MessagesResult(messages="x", count=1, cursor="m", page=1, limit=20, detail="low", has_next_page=True,
                            has_prev_page=False, truncated=True, token_offset=12)
    data = result.model_dump(by_alias=True, exclude_none=True)
    assert data == {"mode": "messages", "messages": "x", "count": 1, "cursor": "m", "page": 1, "limit": 20,
                    "detail": "low", "hasNextPage": True, "hasPrevPage": False, "truncated": True,
                    "tokenOffset": 12}
