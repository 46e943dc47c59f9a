"""``om.context/v2`` gives back ``om.context/v1`` byte for byte: for every context of many replayed conversations,
the records the worker would publish (``wire.context_refs.by_reference``), sent through the wire (encoded, decoded
as a consumer decodes them), rebuild the v1 record a reader would have had, with the clients' algorithm
(``known_messages``, ``resolve_run``, ``ready``, ``rebuild``). Also when the worker forgets what it published before
(a restart or a hand-over) at random points."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.core.messages import Message
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_refs import (
    ByReference,
    Sent,
    by_reference,
    known_messages,
    observations_of,
    ready,
    rebuild,
    resolve_run,
)
from om_stream.wire.context_v2 import (
    BlockRecord,
    ContextCursor,
    ContextIndex,
    block_digest,
    block_key,
    split_block_key,
)
from om_stream.wire.schemas import decode_payload
from tests.support.replayed_contexts import first_thread_by_reference, replayed_contexts, variation


class Reader:
    """One thread as a client holds it, reading the three topics in publication order."""

    def __init__(self) -> None:
        self.index: ContextIndex | None = None
        self.blocks: dict[str, str] = {}
        self.messages: list[Message] = []

    def read(self, published: ByReference) -> ContextRecord:
        for block in published.blocks:
            decoded = decode_payload("om.context-block/v1", encode(block))
            assert isinstance(decoded, BlockRecord)
            self.blocks[decoded.digest] = decoded.text
        if published.index is not None:
            index = decode_payload("om.context-index/v1", encode(published.index))
            assert isinstance(index, ContextIndex)
            self.index = index
        cursor = decode_payload("om.context/v2", encode(published.cursor))
        assert isinstance(cursor, ContextCursor)
        assert ready(cursor, self.index, self.blocks)
        assert self.index is not None
        run = resolve_run(cursor, known_messages(self.messages, cursor))
        assert run is not None, "a reader that saw every cursor never needs to fetch the run"
        rebuilt = rebuild(cursor, self.index, self.blocks, run)
        for digest in published.dropped:
            del self.blocks[digest]
        self.messages = list(rebuilt.messages)
        return rebuilt


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31))
def test_the_v2_records_rebuild_every_v1_context_byte_for_byte(seed: int) -> None:
    v = variation(seed)
    forgets = random.Random(f"forget:{seed}")
    sent: dict[str, Sent] = {}
    readers: dict[str, Reader] = {}
    v1_bytes = v2_bytes = 0
    for seen in replayed_contexts(v):
        spec, record = seen.spec, seen.record
        if forgets.random() < 0.05:
            sent.pop(spec.thread_id, None)  # the worker restarted: it publishes everything again
        published, sent[spec.thread_id] = by_reference(
            record, pinned_message_id=spec.pinned_message_id,
            run_ids=[i for i in spec.message_ids if i != spec.pinned_message_id], expire_before=spec.expire_before,
            previous=sent.get(spec.thread_id))
        rebuilt = readers.setdefault(spec.thread_id, Reader()).read(published)
        assert encode(rebuilt) == encode(record), (v, spec.version)
        assert rebuilt.system_blocks == record.system_blocks
        v1_bytes += len(encode(record))
        v2_bytes += sum(len(encode(r)) for r in (*published.blocks, published.cursor)) + (
            len(encode(published.index)) if published.index is not None else 0)
    assert v2_bytes < v1_bytes or v1_bytes == 0


def test_a_reader_that_missed_a_cursor_finds_the_run_incomplete() -> None:
    """The count protects a reader that did not see every cursor (it started late, or compaction removed one): its
    run does not check out, so it fetches the run instead of sending a wrong context."""
    records = first_thread_by_reference(3)
    checked = 0
    for (_, before), (skipped, _), (later, record) in zip(records, records[1:], records[2:], strict=False):
        resent = {m.message_id for m in later.cursor.new_messages}
        lost = {m.message_id for m in skipped.cursor.new_messages} - resent
        if lost & {m.message_id for m in record.messages}:
            checked += 1
            assert resolve_run(later.cursor, known_messages(before.messages, later.cursor)) is None
    assert checked > 3


def test_the_digest_is_sha256_cut_to_16_bytes_in_base64url() -> None:
    assert block_digest("") == "47DEQpj8HBSa-_TImW-5JA"
    assert block_digest("<observations>") != block_digest("</observations>")
    assert len(block_digest("é" * 10_000)) == 22
    key = block_key("a/thread/with/slashes", block_digest("x"))
    assert split_block_key(key) == ("a/thread/with/slashes", block_digest("x"))


@pytest.mark.parametrize(("blocks", "expected"), [
    ([], ""),
    (["intro"], ""),
    (["intro", "<observations>", "one", "two", "</observations>", "<current-task>\nx\n</current-task>"],
     "<observations>\none\n\ntwo\n</observations>"),
    (["intro", "<observations>", "</observations>"], ""),
])
def test_the_observations_are_the_segment_blocks_joined(blocks: list[str], expected: str) -> None:
    assert observations_of(blocks) == expected
