"""§2g of the reference: retrieval mode, where observations point back at their source messages and the agent can
read them with the recall tool.

Through the embedded ``Memory`` (its ``recall()`` is the tool as the agent's model calls it) with a
``FunctionModel`` Observer, and the offline embedder for semantic search.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from om_stream import Memory, RecallError
from om_stream.runtime.embedded import ManualClock
from om_stream.testing import FunctionModel
from tests.reference import START_MS, message, observe_all

HEADING = re.compile(r"^## Group `([^`]+)`\n_range: ([^_]+)_", re.MULTILINE)


async def memory(options: dict[str, Any] | None = None, count: int = 6, *, observe: bool = True,
                 **extra: Any) -> Memory:
    om = Memory({"model": "openai/gpt-5-mini", "retrieval": True, "observation": {"messageTokens": 100_000},
                 **(options or {})}, model=FunctionModel(observe_all), clock=ManualClock(START_MS), **extra)
    await om.__aenter__()
    for i in range(1, count + 1):
        await om.add_message(message(i, f"detail number {i} of the plan", "user" if i % 2 else "assistant"))
    if observe:
        await om.observe("t1", force=True)
        await om.settle()
    return om


# -- 2g.1 observation groups and their ranges -----------------------------------------------------------------------

async def test_each_observation_is_a_group_that_names_the_messages_it_came_from() -> None:
    om = await memory(count=2)
    for i in range(3, 5):
        await om.add_message(message(i, f"later detail {i}"))
    await om.observe("t1", force=True)
    await om.settle()
    context = await om.context("t1")
    await om.close()
    assert context is not None
    groups = HEADING.findall("\n".join(context.system_blocks))
    assert [ranges for _, ranges in groups] == ["m1:m2", "m3:m4"]
    assert len({gid for gid, _ in groups}) == 2


async def test_a_range_is_opened_at_either_end_with_the_recall_tool() -> None:
    om = await memory()
    forward = await om.recall("r1", {"cursor": "m1", "limit": 2}, thread_id="t1")
    backward = await om.recall("r1", {"cursor": "m6", "page": -1, "limit": 2}, thread_id="t1")
    await om.close()
    assert re.findall(r"\[(m\d)\]:", forward.messages) == ["m1", "m2"]  # type: ignore[union-attr]
    assert re.findall(r"\[(m\d)\]:", backward.messages) == ["m5", "m6"]  # type: ignore[union-attr]


# -- 2g.2 groups through a reflection -------------------------------------------------------------------------------

async def test_a_reflection_points_at_exactly_the_messages_of_the_groups_it_condensed() -> None:
    """m1:m2 and m3:m4 follow each other: the reflection points at m1:m4, those four messages and nothing else.
    Runs with a gap between them stay apart (tests/unit/test_recall_core.py), unlike the reference's one span
    from the first start to the last end (defect 19); joining runs that touch keeps a reflection of reflections
    from listing every range ever observed."""
    om = await memory(count=2)
    for i in range(3, 5):
        await om.add_message(message(i, f"later detail {i}"))
    await om.observe("t1", force=True)
    await om.settle()
    await om.reflect("t1")
    await om.settle()
    context = await om.context("t1")
    await om.close()
    assert context is not None and context.generation == 1
    (group,) = HEADING.findall("\n".join(context.system_blocks))
    assert group[1] == "m1:m4"


async def test_search_still_finds_what_was_observed_after_a_reflection() -> None:
    from om_stream.adapters.embedders import OfflineMiniLMEmbedder

    async with Memory({"model": "openai/gpt-5-mini", "retrieval": {"vector": True},
                       "observation": {"messageTokens": 100_000}}, model=FunctionModel(_facts_observer),
                      clock=ManualClock(START_MS), embedder=OfflineMiniLMEmbedder()) as om:
        for i, fact in enumerate(["my sister Ingrid lives in Trondheim", "the budget review moved to April"], 1):
            await om.add_message(message(i, fact))
            await om.observe("t1", force=True)
            await om.settle()
        await om.reflect("t1")
        await om.settle()
        found = await om.recall("r1", {"mode": "search", "query": "where does the sister live"}, thread_id="t1")
    assert found.count > 0 and "Trondheim" in found.results  # type: ignore[union-attr]


def _facts_observer(request: Any) -> str:
    if request.role == "reflector":
        return "<observations>\nDate: Mar 2, 2026\n* 🔴 (09:00) User talked about family and budgets.\n</observations>"
    history = request.messages[2].content
    facts = re.findall(r"\] (.+)$", history, re.MULTILINE)
    return "<observations>\nDate: Mar 2, 2026\n" + "\n".join(f"* 🔴 (09:00) User said {f}" for f in facts) + \
        "\n</observations>"


# -- 2g.3 the agent's recall instructions ---------------------------------------------------------------------------

async def test_recall_instructions_follow_the_scope_and_whether_search_works() -> None:
    async def first_block(retrieval: Any, **extra: Any) -> str:
        om = await memory({"retrieval": retrieval}, count=2, **extra)
        context = await om.context("t1")
        await om.close()
        assert context is not None
        return context.system_blocks[0]

    from om_stream.adapters.embedders import OfflineMiniLMEmbedder

    browse = await first_block(True)
    assert "every conversation of this user" in browse and 'mode "search"' not in browse
    search = await first_block({"vector": True}, embedder=OfflineMiniLMEmbedder())
    assert 'mode "search"' in search
    thread_only = await first_block({"scope": "thread"})
    assert "every conversation of this user" not in thread_only


async def test_the_applications_recall_guidance_is_added_after_the_built_in_instructions() -> None:
    om = await memory({"retrieval": {"instructions": "Prefer the billing thread."}}, count=2)
    context = await om.context("t1")
    await om.close()
    assert context is not None
    block = context.system_blocks[0]
    assert "Prefer the billing thread." in block
    assert block.index("Prefer the billing thread.") > block.index('mode "messages"')


async def test_thread_scoped_recall_instructions_wait_for_the_first_observation_group() -> None:
    om = await memory({"retrieval": {"scope": "thread"}}, count=2, observe=False)
    context = await om.context("t1")
    await om.close()
    assert context is not None and context.system_blocks == []


async def test_vector_search_without_an_embedder_keeps_browsing_and_is_not_offered() -> None:
    om = await memory({"retrieval": {"vector": True}}, count=2)
    context = await om.context("t1")
    browse = await om.recall("r1", {"threadId": "current"}, thread_id="t1")
    await om.close()
    assert context is not None and 'mode "search"' not in context.system_blocks[0]
    assert browse.count == 2


# -- 2g.4 the recall tool -------------------------------------------------------------------------------------------

async def test_a_range_passed_as_a_cursor_gets_a_hint_to_use_one_of_its_ends() -> None:
    om = await memory()
    result = await om.recall("r1", {"cursor": "m1:m6"}, thread_id="t1")
    await om.close()
    assert result.count == 0 and 'cursor="m1"' in result.messages and 'cursor="m6"' in result.messages  # type: ignore[union-attr]


async def test_messages_are_paged_from_the_cursor_with_next_and_previous_flags() -> None:
    om = await memory()
    middle = await om.recall("r1", {"cursor": "m3", "limit": 2}, thread_id="t1")
    last = await om.recall("r1", {"cursor": "m5", "limit": 2}, thread_id="t1")
    first = await om.recall("r1", {"cursor": "m2", "page": -1, "limit": 2}, thread_id="t1")
    await om.close()
    assert (middle.has_next_page, middle.has_prev_page) == (True, True)  # type: ignore[union-attr]
    assert last.has_next_page is False and first.has_prev_page is False  # type: ignore[union-attr]


async def test_without_a_cursor_a_thread_is_read_from_its_start_or_its_end() -> None:
    om = await memory()
    start = await om.recall("r1", {"threadId": "current", "limit": 2}, thread_id="t1")
    end = await om.recall("r1", {"threadId": "current", "anchor": "end", "limit": 2}, thread_id="t1")
    await om.close()
    assert re.findall(r"\[(m\d)\]:", start.messages) == ["m1", "m2"]  # type: ignore[union-attr]
    assert re.findall(r"\[(m\d)\]:", end.messages) == ["m5", "m6"]  # type: ignore[union-attr]


async def test_recall_never_reads_another_tenants_messages() -> None:
    om = await memory()
    await om.add_message(message(7, "a secret of another user", thread="x1", resource="other"))
    with pytest.raises(RecallError):
        await om.recall("r1", {"threadId": "x1"}, thread_id="t1")
    mine = await om.recall("r1", {"mode": "threads"}, thread_id="t1")
    await om.close()
    assert "x1" not in mine.threads  # type: ignore[union-attr]


async def test_thread_scoped_recall_stays_in_the_current_thread() -> None:
    om = await memory({"retrieval": {"scope": "thread"}})
    await om.add_message(message(7, "in another thread", thread="t2"))
    listed = await om.recall("r1", {"mode": "threads"}, thread_id="t1")
    with pytest.raises(RecallError):
        await om.recall("r1", {"threadId": "t2"}, thread_id="t1")
    await om.close()
    assert "t2" not in listed.threads and listed.count == 1  # type: ignore[union-attr]


async def test_low_detail_shortens_long_parts_and_says_how_to_read_them_whole() -> None:
    om = await memory(count=0, observe=False)
    await om.add_message(message(1, " ".join(f"word{i}" for i in range(600))))
    low = await om.recall("r1", {"threadId": "current"}, thread_id="t1")
    whole = await om.recall("r1", {"cursor": "m1", "partIndex": 0}, thread_id="t1")
    await om.close()
    assert "word599" not in low.messages and "partIndex" in low.messages  # type: ignore[union-attr]
    assert "word599" in whole.messages and whole.detail == "high"  # type: ignore[union-attr]


async def test_a_recall_answer_is_capped_at_about_two_thousand_tokens() -> None:
    om = await memory(count=0, observe=False)
    for i in range(1, 21):
        await om.add_message(message(i, " ".join(f"w{i}x{j}" for j in range(250))))
    high = await om.recall("r1", {"cursor": "m1", "partIndex": 0}, thread_id="t1")
    low = await om.recall("r1", {"threadId": "current", "limit": 20}, thread_id="t1")
    tokens = om.counter.count(low.messages)  # type: ignore[union-attr]
    await om.close()
    assert tokens <= 2_100
    assert high.count == 1


async def test_the_threads_mode_lists_the_users_conversations_newest_first_marking_the_current_one() -> None:
    om = await memory(count=2)
    await om.add_message(message(9, "a newer conversation", thread="t2"))
    listed = await om.recall("r1", {"mode": "threads"}, thread_id="t1")
    await om.close()
    text = listed.threads  # type: ignore[union-attr]
    assert text.index("id: t2") < text.index("id: t1")
    lines = text.splitlines()
    current = lines[lines.index("  id: t1") - 1]
    assert current.endswith("← current") and "← current" not in text.split("id: t1")[0].replace(current, "")


async def test_search_without_an_index_answers_that_it_is_not_configured() -> None:
    om = await memory()
    result = await om.recall("r1", {"mode": "search", "query": "the plan"}, thread_id="t1")
    await om.close()
    assert result.count == 0 and "not configured" in result.results  # type: ignore[union-attr]


async def test_out_of_range_arguments_are_normalised_or_refused() -> None:
    om = await memory()
    capped = await om.recall("r1", {"threadId": "current", "limit": 500, "page": 0}, thread_id="t1")
    with pytest.raises(RecallError):
        await om.recall("r1", {"cursor": "m1", "partIndex": -1}, thread_id="t1")
    with pytest.raises(RecallError):
        await om.recall("r1", {"mode": "search"}, thread_id="t1")  # no query
    await om.close()
    assert (capped.limit, capped.page) == (20, 1)  # type: ignore[union-attr]


async def test_a_page_from_a_cursor_includes_the_cursors_own_message() -> None:
    om = await memory()
    forward = await om.recall("r1", {"cursor": "m3", "limit": 1}, thread_id="t1")
    backward = await om.recall("r1", {"cursor": "m3", "page": -1, "limit": 1}, thread_id="t1")
    await om.close()
    assert re.findall(r"\[(m\d)\]:", forward.messages) == ["m3"]  # type: ignore[union-attr]
    assert re.findall(r"\[(m\d)\]:", backward.messages) == ["m3"]  # type: ignore[union-attr]
