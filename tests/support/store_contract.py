"""The behaviour every browsable content store shares (SQLite, Cassandra), as checks a test runs on a fresh store.

Each check takes a store and a ``prefix`` (ids unique to the test, so checks can share a Cassandra keyspace).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from om_stream.core.commands import ActivateChunks, CommitGeneration, PersistSegment, PersistThreadMetadata
from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.ports import MessageRange, RecallStore

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
DAY_MS = 86_400_000


def message(mid: str, thread: str, resource: str, at: datetime, text: str = "", role: str = "user",
            tool: str | None = None) -> Message:
    if tool:
        parts: tuple = (ToolCallPart(tool_call_id=f"{mid}-call", tool_name=tool, args={"q": text}),
                        ToolResultPart(tool_call_id=f"{mid}-call", tool_name=tool, result={"rows": [text]}))
    else:
        parts = (TextPart(text=text or f"text of {mid}"),)
    return Message(message_id=mid, thread_id=thread, resource_id=resource, role=role,  # type: ignore[arg-type]
                   created_at=at, parts=parts)


def segment(p: str, sid: str, record: str, *, kind: str = "observation", status: str = "buffered",
            generation: int = 0, threads: tuple[str, ...], ids: tuple[str, ...], text: str = "",
            at: int = 0) -> PersistSegment:
    return PersistSegment(record_key=record, segment_id=f"{p}{sid}", kind=kind, status=status,  # type: ignore[arg-type]
                          generation=generation, text=text or f"observations of {sid}", tokens=7,
                          cycle_id=f"{p}cycle-{sid}", thread_ids=threads, first_message_id=ids[0] if ids else "",
                          last_message_id=ids[-1] if ids else "", message_ids=ids if kind == "observation" else (),
                          message_tokens=20, boundary_at=at, created_at=at)


async def check_messages(store: RecallStore, p: str) -> None:
    r1, r2, t1, t2 = f"{p}r1", f"{p}r2", f"{p}t1", f"{p}t2"
    # 30 messages over 60 days: several 10-day buckets; inserted out of order
    times = {i: T0 + timedelta(days=2 * i, seconds=i) for i in range(30)}
    for i in [*range(29, 14, -1), *range(15)]:
        await store.put_message(t1, message(f"{p}m{i}", t1, r1, times[i]), i, 5)
    await store.put_message(t1, message(f"{p}m3", t1, r1, times[3]), 3, 5)  # a replay: nothing changes
    await store.put_message(t2, message(f"{p}x0", t2, r2, T0, "other tenant"), 0, 5)

    got = await store.get_messages([f"{p}m7", f"{p}missing", f"{p}m2", f"{p}x0"])
    assert [m.message_id for m in got] == [f"{p}m7", f"{p}m2", f"{p}x0"]
    assert await store.count_thread_messages(r1, t1) == 30
    assert await store.count_thread_messages(r2, t1) == 0

    one = await store.get_message(r1, f"{p}m4")
    assert one is not None and one.seq == 4 and one.tokens == 5 and one.record_key == t1
    assert one.message == message(f"{p}m4", t1, r1, times[4])
    assert await store.get_message(r2, f"{p}m4") is None  # another tenant's id reads as absent
    assert await store.get_message(r1, f"{p}x0") is None

    page = await store.list_thread_messages(r1, t1, limit=7)
    assert [s.message.message_id for s in page.messages] == [f"{p}m{i}" for i in range(7)] and page.has_more
    page = await store.list_thread_messages(r1, t1, limit=7, newest_first=True)
    assert [s.message.message_id for s in page.messages] == [f"{p}m{i}" for i in range(29, 22, -1)]
    middle = (await store.get_message(r1, f"{p}m10")).position  # type: ignore[union-attr]
    later = (await store.get_message(r1, f"{p}m20")).position  # type: ignore[union-attr]
    page = await store.list_thread_messages(r1, t1, limit=50, after=middle, before=later)
    assert [s.message.message_id for s in page.messages] == [f"{p}m{i}" for i in range(11, 20)]
    assert not page.has_more
    page = await store.list_thread_messages(r1, t1, limit=3, before=middle, newest_first=True)
    assert [s.message.message_id for s in page.messages] == [f"{p}m9", f"{p}m8", f"{p}m7"] and page.has_more
    page = await store.list_thread_messages(r1, t1, limit=30, after=middle)
    assert len(page.messages) == 19 and not page.has_more
    assert (await store.list_thread_messages(r2, t1, limit=10)).messages == ()

    # same millisecond: arrival order (seq), then id, decides
    same = T0 + timedelta(days=100)
    for seq, mid in ((2, "b"), (1, "z"), (3, "a")):
        await store.put_message(t1, message(f"{p}{mid}", t1, r1, same), 100 + seq, 1)
    page = await store.list_thread_messages(r1, t1, limit=3, newest_first=True)
    assert [s.message.message_id for s in page.messages] == [f"{p}a", f"{p}b", f"{p}z"]


async def check_threads(store: RecallStore, p: str) -> None:
    r1, r2 = f"{p}r1", f"{p}r2"
    for n, (thread, days) in enumerate(((f"{p}ta", (5, 1, 3)), (f"{p}tb", (2, 9)), (f"{p}tc", (4,)))):
        for k, day in enumerate(days):
            await store.put_message(thread, message(f"{p}{n}-{k}", thread, r1, T0 + timedelta(days=day)), k, 1)
    await store.put_message(f"{p}tz", message(f"{p}z", f"{p}tz", r2, T0 + timedelta(days=50)), 0, 1)

    ta = await store.get_thread(r1, f"{p}ta")
    assert ta is not None
    assert (ta.created_at, ta.updated_at) == (int((T0 + timedelta(days=1)).timestamp() * 1000),
                                              int((T0 + timedelta(days=5)).timestamp() * 1000))
    assert await store.get_thread(r2, f"{p}ta") is None
    listing = await store.list_threads(r1)
    assert [t.thread_id for t in listing.threads] == [f"{p}tb", f"{p}ta", f"{p}tc"] and not listing.has_more
    paged = await store.list_threads(r1, offset=1, limit=1)
    assert [t.thread_id for t in paged.threads] == [f"{p}ta"] and paged.has_more
    day3 = int((T0 + timedelta(days=3)).timestamp() * 1000)
    assert [t.thread_id for t in (await store.list_threads(r1, created_after=day3 - 1)).threads] == [f"{p}tc"]
    assert {t.thread_id for t in (await store.list_threads(r1, created_before=day3)).threads} == {f"{p}ta", f"{p}tb"}

    await store.put_thread_metadata(PersistThreadMetadata(thread_id=f"{p}ta", resource_id=r1, title="Trip",
                                                          current_task="plan", extracted_values={"city": "Porto"}))
    await store.put_thread_metadata(PersistThreadMetadata(thread_id=f"{p}ta", resource_id=r1,
                                                          suggested_response="ask dates",
                                                          extracted_values={"days": 3}))
    meta = await store.get_thread_metadata(f"{p}ta")
    assert (meta.title, meta.current_task, meta.suggested_response) == ("Trip", "plan", "ask dates")
    assert meta.extracted == {"city": "Porto", "days": 3} and meta.resource_id == r1
    assert (await store.get_thread_metadata(f"{p}nothing")).title is None
    assert (await store.get_thread(r1, f"{p}ta")).title == "Trip"  # type: ignore[union-attr]
    assert [t.title for t in (await store.list_threads(r1)).threads] == [None, "Trip", None]


async def check_segments(store: RecallStore, p: str) -> None:
    r, t = f"{p}r", f"{p}t"
    ids = [f"{p}m{i}" for i in range(12)]
    for i, mid in enumerate(ids):
        await store.put_message(t, message(mid, t, r, T0 + timedelta(minutes=i)), i, 3)
    a = segment(p, "a", t, threads=(t,), ids=tuple(ids[0:4]), at=1)
    b = segment(p, "b", t, threads=(t,), ids=tuple(ids[4:8]), at=2)
    c = segment(p, "c", t, status="active", threads=(t,), ids=tuple(ids[8:10]), at=3)
    for s in (a, b, c, a):  # a replayed put changes nothing
        await store.put_segment(s)
    groups = await store.get_groups(r, [a.segment_id, b.segment_id, c.segment_id, f"{p}none"])
    assert groups[a.segment_id].status == "buffered" and groups[c.segment_id].status == "active"
    assert groups[a.segment_id].ranges == (MessageRange(t, ids[0], ids[3]),)
    assert groups[a.segment_id].resource_id == r and groups[a.segment_id].text == a.text
    assert await store.get_groups(f"{p}other", [a.segment_id]) == {}
    assert await store.get_segment_texts([a.segment_id, f"{p}none"]) == {a.segment_id: a.text}

    await store.activate_chunks(ActivateChunks(record_key=t, generation=0, chunk_ids=(a.segment_id, b.segment_id),
                                               position=1))
    await store.put_segment(a)  # replayed after activation: still active
    assert all(g.status == "active" for g in (await store.get_groups(r, [a.segment_id, b.segment_id])).values())

    # generation 1: a reflection replaces a and b; c is kept
    ref1 = segment(p, "ref1", t, kind="reflection", status="active", generation=0, threads=(t,),
                   ids=(ids[0], ids[7]), text="condensed a+b", at=4)
    await store.put_segment(ref1)
    commit1 = CommitGeneration(record_key=t, generation=1, segment_ids=(ref1.segment_id, c.segment_id),
                               reflection_id=ref1.segment_id, replaced_segment_ids=(a.segment_id, b.segment_id),
                               observation_tokens=14)
    await store.commit_generation(commit1)
    await store.commit_generation(commit1)  # replay
    rival = CommitGeneration(record_key=t, generation=1, segment_ids=(f"{p}rival",), reflection_id=f"{p}rival",
                             replaced_segment_ids=(c.segment_id,), observation_tokens=1)
    await store.commit_generation(rival)  # the first writer of a generation wins
    gen1 = await store.get_generation(t, 1)
    assert gen1 is not None and gen1.segment_ids == (ref1.segment_id, c.segment_id)
    assert gen1.replaced_segment_ids == (a.segment_id, b.segment_id) and gen1.observation_tokens == 14
    assert await store.get_generation(t, 2) is None
    g = (await store.get_groups(r, [ref1.segment_id]))[ref1.segment_id]
    assert g.kind == "reflection" and g.status == "active"
    assert g.ranges == (MessageRange(t, ids[0], ids[3]), MessageRange(t, ids[4], ids[7]))  # never one span
    assert g.replaced_group_ids == (a.segment_id, b.segment_id)

    # generation 2: a second reflection replaces the first and c: the ranges stay precise, flattened
    d = segment(p, "d", t, status="active", generation=1, threads=(t,), ids=tuple(ids[10:12]), at=5)
    await store.put_segment(d)
    ref2 = segment(p, "ref2", t, kind="reflection", status="buffered", generation=1, threads=(t,),
                   ids=(ids[0], ids[9]), text="condensed again", at=6)
    await store.put_segment(ref2)
    await store.commit_generation(CommitGeneration(
        record_key=t, generation=2, segment_ids=(ref2.segment_id, d.segment_id), reflection_id=ref2.segment_id,
        replaced_segment_ids=(ref1.segment_id, c.segment_id), observation_tokens=9))
    g2 = (await store.get_groups(r, [ref2.segment_id]))[ref2.segment_id]
    assert g2.ranges == (MessageRange(t, ids[0], ids[3]), MessageRange(t, ids[4], ids[7]),
                         MessageRange(t, ids[8], ids[9]))
    assert g2.range_text == f"{ids[0]}:{ids[3]},{ids[4]}:{ids[7]},{ids[8]}:{ids[9]}"
    listed = [x.group_id for x in await store.list_groups(t)]
    assert listed == [a.segment_id, b.segment_id, c.segment_id, ref1.segment_id, d.segment_id, ref2.segment_id]


async def check_resource_scope_ranges(store: RecallStore, p: str) -> None:
    r = f"{p}r"
    t1, t2 = f"{p}t1", f"{p}t2"
    order = [(t1, "a0"), (t2, "b0"), (t1, "a1"), (t2, "b1"), (t1, "a2")]
    for seq, (thread, mid) in enumerate(order):
        await store.put_message(r, message(f"{p}{mid}", thread, r, T0 + timedelta(minutes=seq)), seq, 2)
    s = segment(p, "s", r, threads=(t1, t2), ids=tuple(f"{p}{m}" for _, m in order))
    await store.put_segment(s)
    group = (await store.get_groups(r, [s.segment_id]))[s.segment_id]
    assert group.ranges == (MessageRange(t1, f"{p}a0", f"{p}a2"), MessageRange(t2, f"{p}b0", f"{p}b1"))
    assert group.thread_ids == (t1, t2)


async def check_clear(store: RecallStore, p: str) -> None:
    r, t = f"{p}r", f"{p}t"
    for i in range(3):
        await store.put_message(t, message(f"{p}m{i}", t, r, T0 + timedelta(minutes=i)), i, 3)
    s = segment(p, "s", t, status="active", threads=(t,), ids=(f"{p}m0", f"{p}m1"))
    await store.put_segment(s)
    ref = segment(p, "ref", t, kind="reflection", status="active", threads=(t,), ids=(f"{p}m0", f"{p}m1"))
    await store.put_segment(ref)
    await store.commit_generation(CommitGeneration(record_key=t, generation=1, segment_ids=(ref.segment_id,),
                                                   reflection_id=ref.segment_id, replaced_segment_ids=(s.segment_id,),
                                                   observation_tokens=7))
    await store.clear(t, 1)
    assert await store.get_segment_texts([s.segment_id, ref.segment_id]) == {}
    assert await store.get_groups(r, [s.segment_id]) == {} and await store.list_groups(t) == []
    assert await store.get_generation(t, 1) is None
    assert len(await store.get_messages([f"{p}m0", f"{p}m1", f"{p}m2"])) == 3  # messages stay
    # after the clear, generation 1 can be committed again (new epoch); a replayed clear forgets nothing new
    s2 = segment(p, "s2", t, status="active", threads=(t,), ids=(f"{p}m2",))
    await store.put_segment(s2)
    await store.commit_generation(CommitGeneration(record_key=t, generation=1, segment_ids=(s2.segment_id,),
                                                   reflection_id=s2.segment_id, replaced_segment_ids=(),
                                                   observation_tokens=7))
    await store.clear(t, 1)
    await store.clear(t, 0)
    assert await store.get_segment_texts([s2.segment_id]) == {s2.segment_id: s2.text}
    gen = await store.get_generation(t, 1)
    assert gen is not None and gen.segment_ids == (s2.segment_id,)


CHECKS = (check_messages, check_threads, check_segments, check_resource_scope_ranges, check_clear)
