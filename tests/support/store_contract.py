"""The behaviour every browsable content store shares (SQLite, Cassandra), as checks a test runs on a fresh store;
and the model-call results every store keeps (memory, SQLite, Cassandra: ``RESULT_CHECKS``).

Each check takes a store and a ``prefix`` (ids unique to the test, so checks can share a Cassandra keyspace).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from om_stream.core.commands import ActivateChunks, CommitGeneration, PersistSegment, PersistThreadMetadata
from om_stream.core.erasure import ErasureCounts, PartRecord, StrayWrites, record_digest
from om_stream.core.messages import Author, Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.recall.groups import observation_ranges
from om_stream.ports import ContentStore, CycleResults, MessageRange, RecallStore

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
            at: int = 0, first_seq: int = 0, covered: tuple[tuple[str, str, int], ...] = ()) -> PersistSegment:
    """An observation's ranges come from ``covered`` (message id, thread, seq), else from ``ids`` as consecutive
    messages of the first thread from ``first_seq`` on, as the engine computes them."""
    if kind == "observation":
        covered = covered or tuple((m, threads[0], first_seq + i) for i, m in enumerate(ids))
    return PersistSegment(record_key=record, segment_id=f"{p}{sid}", kind=kind, status=status,  # type: ignore[arg-type]
                          generation=generation, text=text or f"observations of {sid}", tokens=7,
                          cycle_id=f"{p}cycle-{sid}", thread_ids=threads, first_message_id=ids[0] if ids else "",
                          last_message_id=ids[-1] if ids else "", message_ids=ids if kind == "observation" else (),
                          message_tokens=20, boundary_at=at, created_at=at, ranges=observation_ranges(covered))


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
    assert meta.working_memory is None
    # a working memory replaces the stored one whole, apart from the extracted values; a write without one keeps it
    await store.put_thread_metadata(PersistThreadMetadata(thread_id=f"{p}ta", resource_id=r1,
                                                          working_memory={"name": "Ada", "city": "Porto"}))
    await store.put_thread_metadata(PersistThreadMetadata(thread_id=f"{p}ta", resource_id=r1,
                                                          working_memory="# Ada\n- lives in Lisbon"))
    await store.put_thread_metadata(PersistThreadMetadata(thread_id=f"{p}ta", resource_id=r1,
                                                          extracted_values={"days": 4}))
    meta = await store.get_thread_metadata(f"{p}ta")
    assert meta.working_memory == "# Ada\n- lives in Lisbon"
    assert meta.extracted == {"city": "Porto", "days": 4} and meta.title == "Trip"
    assert (await store.get_thread_metadata(f"{p}nothing")).title is None
    assert (await store.get_thread(r1, f"{p}ta")).title == "Trip"  # type: ignore[union-attr]
    assert [t.title for t in (await store.list_threads(r1)).threads] == [None, "Trip", None]


async def check_segments(store: RecallStore, p: str) -> None:
    r, t = f"{p}r", f"{p}t"
    ids = [f"{p}m{i}" for i in range(12)]
    for i, mid in enumerate(ids):
        await store.put_message(t, message(mid, t, r, T0 + timedelta(minutes=i)), i, 3)
    a = segment(p, "a", t, threads=(t,), ids=tuple(ids[0:4]), at=1)
    # ids[4] is in no group: the gap a reflection of a and b must keep
    b = segment(p, "b", t, threads=(t,), ids=tuple(ids[5:8]), at=2, first_seq=5)
    c = segment(p, "c", t, status="active", threads=(t,), ids=tuple(ids[8:10]), at=3, first_seq=8)
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
    assert g.ranges == (MessageRange(t, ids[0], ids[3]), MessageRange(t, ids[5], ids[7]))  # never one span over a gap
    assert g.replaced_group_ids == (a.segment_id, b.segment_id)

    # generation 2: a second reflection replaces the first and c: the ranges stay precise, flattened
    d = segment(p, "d", t, status="active", generation=1, threads=(t,), ids=tuple(ids[10:12]), at=5, first_seq=10)
    await store.put_segment(d)
    ref2 = segment(p, "ref2", t, kind="reflection", status="buffered", generation=1, threads=(t,),
                   ids=(ids[0], ids[9]), text="condensed again", at=6)
    await store.put_segment(ref2)
    await store.commit_generation(CommitGeneration(
        record_key=t, generation=2, segment_ids=(ref2.segment_id, d.segment_id), reflection_id=ref2.segment_id,
        replaced_segment_ids=(ref1.segment_id, c.segment_id), observation_tokens=9))
    g2 = (await store.get_groups(r, [ref2.segment_id]))[ref2.segment_id]
    # c starts right after b ends: one range, read back with its sequence numbers; the gap before b stays
    assert g2.ranges == (MessageRange(t, ids[0], ids[3]), MessageRange(t, ids[5], ids[9]))
    assert [(x.first_seq, x.last_seq) for x in g2.ranges] == [(0, 3), (5, 9)]
    assert g2.range_text == f"{ids[0]}:{ids[3]},{ids[5]}:{ids[9]}"
    listed = [x.group_id for x in await store.list_groups(t)]
    assert listed == [a.segment_id, b.segment_id, c.segment_id, ref1.segment_id, d.segment_id, ref2.segment_id]


async def check_resource_scope_ranges(store: RecallStore, p: str) -> None:
    r = f"{p}r"
    t1, t2 = f"{p}t1", f"{p}t2"
    order = [(t1, "a0"), (t2, "b0"), (t1, "a1"), (t2, "b1"), (t1, "a2")]
    for seq, (thread, mid) in enumerate(order):
        await store.put_message(r, message(f"{p}{mid}", thread, r, T0 + timedelta(minutes=seq)), seq, 2)
    s = segment(p, "s", r, threads=(t1, t2), ids=tuple(f"{p}{m}" for _, m in order),
                covered=tuple((f"{p}{m}", thread, seq) for seq, (thread, m) in enumerate(order)))
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
    s2 = segment(p, "s2", t, status="active", threads=(t,), ids=(f"{p}m2",), first_seq=2)
    await store.put_segment(s2)
    await store.commit_generation(CommitGeneration(record_key=t, generation=1, segment_ids=(s2.segment_id,),
                                                   reflection_id=s2.segment_id, replaced_segment_ids=(),
                                                   observation_tokens=7))
    await store.clear(t, 1)
    await store.clear(t, 0)
    assert await store.get_segment_texts([s2.segment_id]) == {s2.segment_id: s2.text}
    gen = await store.get_generation(t, 1)
    assert gen is not None and gen.segment_ids == (s2.segment_id,)


async def check_record_messages(store: ContentStore, p: str) -> None:
    """What a clear hands back to its record: the messages stored under the record key, oldest first by ``seq``,
    up to the record's newest; not another record's, not another tenant's, and still there after the clear."""
    r, other, t1, t2 = f"{p}r", f"{p}other", f"{p}t1", f"{p}t2"
    # resource scope: the record is the resource, its threads share it; written out of order, over 40 days
    for seq, (thread, day) in [(3, (t2, 20)), (1, (t1, 0)), (4, (t1, 30)), (2, (t1, 11)), (5, (t2, 40))]:
        await store.put_message(r, message(f"{p}m{seq}", thread, r, T0 + timedelta(days=day)), seq, 10 + seq)
    await store.put_message(t1, message(f"{p}x1", t1, r, T0), 1, 3)  # the same thread under another record
    await store.put_message(r, message(f"{p}y1", t1, other, T0), 1, 3)  # another tenant's thread of that name
    await store.clear(r, 1)

    got = await store.get_record_messages(r, resource_id=r, thread_ids=(t1, t2), through_seq=4)
    assert [(s.message.message_id, s.seq, s.tokens, s.record_key) for s in got] == [
        (f"{p}m{i}", i, 10 + i, r) for i in range(1, 5)]
    assert got[0].message == message(f"{p}m1", t1, r, T0)
    only_t2 = await store.get_record_messages(r, resource_id=r, thread_ids=(t2,), through_seq=10)
    assert [s.message.message_id for s in only_t2] == [f"{p}m3", f"{p}m5"]
    assert await store.get_record_messages(f"{p}nobody", resource_id=r, thread_ids=(t1,), through_seq=10) == []


