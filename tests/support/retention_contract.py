"""Retention (``ports.ExpiringStore``) as every content store does it (memory, SQLite, Cassandra): what a purge
reads, the purge itself (scoped by the tenant, idempotent, counted), and a record's own window. Each check takes a
fresh store and a prefix, as in ``store_contract``."""

from __future__ import annotations

from datetime import timedelta

from om_stream.core.commands import (
    CommitGeneration,
    ExpireStored,
    PersistRetention,
    PersistThreadMetadata,
    SegmentRewrite,
)
from om_stream.core.retention import ExpiryCounts
from om_stream.ports import ContentStore, RecallStore
from tests.support.store_contract import T0, message, segment

__all__ = ["RECALL_RETENTION_CHECKS", "RETENTION_CHECKS"]

DAYS = 14  # messages a day apart: two of Cassandra's 10-day buckets


def _ms(days: float) -> int:
    return int((T0 + timedelta(days=days)).timestamp() * 1000)


async def _record(store: ContentStore, p: str, thread: str, resource: str) -> None:
    """``DAYS`` messages a day apart (ids shared by both tenants on purpose), two active observations and a
    reflection generation, the thread's metadata, two cached model results of the record."""
    for i in range(DAYS):
        await store.put_message(thread, message(f"{p}m{i}", thread, resource, T0 + timedelta(days=i),
                                                f"day {i} of {thread}"), i, 5)
    ids = tuple(f"{p}m{i}" for i in range(DAYS))
    await store.put_segment(segment(p, f"{thread}-old", thread, status="active", threads=(thread,), ids=ids[:3],
                                    text=f"old of {thread}", at=_ms(2)))
    await store.put_segment(segment(p, f"{thread}-mid", thread, status="active", threads=(thread,), ids=ids[3:9],
                                    text=f"mid of {thread}", at=_ms(8), first_seq=3))
    await store.put_segment(segment(p, f"{thread}-ref", thread, kind="reflection", status="active", generation=1,
                                    threads=(thread,), ids=ids[:9], text=f"reflected {thread}", at=_ms(8)))
    await store.commit_generation(CommitGeneration(thread, 1, (f"{p}{thread}-ref",), f"{p}{thread}-ref",
                                                   (f"{p}{thread}-old", f"{p}{thread}-mid"), 7))
    await store.put_thread_metadata(PersistThreadMetadata(thread, resource, title=f"title of {thread}",
                                                          current_task="task", extracted_values={"k": "v"},
                                                          working_memory="notes"))
    for cycle in ("a", "b"):
        await store.put_result(f"{p}{thread}-{cycle}#1:digest", f"answer of {thread}".encode(), record_key=thread)


def _purge(p: str, thread: str, resource: str, before_days: float) -> ExpireStored:
    return ExpireStored(record_key=thread, resource_id=resource, expiry_id=f"{p}exp", before=_ms(before_days),
                        thread_ids=(thread,), deletes=(f"{p}{thread}-old",),
                        rewrites=(SegmentRewrite(f"{p}{thread}-mid", f"{p}{thread}-mid2", f"cut of {thread}", 3),),
                        threads=(thread,), keep_cycles=(f"{p}{thread}-b",))


