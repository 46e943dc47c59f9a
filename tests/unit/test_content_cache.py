"""The content cache's bound is a bound on memory: its estimate of what an entry holds is checked against what
tracemalloc measures, for message shapes the project did not pick for the estimate, and a full cache holds about
what its setting says (a soak found the old estimate, ``tokens * 4 + 256``, 3.3 times too low for short messages).
"""

from __future__ import annotations

import base64
import gc
import random
import sys
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum

import pytest

from om_stream.core.messages import Message
from om_stream.runtime.content_cache import ContentCache, footprint
from om_stream.wire.codec import decode_message, encode
from om_stream.wire.messages import MessageRecord

COPIES = 300


def _message(i: int, parts: list[dict[str, object]], metadata: dict[str, object] | None = None) -> Message:
    """A message as the worker makes it: from the bytes of its record, decoded."""
    made = Message.model_validate({
        "message_id": f"msg-{i:010d}", "thread_id": f"thread-{i % 997:06d}", "resource_id": f"user-{i % 389:06d}",
        "role": "user" if i % 2 else "assistant", "created_at": datetime(2026, 12, 7, tzinfo=UTC).isoformat(),
        "parts": parts, "metadata": metadata})
    raw = encode(MessageRecord.from_message(made))
    return decode_message(made.thread_id.encode(), raw, max_bytes=len(raw)).to_message()


def _text(i: int, body: str) -> list[dict[str, object]]:
    return [{"type": "text", "text": f"{body} #{i}"}]


SHAPES: dict[str, Callable[[int], Message]] = {
    "a greeting": lambda i: _message(i, _text(i, "hi, how are you?")),
    "a soak turn": lambda i: _message(i, _text(i, "lorem ipsum " * 10)),
    "a paragraph": lambda i: _message(i, _text(i, "the quick brown fox jumps over the lazy dog " * 25)),
    "a long paste": lambda i: _message(i, _text(i, "log line 2026-12-07T00:00:00Z INFO ok\n" * 400)),
    "Japanese": lambda i: _message(i, _text(i, "観察記憶は会話の要点を残します。" * 30)),
    "emoji": lambda i: _message(i, _text(i, "ok 👍🏽 done 🎉 " * 40)),
    "reasoning and text": lambda i: _message(i, [{"type": "reasoning", "text": f"think {i} " * 60},
                                                   {"type": "text", "text": f"answer {i} " * 30}]),
    "a tool call": lambda i: _message(i, [{
        "type": "tool-call", "tool_call_id": f"call-{i}", "tool_name": "search",
        "args": {"query": f"weather in city {i}",
                 "filters": {"days": list(range(7)), "units": "metric", "nested": [{"a": "b"}] * 5}}}]),
    "a tool result": lambda i: _message(i, [{
        "type": "tool-result", "tool_call_id": f"call-{i}", "tool_name": "search",
        "result": [{"title": f"hit {i} {k}", "score": k / 10} for k in range(20)]}]),
    "an inline image": lambda i: _message(i, [{"type": "image", "data": base64.b64encode(
        random.Random(i).randbytes(30_000)).decode(), "mime_type": "image/png"}]),
    "with metadata": lambda i: _message(i, _text(i, "see attached"), {"source": "slack", "channel": f"c-{i}",
                                                                       "tags": ["a", "b", "c"], "n": i}),
}


def _measured(make: Callable[[], Iterator[object]]) -> tuple[int, list[object]]:
    """What the objects ``make`` yields hold in memory (tracemalloc), and the objects (kept alive)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = list(make())
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, kept
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_messages_estimate_is_within_a_fifth_of_what_it_holds_once_its_json_is_made(shape: str) -> None:
    def made() -> Iterator[object]:
        for i in range(COPIES):
            message = SHAPES[shape](i)
            assert message.compact_json  # what the v1 context writer makes of every message it writes
            yield message

    held, messages = _measured(made)
    estimated = sum(footprint(m) for m in messages)  # type: ignore[arg-type]
    ratio = estimated / held
    assert 0.8 <= ratio <= 1.25, f"{shape}: estimated {estimated // COPIES} B, measured {held // COPIES} B"


@pytest.mark.parametrize("text", ["short", "x" * 5_000, "日本語" * 500])
def test_a_texts_estimate_is_what_it_holds(text: str) -> None:
    held, texts = _measured(lambda: (f"{text}{i}" for i in range(COPIES)))
    estimated = sum(footprint(t) for t in texts)  # type: ignore[arg-type]
    assert 0.8 <= estimated / held <= 1.25, (estimated // COPIES, held // COPIES)


class _Label(StrEnum):
    SLACK = "slack"


class _Tags(list[str]):
    pass


class _Count(int):
    pass


def test_values_of_subclassed_types_count_as_their_plain_twins() -> None:
    """The walk takes exact types first (it runs on every message taken in); a subclass of str, dict, list or int
    (an enum's value in metadata, a caller's ordered dict) goes the general way and counts what its plain twin
    does, its own larger object aside: nothing in it is left out or counted twice."""
    plain = {"source": "slack", "tags": ["a", "b"], "n": 3, "nested": {"k": ["x", 1.5, None, True]}}
    subclassed = {"source": _Label.SLACK, "tags": _Tags(["a", "b"]), "n": _Count(3),
                  "nested": OrderedDict(k=["x", 1.5, None, True])}
    message = _message(7, _text(7, "see attached"))
    twin, other = (message.model_copy(update={"metadata": metadata}) for metadata in (plain, subclassed))
    larger = sum(sys.getsizeof(subclassed[name]) - sys.getsizeof(plain[name]) for name in ("source", "tags", "nested"))
    assert footprint(other) == footprint(twin) + larger


def test_a_full_cache_holds_about_its_bound_in_memory() -> None:
    bound = 1024 * 1024
    cache = ContentCache(bound)

    def fill() -> Iterator[object]:
        for i in range(10_000):  # far more than fit: the cache is the only holder of each message
            message = SHAPES["a soak turn"](i)
            assert message.compact_json
            cache.put(f"m:user:{message.message_id}", message)
        yield cache

    held, _ = _measured(fill)
    assert cache.size_bytes <= bound
    assert 0.75 * bound <= held <= 1.25 * bound, f"a cache bounded at {bound} B holds {held} B ({len(cache)} entries)"


def test_the_cache_drops_the_least_recently_used_first_and_counts_what_it_drops() -> None:
    first, second, third = (SHAPES["a greeting"](i) for i in range(3))
    cache = ContentCache(2 * (footprint(first) + 400))
    cache.put("a", first)
    cache.put("b", second)
    assert cache.get("a") is first  # "b" is now the least recently used
    cache.put("c", third)
    assert cache.get("b") is None and cache.get("a") is first and cache.get("c") is third
    before = cache.size_bytes
    cache.put("c", third)  # put again: counted once
    assert cache.size_bytes == before
    assert cache.evict(lambda key, _: key == "a") == 1 and cache.get("a") is None