def authored_thread(p: str, thread: str, resource: str) -> list[Message]:
    """A shared thread: a person with a name, an agent known by its id, a tool, and a message with no author."""
    authors = [Author(id=f"{p}user-42", name="Ana Lima 🇧🇷", kind="human"), Author(id="billing-agent", kind="agent"),
               Author(id="crm", name="CRM [prod]", kind="tool"), None]
    roles = ["user", "assistant", "tool", "user"]
    return [message(f"{p}a{i}", thread, resource, T0 + timedelta(minutes=i), f"said by {i}", role=roles[i])
            .model_copy(update={"author": author}) for i, author in enumerate(authors)]


async def check_author_round_trip(store: ContentStore, p: str) -> None:
    """A message's author comes back as it was written, through every read of a content store; a message without
    one comes back without one."""
    r, t = f"{p}r", f"{p}t"
    written = authored_thread(p, t, r)
    for seq, m in enumerate(written):
        await store.put_message(t, m, seq, 4)
    await store.put_message(t, written[0], 0, 4)  # a replay: nothing changes
    ids = [m.message_id for m in written]
    got = await store.get_messages(ids, resource_id=r)
    assert got == written and [m.author for m in got] == [m.author for m in written]
    assert got[3].author is None and got[0].author is not None and got[0].author.name == "Ana Lima 🇧🇷"
    record = await store.get_record_messages(t, resource_id=r, thread_ids=(t,), through_seq=10)
    assert [s.message for s in record] == written


