"""What every exporting content store does (memory, SQLite, Cassandra), as checks a test runs on two fresh stores
of one kind: the source is filled through the ContentStore writes as the engine makes them, exported, imported into
the target, and the target must then hold the same (its own export is the same, line for line, and every read
answers the same).

Each check takes the two stores and a ``prefix`` (ids unique to the test, so checks can share Cassandra keyspaces).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from om_stream.core.commands import ActivateChunks, CommitGeneration, PersistThreadMetadata
from om_stream.core.state import RecordState, ThreadState
from om_stream.errors import InputRejected
from om_stream.ports import ContentStore, ExportSource, GroupQueries, MessageQueries, ThreadQueries
from om_stream.runtime.exporter import ExportSpec, HeldStates, export_lines
from om_stream.runtime.importer import ImportReport, import_lines
from tests.support.store_contract import T0, authored_thread, message, segment

DAY = timedelta(days=1)


class Collected:
    """A restorer that keeps the states it is given (the stores' contract has no host)."""

    def __init__(self) -> None:
        self.states: list[RecordState] = []

    async def restore(self, state: RecordState) -> None:
        self.states.append(state)


async def export_of(store: ExportSource, resource: str, *, states: Sequence[RecordState] = (),
                    scope: str = "thread") -> list[bytes]:
    spec = ExportSpec(resource, store, HeldStates({s.key: s for s in states}), scope,  # type: ignore[arg-type]
                      "o200k_base")
    return [line async for line in export_lines(spec)]


def body(lines: Sequence[bytes]) -> list[dict[str, Any]]:
    """The lines as values, the header's time left out (two exports differ in nothing else)."""
    values = [json.loads(line) for line in lines]
    for value in values:
        value.pop("exported_at", None)
    return values


async def fill(store: ContentStore, p: str) -> tuple[str, list[RecordState]]:
    """A resource with two threads over 60 days (several Cassandra buckets), observed, reflected twice, one record
    cleared once; another tenant beside it. Returns the resource and its records' states."""
    r, t1, t2 = f"{p}r", f"{p}t1", f"{p}t2"
    ids = [f"{p}m{i}" for i in range(14)]
    for i, mid in enumerate(ids):
        thread = t1 if i < 12 else t2
        seq = i if i < 12 else i - 12
        await store.put_message(thread, message(mid, thread, r, T0 + DAY * (5 * i), role="user" if i % 2 else
                                                "assistant", tool="search" if i == 3 else None), seq, 3 + i)
    await store.put_message(f"{p}other", message(f"{p}x", f"{p}other", f"{p}other-r", T0), 0, 5)
    await store.put_thread_metadata(PersistThreadMetadata(
        thread_id=t1, resource_id=r, title="Trip", current_task="plan", suggested_response="ask dates",
        extracted_values={"city": "Porto", "days": 3}, last_observed_message_id=ids[9],
        working_memory={"name": "Ada", "likes": ["tea"]}))
    await store.put_thread_metadata(PersistThreadMetadata(thread_id=t2, resource_id=r, working_memory="# notes"))
    a = segment(p, "a", t1, threads=(t1,), ids=tuple(ids[0:4]), at=10)
    b = segment(p, "b", t1, threads=(t1,), ids=tuple(ids[5:8]), at=20, first_seq=5)
    c = segment(p, "c", t1, status="active", threads=(t1,), ids=tuple(ids[8:10]), at=30, first_seq=8)
    for s in (a, b, c):
        await store.put_segment(s)
    await store.activate_chunks(ActivateChunks(record_key=t1, generation=0, chunk_ids=(a.segment_id, b.segment_id),
                                               position=1))
    ref1 = segment(p, "ref1", t1, kind="reflection", status="active", threads=(t1,), ids=(ids[0], ids[7]),
                   text="condensed a and b", at=40)
    await store.put_segment(ref1)
    await store.commit_generation(CommitGeneration(
        record_key=t1, generation=1, segment_ids=(ref1.segment_id, c.segment_id), reflection_id=ref1.segment_id,
        replaced_segment_ids=(a.segment_id, b.segment_id), observation_tokens=14))
    d = segment(p, "d", t1, status="active", generation=1, threads=(t1,), ids=tuple(ids[10:12]), at=50, first_seq=10)
    await store.put_segment(d)
    ref2 = segment(p, "ref2", t1, kind="reflection", status="buffered", generation=1, threads=(t1,),
                   ids=(ids[0], ids[9]), text="condensed again", at=60)
    await store.put_segment(ref2)
    await store.commit_generation(CommitGeneration(
        record_key=t1, generation=2, segment_ids=(ref2.segment_id, d.segment_id), reflection_id=ref2.segment_id,
        replaced_segment_ids=(ref1.segment_id, c.segment_id), observation_tokens=9))
    later = segment(p, "later", t1, threads=(t1,), ids=(ids[11],), at=70, first_seq=11, text="buffered, waiting")
    await store.put_segment(later)
    # t2 was cleared once: what it observed before is gone, what came after stays
    gone = segment(p, "gone", t2, status="active", threads=(t2,), ids=(ids[12],), at=15)
    await store.put_segment(gone)
    await store.clear(t2, 1)
    kept = segment(p, "kept", t2, status="active", generation=0, threads=(t2,), ids=(ids[12], ids[13]), at=80)
    await store.put_segment(kept)
    states = [RecordState(key=t1, scope="thread", resource_id=r, id_seq=40, msg_seq=11, context_version=7,
                          generation=2, override_message_tokens=900),
              RecordState(key=t2, scope="thread", resource_id=r, epoch=1, id_seq=9, msg_seq=1)]
    for state in states:
        state.threads[state.key] = ThreadState(state.key, title="Trip" if state.key == t1 else None,
                                               last_message_id=ids[11] if state.key == t1 else ids[13])
    return r, states


async def check_export_import_round_trip(source: ContentStore, target: ContentStore, p: str) -> None:
    assert isinstance(source, ExportSource) and isinstance(target, ExportSource)
    resource, states = await fill(source, p)
    lines = await export_of(source, resource, states=states)
    exported = body(lines)
    kinds = [line["type"] for line in exported]
    assert kinds == sorted(kinds, key=["header", "state", "thread", "message", "record", "segment", "generation",
                                       "recall-point", "end"].index)
    assert kinds.count("message") == 14 and kinds.count("thread") == 2 and kinds.count("state") == 2
    assert not any(f"{p}other" in line.decode() for line in lines), "another tenant's rows were exported"
    counts = exported[-1]["counts"]
    assert (counts["messages"], counts["segments"], counts["generations"], counts["records"]) == (14, 8, 2, 2)
    assert {line["segment_id"] for line in exported if line["type"] == "segment"} == {
        f"{p}{s}" for s in ("a", "b", "c", "ref1", "d", "ref2", "later", "kept")}  # the cleared epoch's is gone
    assert [line["epoch"] for line in exported if line["type"] == "record"] == [0, 1]

    collected = Collected()
    report = await import_lines(lines, store=target, restorer=collected, scope="thread")
    assert isinstance(report, ImportReport)
    assert (report.messages, report.segments, report.generations, report.states) == (14, 8, 2, 2)
    assert [s.key for s in collected.states] == [s.key for s in states] and collected.states == states
    again = body(await export_of(target, resource, states=collected.states))
    assert again == exported, "the imported store does not export what was imported"
    await _reads_agree(source, target, resource, p)


async def _reads_agree(source: ContentStore, target: ContentStore, resource: str, p: str) -> None:
    """Every read a deployment makes answers the same from both stores."""
    t1, t2 = f"{p}t1", f"{p}t2"
    for thread in (t1, t2):
        assert await target.get_thread_metadata(thread) == await source.get_thread_metadata(thread)
    ids = [f"{p}m{i}" for i in range(14)]
    assert await target.get_messages(ids, resource_id=resource) == await source.get_messages(ids, resource_id=resource)
    segment_ids = [f"{p}{s}" for s in ("a", "b", "c", "ref1", "d", "ref2", "later", "kept", "gone")]
    assert await target.get_segment_texts(segment_ids) == await source.get_segment_texts(segment_ids)
    for record, through in ((t1, 11), (t2, 1)):
        got = await target.get_record_messages(record, resource_id=resource, thread_ids=(record,), through_seq=through)
        assert got == await source.get_record_messages(record, resource_id=resource, thread_ids=(record,),
                                                       through_seq=through)
    if isinstance(source, GroupQueries) and isinstance(target, GroupQueries):
        for record in (t1, t2):
            assert await target.list_groups(record) == await source.list_groups(record)
        for generation in (1, 2):
            assert await target.get_generation(t1, generation) == await source.get_generation(t1, generation)
    if isinstance(source, ThreadQueries) and isinstance(target, ThreadQueries):
        assert await target.list_threads(resource) == await source.list_threads(resource)
    if isinstance(source, MessageQueries) and isinstance(target, MessageQueries):
        for thread in (t1, t2):
            mine = await source.list_thread_messages(resource, thread, limit=50)
            assert await target.list_thread_messages(resource, thread, limit=50) == mine


async def check_export_pages_through_long_threads(source: ContentStore, target: ContentStore, p: str) -> None:
    """More messages than a page, in several threads and (Cassandra) buckets: each exported once, in order."""
    assert isinstance(source, ExportSource)
    r = f"{p}r"
    expected: list[str] = []
    for thread, count in ((f"{p}a", 1203), (f"{p}b", 7), (f"{p}c", 501)):
        for i in range(count):
            mid = f"{p}{thread[-1]}{i:05d}"
            await source.put_message(thread, message(mid, thread, r, T0 + timedelta(hours=7 * i)), i, 1)
            expected.append(mid)
    exported = body(await export_of(source, r))
    got = [line["message"]["message_id"] for line in exported if line["type"] == "message"]
    assert got == expected  # thread by thread, each in its order: nothing twice, nothing left out
    assert [line["seq"] for line in exported if line["type"] == "message"][:3] == [0, 1, 2]


async def check_import_refuses_a_resource_the_target_holds(source: ContentStore, target: ContentStore,
                                                           p: str) -> None:
    resource, states = await fill(source, p)
    lines = await export_of(source, resource, states=states)
    await target.put_message(f"{p}t2", message(f"{p}m13", f"{p}t2", resource, T0), 0, 1)
    collected = Collected()
    with pytest.raises(InputRejected, match="already holds thread") as refused:
        await import_lines(lines, store=target, restorer=collected, scope="thread")
    assert refused.value.reason == "resource_exists"
    assert collected.states == [] and await target.get_segment_texts([f"{p}a"]) == {}  # nothing was written
    report = await import_lines(lines, store=target, restorer=collected, scope="thread", force=True)
    assert report.messages == 14 and len(collected.states) == 2


async def check_export_import_keeps_authors(source: ContentStore, target: ContentStore, p: str) -> None:
    """A shared thread's authors are in the export's message lines, and an import gives them back as they were."""
    assert isinstance(source, ExportSource) and isinstance(target, ExportSource)
    r, t = f"{p}r", f"{p}t"
    written = authored_thread(p, t, r)
    for seq, m in enumerate(written):
        await source.put_message(t, m, seq, 4)
    lines = await export_of(source, r)
    exported = [line["message"] for line in body(lines) if line["type"] == "message"]
    assert [m.get("author") for m in exported] == [
        {"id": f"{p}user-42", "name": "Ana Lima 🇧🇷", "kind": "human"}, {"id": "billing-agent", "kind": "agent",
                                                                        "name": None},
        {"id": "crm", "name": "CRM [prod]", "kind": "tool"}, None]
    report = await import_lines(lines, store=target, restorer=Collected(), scope="thread")
    assert report.messages == 4
    ids = [m.message_id for m in written]
    assert await target.get_messages(ids, resource_id=r) == written
    assert body(await export_of(target, r)) == body(lines)


EXPORT_CHECKS = (check_export_import_round_trip, check_export_pages_through_long_threads,
                 check_import_refuses_a_resource_the_target_holds, check_export_import_keeps_authors)