async def check_a_purge_removes_what_expired_and_only_the_tenants(store: ContentStore, p: str) -> None:
    ana, bob, t1, t2 = f"{p}ana", f"{p}bob", f"{p}t1", f"{p}t2"
    await _record(store, p, t1, ana)
    await _record(store, p, t2, bob)  # another tenant, the same message ids
    texts = {s.segment_id: (s.text, s.boundary_at) for s in await store.segment_texts_of(t1, ana)}
    assert texts == {f"{p}{t1}-old": (f"old of {t1}", _ms(2)), f"{p}{t1}-mid": (f"mid of {t1}", _ms(8)),
                     f"{p}{t1}-ref": (f"reflected {t1}", _ms(8))}
    assert await store.segment_texts_of(t1, bob) == []  # a record is read for its own tenant only
    assert await store.next_message_at(ana, [t1], _ms(4.5)) == _ms(5)
    assert await store.next_message_at(ana, [t1], _ms(DAYS)) is None

    removed = await store.expire(_purge(p, t1, ana, 5))
    assert removed == ExpiryCounts(messages=5, observations=1, rewritten=1, threads=1, cycle_results=1), removed
    ids = [f"{p}m{i}" for i in range(DAYS)]
    assert [m.message_id for m in await store.get_messages(ids, resource_id=ana)] == ids[5:]
    assert [m.message_id for m in await store.get_messages(ids, resource_id=bob)] == ids
    assert await store.get_segment_texts([f"{p}{t1}-old", f"{p}{t1}-mid", f"{p}{t1}-mid2", f"{p}{t1}-ref"]) == {
        f"{p}{t1}-mid2": f"cut of {t1}", f"{p}{t1}-ref": f"reflected {t1}"}
    assert {s.segment_id for s in await store.segment_texts_of(t1, ana)} == {f"{p}{t1}-mid2", f"{p}{t1}-ref"}
    metadata = await store.get_thread_metadata(t1)
    assert (metadata.title, metadata.current_task, metadata.extracted, metadata.working_memory) == (
        None, None, {}, None)
    assert await store.get_result(f"{p}{t1}-a#1:digest") is None
    assert await store.get_result(f"{p}{t1}-b#1:digest") == f"answer of {t1}".encode()  # still waited for
    assert (await store.get_thread_metadata(t2)).title == f"title of {t2}"  # the other tenant keeps everything
    assert await store.get_segment_texts([f"{p}{t2}-old"]) == {f"{p}{t2}-old": f"old of {t2}"}
    assert await store.get_result(f"{p}{t2}-a#1:digest") is not None
    # idempotent: the same purge again removes and counts nothing; another tenant's purge of this key, nothing
    assert await store.expire(_purge(p, t1, ana, 5)) == ExpiryCounts()
    assert await store.expire(_purge(p, t2, ana, DAYS)) == ExpiryCounts()
    assert len(await store.get_messages(ids, resource_id=bob)) == DAYS
    # everything of the thread past the window: its last messages go, and so does its record of messages
    gone = await store.expire(ExpireStored(t1, ana, f"{p}exp2", _ms(DAYS), (t1,)))
    assert gone.messages == DAYS - 5 and await store.get_messages(ids, resource_id=ana) == []
    assert await store.next_message_at(ana, [t1], 0) is None


async def check_a_record_keeps_its_own_window(store: ContentStore, p: str) -> None:
    record, other = f"{p}rec", f"{p}other"
    assert await store.retention_of(record) is None
    await store.put_retention(PersistRetention(record, f"{p}ana", 7))
    await store.put_retention(PersistRetention(other, f"{p}ana", 30))
    assert (await store.retention_of(record), await store.retention_of(other)) == (7, 30)
    await store.put_retention(PersistRetention(record, f"{p}ana", 3))
    await store.put_retention(PersistRetention(other, f"{p}ana", None))
    assert (await store.retention_of(record), await store.retention_of(other)) == (3, None)


async def check_what_recall_reads_follows_a_purge(store: RecallStore, p: str) -> None:
    ana, t1 = f"{p}ana", f"{p}t1"
    await _record(store, p, t1, ana)
    before = await store.get_groups(ana, [f"{p}{t1}-mid"])
    await store.expire(_purge(p, t1, ana, 5))
    page = await store.list_thread_messages(ana, t1, limit=3)
    assert [s.message.message_id for s in page.messages] == [f"{p}m5", f"{p}m6", f"{p}m7"]
    assert await store.count_thread_messages(ana, t1) == DAYS - 5
    listed = await store.get_thread(ana, t1)
    assert listed is not None and listed.updated_at == _ms(DAYS - 1) and listed.title is None
    rewritten = (await store.get_groups(ana, [f"{p}{t1}-mid2"]))[f"{p}{t1}-mid2"]
    original = before[f"{p}{t1}-mid"]
    assert (rewritten.text, rewritten.kind, rewritten.status, rewritten.ranges, rewritten.observed_at) == (
        f"cut of {t1}", original.kind, original.status, original.ranges, original.observed_at)
    assert {g.group_id for g in await store.list_groups(t1)} == {f"{p}{t1}-mid2", f"{p}{t1}-ref"}
    # a thread with no message left is no longer listed
    await store.expire(ExpireStored(t1, ana, f"{p}exp2", _ms(DAYS), (t1,)))
    assert await store.get_thread(ana, t1) is None
    assert (await store.list_threads(ana)).threads == ()


RETENTION_CHECKS = (check_a_purge_removes_what_expired_and_only_the_tenants, check_a_record_keeps_its_own_window)
RECALL_RETENTION_CHECKS = (check_what_recall_reads_follows_a_purge,)