async def check_author_reads(store: RecallStore, p: str) -> None:
    """What the recall tool reads of a shared thread carries each message's author."""
    await check_author_round_trip(store, p)
    r, t = f"{p}r", f"{p}t"
    written = authored_thread(p, t, r)
    stored = await store.get_message(r, written[1].message_id)
    assert stored is not None and stored.message.author == Author(id="billing-agent", kind="agent")
    page = await store.list_thread_messages(r, t, limit=10)
    assert [s.message for s in page.messages] == written
    newest = await store.list_thread_messages(r, t, limit=2, newest_first=True)
    assert [s.message.author for s in newest.messages] == [None, written[2].author]


CHECKS = (check_messages, check_threads, check_segments, check_resource_scope_ranges, check_clear,
          check_record_messages, check_author_reads)


# -- model-call results and leases (ports.CycleResults) -----------------------------------------------------------

LEASE_S = 1.0  # short leases, waited out on the real clock
SHORT_RESULT_TTL_S = 2  # what a store given to check_results_expire keeps its results for
# Cassandra counts TTLs in whole seconds from the second a write lands in, so a result there lives between
# SHORT_RESULT_TTL_S - 1 and SHORT_RESULT_TTL_S seconds; a lease lives up to 2 s past lease_s (ports.CycleResults.claim)
RESULT_TTL_GRANULARITY_S = 1.0
EXPIRY_SLACK_S = 4.0


async def _granted_within(store: CycleResults, key: str, owner: str, lease_s: float, within_s: float) -> float:
    """Claim until granted; the seconds it took. Fails when the lease still holds after ``within_s``."""
    started = time.monotonic()
    while (holder := await store.claim(key, owner, lease_s)) is not None:
        assert time.monotonic() - started < within_s, f"{holder} still holds {key} after {within_s} s"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def check_result_round_trip(store: CycleResults, p: str) -> None:
    key = f"{p}req-1:sha256:9f86d081"
    assert await store.get_result(key) is None
    payload = bytes(range(256)) + "observations: café ☕".encode()  # bytes, not text: every byte comes back
    await store.put_result(key, payload, record_key="rec")
    assert await store.get_result(key) == payload
    await store.put_result(key, payload, record_key="rec")  # a replayed put changes nothing
    assert await store.get_result(key) == payload
    assert await store.get_result(f"{p}req-1:sha256:9f86d082") is None  # keys are exact: another digest, another ask
    await store.put_result(key, b'{"text": "a second answer"}', record_key="rec")  # a later put replaces the first
    assert await store.get_result(key) == b'{"text": "a second answer"}'
    big = b"x" * 300_000  # a long observation log
    await store.put_result(f"{p}big", big, record_key="rec")
    assert await store.get_result(f"{p}big") == big


