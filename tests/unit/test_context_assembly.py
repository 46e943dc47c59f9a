"""The client's assembly of ``om.context/v2``: a cursor waits for its index and blocks, a newer cursor replaces a
pending one without losing the messages the older one carried, a run the client lacks is asked for once per cursor
and completed with what the messages API returns, and an erase forgets the thread."""

from __future__ import annotations

from om_stream.client.assembly import ContextAssembly, RunWanted
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_refs import ByReference
from tests.support.replayed_contexts import first_thread_by_reference


def _published() -> list[tuple[ByReference, ContextRecord]]:
    return first_thread_by_reference(5)


def _blocks(assembly: ContextAssembly, published: ByReference) -> object:
    outcome: object = None
    for block in published.blocks:
        outcome = assembly.on_block(block.thread_id, block.digest, block.text) or outcome
    return outcome


def test_cursors_wait_for_their_blocks_and_a_newer_one_replaces_an_older_one() -> None:
    records = _published()
    assert len(records) >= 4
    assembly = ContextAssembly()
    first, _ = records[0]
    second, record = records[1]
    thread = first.cursor.thread_id
    # both cursors first, then the index and blocks: only the newer context comes, and it is whole
    assert assembly.on_cursor(first.cursor) is None
    assert assembly.on_cursor(second.cursor) is None
    outcomes = [_blocks(assembly, first), _blocks(assembly, second)]
    for published in (first, second):
        if published.index is not None:
            outcomes.append(assembly.on_index(thread, published.index))
    delivered = [o for o in outcomes if o is not None]
    assert len(delivered) == 1
    assert isinstance(delivered[0], ContextRecord) and encode(delivered[0]) == encode(record)


def test_a_run_the_client_lacks_is_asked_for_once_and_completed_with_the_fetched_messages() -> None:
    records = _published()
    late, record = next((p, r) for p, r in records[2:] if len(r.messages) > len(p.cursor.new_messages))
    assembly = ContextAssembly()
    thread = late.cursor.thread_id
    # a client that starts here: it holds the blocks (the topics are read from their beginning), not the messages
    for published, _ in records:
        for block in published.blocks:
            assembly.on_block(block.thread_id, block.digest, block.text)
        if published.index is not None:
            assembly.on_index(thread, published.index)
        if published is late:
            break
    wanted = assembly.on_cursor(late.cursor)
    assert isinstance(wanted, RunWanted) and wanted.cursor is late.cursor
    assert assembly.step(thread) is None, "asked once per cursor"
    assert assembly.with_run(late.cursor, record.messages[:-1]) is None, "a run one message short does not do"
    rebuilt = assembly.with_run(late.cursor, record.messages)
    assert rebuilt is not None and encode(rebuilt) == encode(record)
    assembly.forget(thread)
    assert assembly.step(thread) is None
