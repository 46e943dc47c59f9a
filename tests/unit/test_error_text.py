"""Error text on failed events (issue 30 item 5): the cause chain, each cause once, and a visible cut."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.adapters.offline_model import OfflineModel
from om_stream.core.commands import RequestObservation
from om_stream.core.error_text import MAX_ERROR_CHARS, cut_error, error_text
from om_stream.core.messages import Message, TextPart
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse
from om_stream.runtime.cycles import CycleRunner
from tests.support.config_options import resolve


def _chained() -> ModelError:
    try:
        try:
            raise ConnectionResetError("connection reset by peer")
        except ConnectionResetError as low:
            raise OSError("upstream proxy closed the stream") from low
    except OSError as exc:
        try:
            raise ModelError("openai/gpt-5-mini failed", kind="connection") from exc
        except ModelError as top:
            return top


def test_the_cause_chain_is_included_each_cause_once() -> None:
    text = error_text(_chained())
    assert text == ("ModelError: openai/gpt-5-mini failed: upstream proxy closed the stream: "
                    "connection reset by peer")


def _translated() -> None:
    try:
        raise ValueError("maximum context length is 128000 tokens")
    except ValueError as low:
        raise ModelError(f"BadRequestError (HTTP 400): {low}", status_code=400) from low


def test_a_cause_whose_message_was_repeated_is_not_said_twice() -> None:
    with pytest.raises(ModelError) as caught:
        _translated()
    assert error_text(caught.value) == ("ModelError: BadRequestError (HTTP 400): maximum context length is 128000 "
                                        "tokens")


def test_a_long_message_is_cut_at_the_limit_and_ends_with_an_ellipsis() -> None:
    text = error_text(ModelError("word " * 1_000))
    assert len(text) == MAX_ERROR_CHARS
    assert text.endswith("...")
    assert cut_error("short") == "short"
    assert cut_error("x" * MAX_ERROR_CHARS) == "x" * MAX_ERROR_CHARS


class _Failing:
    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise _chained()


async def test_a_failed_cycle_reports_the_chain() -> None:
    store = InMemoryContentStore()
    await store.put_message("t1", Message(message_id="m1", thread_id="t1", resource_id="r1", role="user",
                                          created_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
                                          parts=(TextPart(text="I moved to Lyon."),)), seq=1, tokens=5)
    runner = CycleRunner(store=store, model=_Failing(), offline=OfflineModel(len), config=resolve({}),
                         count_text=len)
    result = await runner.run(RequestObservation(
        record_key="t1", request_id="obs-1#1", cycle_id="obs-1", attempt=1, kind="sync", trigger="turn-sync",
        resource_id="r1", thread_ids=("t1",), message_ids=("m1",), message_tokens=5, previous_segment_ids=(),
        buffered_segment_ids=(), prior_current_task=None, prior_suggested_response=None, prior_thread_title=None,
        want_hints=True, use_offline_model=False, deadline_at=0))
    assert not result.ok
    assert result.error == error_text(_chained())