async def check_a_stored_result_leaves_the_lease_alone(store: CycleResults, p: str) -> None:
    key = f"{p}req"
    assert await store.claim(key, "worker-a", 60) is None
    assert await store.claim(key, "worker-b", 60) == "worker-a"
    await store.put_result(key, b"answer", record_key="rec")
    assert await store.get_result(key) == b"answer"  # what a repeat reads before it would claim
    assert await store.claim(key, "worker-b", 60) == "worker-a"  # the lease lives on to its expiry
    assert await store.claim(key, "worker-a", 60) is None  # and its holder may still renew it
    assert await store.get_result(key) == b"answer"  # a claim never touches the result
    await store.put_result(f"{p}never-claimed", b"x", record_key="rec")  # a result needs no lease
    assert await store.claim(f"{p}never-claimed", "worker-a", 60) is None


async def check_a_lease_is_refused_to_others_until_it_expires(store: CycleResults, p: str) -> None:
    key = f"{p}req"
    started = time.monotonic()
    assert await store.claim(key, "worker-a", LEASE_S) is None
    assert await store.claim(key, "worker-b", LEASE_S) == "worker-a"
    assert await store.claim(f"{p}other", "worker-b", LEASE_S) is None  # leases are per key
    await asyncio.sleep(LEASE_S * 0.6)
    assert await store.claim(key, "worker-b", LEASE_S) == "worker-a"  # still within lease_s
    await _granted_within(store, key, "worker-b", LEASE_S, EXPIRY_SLACK_S)
    assert time.monotonic() - started >= LEASE_S * 0.95  # never granted before lease_s was over
    assert await store.claim(key, "worker-a", LEASE_S) == "worker-b"  # the old holder is refused now


async def check_the_holder_renews_its_lease(store: CycleResults, p: str) -> None:
    key = f"{p}req"
    assert await store.claim(key, "worker-a", LEASE_S) is None
    started = time.monotonic()
    while time.monotonic() - started < LEASE_S + 2.5:  # past any lease_s the store could have granted once
        await asyncio.sleep(LEASE_S * 0.5)
        assert await store.claim(key, "worker-a", LEASE_S) is None  # a renewal
        assert await store.claim(key, "worker-b", LEASE_S) == "worker-a"
    await _granted_within(store, key, "worker-b", LEASE_S, EXPIRY_SLACK_S)  # without renewals it ends


async def check_racing_claims_grant_one_owner(store: CycleResults, p: str) -> None:
    key = f"{p}req"
    owners = [f"worker-{i}" for i in range(8)]
    answers = await asyncio.gather(*(store.claim(key, owner, 60) for owner in owners))
    granted = [owner for owner, answer in zip(owners, answers, strict=True) if answer is None]
    assert len(granted) == 1, answers
    assert {answer for answer in answers if answer is not None} == set(granted)  # the losers are told who won
    assert await store.claim(key, granted[0], 60) is None  # the winner holds it


