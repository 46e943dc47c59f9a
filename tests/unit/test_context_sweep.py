"""The pure parts of the sweeps of ``om.context.blocks`` (``runtime/worker/context_sweep.py``): which thread a key
belongs to, which keys of the erased threads a consumer of the compacted topic is still given text for, which keys
a thread's list no longer names, and which threads the worker marks for a look (a list sent from nothing).
A property over many seeds: threads whose ids begin with another's id and a slash, keys no worker wrote, blocks
published, tombstoned and published again; the keys found are exactly those of the erased threads whose last
record holds a value, and no other thread's."""

from __future__ import annotations

import random

import pytest

from om_stream.runtime.worker.context_sweep import HeldBlocks, block_thread, erased_tombstones, unlisted
from om_stream.runtime.worker.context_wire import PublishedContexts
from om_stream.runtime.worker.segment_roll import ROLL_KEY
from om_stream.settings import KafkaSettings
from om_stream.wire.context_refs import Sent
from om_stream.wire.context_v2 import ContextIndex, block_digest, block_key

KAFKA = KafkaSettings(partitions=4)
D = block_digest("<observations>")


@pytest.mark.parametrize(("key", "thread"), [
    (block_key("t1", D).encode(), "t1"),
    (block_key("t1/0", D).encode(), "t1/0"),  # a thread id holding a slash: the digest has a fixed length
    (block_key("a/" + D, D).encode(), "a/" + D),  # even one that ends like a block key
    (block_key("é✓", D).encode(), "é✓"),
    (ROLL_KEY, None),  # the segment roll's key: not UTF-8
    (b"t1", None),  # an index or cursor key
    (f"t1/{D[:-1]}".encode(), None),  # a digest one character short
    (f"t1/{D[:-1]}=".encode(), None),  # not base64url
    (f"/{D}".encode(), None),  # no thread id
    (None, None),
])
def test_a_key_names_its_thread_only_when_it_is_a_block_key(key: bytes | None, thread: str | None) -> None:
    assert block_thread(key) == thread


def _threads(rng: random.Random) -> list[str]:
    base = [f"t{n}" for n in range(rng.randint(1, 4))]
    nested = [f"{rng.choice(base)}/{rng.randint(0, 3)}" for _ in range(rng.randint(0, 3))]
    deeper = [f"{t}/x" for t in nested if rng.random() < 0.5]
    return list(dict.fromkeys(base + nested + deeper))


@pytest.mark.parametrize("seed", range(300))
def test_the_keys_found_are_the_erased_threads_keys_whose_last_record_holds_text(seed: int) -> None:
    rng = random.Random(seed)
    threads = _threads(rng)
    erased = set(rng.sample(threads, rng.randint(1, len(threads))))
    texts = [f"block {n}" for n in range(6)]
    last: dict[tuple[str, str], bool] = {}  # (thread, digest) -> its last record holds a value
    records: list[tuple[bytes | None, bool]] = []
    for _ in range(rng.randint(0, 60)):
        roll = rng.random()
        if roll < 0.08:
            records.append((ROLL_KEY, False))
            continue
        if roll < 0.12:
            records.append((rng.choice(threads).encode(), rng.random() < 0.5))  # a stray index-like key
            continue
        thread, digest = rng.choice(threads), block_digest(rng.choice(texts))
        holds = rng.random() < 0.7
        records.append((block_key(thread, digest).encode(), holds))
        last[(thread, digest)] = holds
    held = HeldBlocks(erased)
    for key, holds in records:
        held.add(key, holds)
    expected = {block_key(t, d).encode() for (t, d), holds in last.items() if holds and t in erased}
    assert set(held.keys) == expected
    assert len(held.keys) == len(expected)


def test_the_tombstones_go_to_the_partition_given_blocks_first_then_each_index_and_cursor() -> None:
    keys = [block_key("t1", D).encode(), block_key("t1", block_digest("x")).encode()]
    out = erased_tombstones(KAFKA, 3, ["t2", "t1"], keys)
    assert all(p.value is None and p.partition == 3 and ("om_erased", b"1") in p.headers for p in out)
    assert [(p.topic, p.key) for p in out] == [
        (KAFKA.topic_context_blocks, keys[0]), (KAFKA.topic_context_blocks, keys[1]),
        (KAFKA.topic_context_index, b"t1"), (KAFKA.topic_context, b"t1"),
        (KAFKA.topic_context_index, b"t2"), (KAFKA.topic_context, b"t2")]


def test_only_the_blocks_a_thread_it_judges_no_longer_lists_are_unlisted() -> None:
    listed = {"t1": {D}, "t1/0": set()}
    other = block_digest("x")
    keys = [block_key("t1", D).encode(), block_key("t1", other).encode(), block_key("t1/0", D).encode(),
            block_key("t2", other).encode(), ROLL_KEY]
    assert unlisted(keys, listed.get) == [keys[1], keys[2]]


def _sent(*texts: str) -> Sent:
    return Sent(ContextIndex(thread_id="t1", version=len(texts), blocks=[block_digest(t) for t in texts]), ())


def test_a_list_sent_from_nothing_marks_its_thread_unswept_until_swept_and_a_take_over_keeps_its_generation() -> None:
    published = PublishedContexts()
    published.advance("t1", _sent("a"), from_nothing=True, generation=3)
    published.advance("t1", _sent("a", "b"), generation=3)  # a later list keeps the mark: the sweep has not run
    published.advance("t2", _sent("a"), generation=3)  # known before: nothing to look for
    published.advance("t3", _sent("a"), from_nothing=True, generation=2)
    assert published.unswept() == ["t1", "t3"]
    published.swept("t1")
    assert published.unswept() == ["t3"]
    sent = published.sent("t1")
    assert sent is not None and sent.index.version == 2
    published.forget_all(keep_generation=3)  # a take-over in generation 3: what went out in 3 is this worker's
    assert set(published) == {"t1", "t2"} and published.unswept() == []
    published.forget("t1")
    published.forget_all()
    assert not published