async def check_claims_race_across(stores: Sequence[CycleResults], p: str, *, rounds: int = 3) -> None:
    """Several stores on one database stand for several workers: of claims racing for a key, one is granted, the
    others are told who holds it; the result the holder stores answers every one of them."""
    for round_ in range(rounds):
        key = f"{p}req-{round_}"
        claims = [stores[i % len(stores)].claim(key, f"worker-{i}", 30) for i in range(3 * len(stores))]
        answers = await asyncio.gather(*claims)
        granted = [i for i, answer in enumerate(answers) if answer is None]
        assert len(granted) == 1, answers
        assert {a for a in answers if a is not None} == {f"worker-{granted[0]}"}
        await stores[-1].put_result(key, b"answer", record_key="rec")
        assert await asyncio.gather(*(store.get_result(key) for store in stores)) == [b"answer"] * len(stores)
        assert await stores[0].claim(key, "worker-late", 30) == f"worker-{granted[0]}"  # the lease lives on


async def check_a_lease_and_a_result_expire_apart(store: CycleResults, p: str) -> None:
    key = f"{p}req"
    await store.put_result(key, b"kept", record_key="rec")
    assert await store.claim(key, "worker-a", LEASE_S) is None  # a claim looks at leases only
    await _granted_within(store, key, "worker-b", LEASE_S, EXPIRY_SLACK_S)
    assert await store.get_result(key) == b"kept"  # the lease's expiry leaves the result alone


async def _put_and_read_back(store: CycleResults, key: str, payload: bytes) -> None:
    """Store ``payload`` and read it back, which must work unless the store's shortest lifetime has already passed
    (a stalled machine may take that long between the two calls)."""
    written = time.monotonic()
    await store.put_result(key, payload, record_key="rec")
    found = await store.get_result(key)
    if found is None:
        assert time.monotonic() - written >= SHORT_RESULT_TTL_S - RESULT_TTL_GRANULARITY_S, "the result expired early"
    else:
        assert found == payload


async def check_results_expire(store: CycleResults, p: str) -> None:
    """``store`` keeps results ``SHORT_RESULT_TTL_S``; a lease lives on whatever the result TTL."""
    key, leased = f"{p}req", f"{p}leased"
    await _put_and_read_back(store, key, b"answer")
    assert await store.claim(leased, "worker-a", 60) is None
    started = time.monotonic()
    while await store.get_result(key) is not None:
        assert time.monotonic() - started < SHORT_RESULT_TTL_S + EXPIRY_SLACK_S, "the result outlived its TTL"
        await asyncio.sleep(0.1)
    assert await store.claim(leased, "worker-b", 60) == "worker-a"  # the result TTL does not end a lease
    await _put_and_read_back(store, key, b"asked again")  # an expired key takes a new result


async def check_requests_no_store_can_hold_are_refused(store: CycleResults, p: str) -> None:
    for call in (store.get_result(""), store.put_result("", b"x", record_key="rec"), store.claim("", "worker-a", 5),
                 store.claim(f"{p}req", "worker-a", 0), store.claim(f"{p}req", "worker-a", -1)):
        try:
            await call
        except ValueError:
            continue
        raise AssertionError("an empty key or a lease of no time was accepted")


RESULT_CHECKS = (check_requests_no_store_can_hold_are_refused, check_result_round_trip,
                 check_a_stored_result_leaves_the_lease_alone, check_a_lease_is_refused_to_others_until_it_expires,
                 check_the_holder_renews_its_lease, check_racing_claims_grant_one_owner,
                 check_a_lease_and_a_result_expire_apart)


# -- erasure (``ports.ErasableStore``): every store -----------------------------------------------------------------


async def _conversation(store: ContentStore, p: str, thread: str, resource: str, count: int) -> None:
    """``count`` messages (ids shared across tenants on purpose), one observation and one reflection generation, the
    thread's metadata, and two cached model results of its record."""
    for i in range(count):
        await store.put_message(thread, message(f"{p}m{i}", thread, resource, T0 + timedelta(days=4 * i),
                                                f"words of {thread} {i}"), i, 5)
    ids = tuple(f"{p}m{i}" for i in range(count))
    await store.put_segment(segment(p, f"{thread}-obs", thread, status="active", generation=0, threads=(thread,),
                                    ids=ids, text=f"observed in {thread}"))
    await store.put_segment(segment(p, f"{thread}-ref", thread, kind="reflection", status="buffered", generation=1,
                                    threads=(thread,), ids=ids, text=f"reflected in {thread}"))
    await store.commit_generation(CommitGeneration(thread, 1, (f"{p}{thread}-ref",), f"{p}{thread}-ref",
                                                   (f"{p}{thread}-obs",), 7))
    await store.put_thread_metadata(PersistThreadMetadata(thread, resource, title=f"title of {thread}",
                                                          current_task="task", extracted_values={"k": "v"},
                                                          working_memory="notes"))
    for n in range(2):
        await store.put_result(f"{p}{thread}-req{n}", f"answer about {thread}".encode(), record_key=thread)


async def check_erase_thread_and_record(store: ContentStore, p: str) -> None:
    ana, bob, t1, t2 = f"{p}ana", f"{p}bob", f"{p}t1", f"{p}t2"
    await _conversation(store, p, t1, ana, 5)
    await _conversation(store, p, t2, bob, 5)  # another tenant, the same message ids
    assert await store.holds(ana, t1) and await store.resource_of(t1) == ana

    removed = await store.erase_thread(ana, t1) + await store.erase_record(t1, ana)
    assert (removed.messages, removed.threads, removed.cycle_results) == (5, 1, 2), removed
    assert removed.observations == 2 and removed.generations >= 1, removed
    assert not await store.holds(ana, t1) and not await store.holds(ana)
    assert await store.get_messages([f"{p}m0"], resource_id=ana) == []
    assert await store.get_segment_texts([f"{p}{t1}-obs", f"{p}{t1}-ref"]) == {}
    assert (await store.get_thread_metadata(t1)).title is None
    assert await store.get_result(f"{p}{t1}-req0") is None
    # the other tenant keeps everything, message ids and all
    assert await store.holds(bob, t2)
    assert [m.message_id for m in await store.get_messages([f"{p}m0", f"{p}m4"], resource_id=bob)] == \
        [f"{p}m0", f"{p}m4"]
    assert await store.get_segment_texts([f"{p}{t2}-obs"]) == {f"{p}{t2}-obs": f"observed in {t2}"}
    assert (await store.get_thread_metadata(t2)).title == f"title of {t2}"
    assert await store.get_result(f"{p}{t2}-req1") == f"answer about {t2}".encode()
    # idempotent: a second erase removes and counts nothing
    again = await store.erase_thread(ana, t1) + await store.erase_record(t1, ana)
    assert again.total == 0, again
    # a record of another tenant under the erased key is not touched
    assert (await store.erase_record(t2, ana)).total == 0 and await store.holds(bob, t2)
    # a thread made again after its erase is a fresh one
    await store.put_message(t1, message(f"{p}fresh", t1, ana, T0, "fresh start"), 0, 5)
    assert [m.message_id for m in await store.get_messages([f"{p}fresh", f"{p}m1"], resource_id=ana)] == \
        [f"{p}fresh"]


async def check_erase_resource(store: ContentStore, p: str) -> None:
    ana, bob = f"{p}ana", f"{p}bob"
    for n in range(3):
        await _conversation(store, f"{p}{n}", f"{p}ana-t{n}", ana, 4)
    await _conversation(store, f"{p}b", f"{p}bob-t", bob, 4)
    removed = await store.erase_resource(ana)
    assert (removed.messages, removed.threads, removed.cycle_results) == (12, 3, 6), removed
    assert removed.observations == 6, removed
    assert not await store.holds(ana)
    for n in range(3):
        assert not await store.holds(ana, f"{p}ana-t{n}")
    assert await store.holds(bob) and await store.get_result(f"{p}b{p}bob-t-req0") is not None
    assert (await store.erase_resource(ana)).total == 0
    assert (await store.erase_resource(f"{p}nobody")).total == 0


async def check_erasure_ledger(store: ContentStore, p: str) -> None:
    assert await store.erasure_part(f"{p}e", 0) is None
    begun = PartRecord(f"{p}e", 0, ((0, 17), (3, 4)))
    await store.put_erasure_part(begun, 3600)
    assert await store.erasure_part(f"{p}e", 0) == begun
    done = PartRecord(f"{p}e", 0, ((0, 17), (3, 4)), ErasureCounts(messages=3, contexts=1), True)
    await store.put_erasure_part(done, 3600)
    assert await store.erasure_part(f"{p}e", 0) == done and await store.erasure_part(f"{p}e", 1) is None
    completed = PartRecord(f"{p}e", -1, (), ErasureCounts(messages=3), True, completed_at=1_700_000_000_123)
    await store.put_erasure_part(completed, 3600)
    assert await store.erasure_part(f"{p}e", -1) == completed
    digest = record_digest(f"{p}rec")
    assert await store.erased_through(digest) is None
    await store.mark_erased(digest, 4, 3600)
    await store.mark_erased(digest, 2, 3600)  # a lower epoch noted later (a replay) keeps the highest
    assert await store.erased_through(digest) == 4
    await store.mark_erased(digest, 5, 3600)
    assert await store.erased_through(digest) == 5
    # a note expires with its window
    await store.mark_erased(record_digest(f"{p}short"), 1, 1)
    await asyncio.sleep(2.2)
    assert await store.erased_through(record_digest(f"{p}short")) is None


async def check_erase_writes(store: ContentStore, p: str) -> None:
    """What one refused batch wrote of an erased record is removed again by id, within its tenant alone."""
    ana, bob, t1, t2 = f"{p}ana", f"{p}bob", f"{p}t1", f"{p}t2"
    await _conversation(store, p, t1, ana, 5)
    await _conversation(store, p, t2, bob, 5)  # another tenant, the same message ids
    late = StrayWrites(t1, f"thread:{t1}", ana, 0, message_ids=(f"{p}m3", f"{p}m4"),
                       segment_ids=(f"{p}{t1}-ref",), generations=(1,), thread_ids=(t1,))
    removed = await store.erase_writes(late)
    assert (removed.messages, removed.observations, removed.generations, removed.threads) == (2, 1, 1, 1), removed
    assert [m.message_id for m in await store.get_messages([f"{p}m{i}" for i in range(5)], resource_id=ana)] == \
        [f"{p}m0", f"{p}m1", f"{p}m2"]
    assert await store.get_segment_texts([f"{p}{t1}-obs", f"{p}{t1}-ref"]) == {f"{p}{t1}-obs": f"observed in {t1}"}
    assert (await store.get_thread_metadata(t1)).title is None
    # the other tenant keeps everything, message ids and all
    assert [m.message_id for m in await store.get_messages([f"{p}m3", f"{p}m4"], resource_id=bob)] == \
        [f"{p}m3", f"{p}m4"]
    assert (await store.get_thread_metadata(t2)).title == f"title of {t2}"
    # another tenant's record under the same key is not touched, nor its segments
    assert (await store.erase_writes(StrayWrites(t2, f"thread:{t2}", ana, 0, segment_ids=(f"{p}{t2}-ref",),
                                                 generations=(1,), thread_ids=(t2,)))).total == 0
    assert await store.get_segment_texts([f"{p}{t2}-ref"]) == {f"{p}{t2}-ref": f"reflected in {t2}"}
    assert (await store.get_thread_metadata(t2)).title == f"title of {t2}" and await store.holds(bob, t2)
    # idempotent: a second call removes and counts nothing
    assert (await store.erase_writes(late)).total == 0
    # a thread left with no message is not held (nor listed) any more
    rest = StrayWrites(t1, f"thread:{t1}", ana, 0, message_ids=tuple(f"{p}m{i}" for i in range(3)))
    assert (await store.erase_writes(rest)).messages == 3
    assert not await store.holds(ana, t1)
    assert await store.holds(bob, t2)


ERASURE_CHECKS = (check_erase_thread_and_record, check_erase_resource, check_erasure_ledger, check_erase_writes)
