"""The recall tool, mode by mode and parameter by parameter, as checks on a seeded store (SQLite or Cassandra) with
an optional Qdrant local index. ``seed`` writes the same world into any store; each ``check_*`` asserts what an
agent would see."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from om_stream.core.commands import IndexForRecall, PersistSegment, PersistThreadMetadata
from om_stream.core.config import RetrievalConfig
from om_stream.core.messages import (
    Author,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from om_stream.core.recall import MessagesResult, RecallScope, SearchResult, ThreadsResult
from om_stream.core.recall.groups import observation_ranges
from om_stream.errors import RecallError
from om_stream.observability.metrics import Metrics
from om_stream.ports import RecallStore
from om_stream.runtime.recall import RecallEndpoint
from om_stream.runtime.recall_service import RecallService
from om_stream.wire.recall import RecallRequest

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
LONG = " ".join(f"word{i}" for i in range(3000))  # ~6,000 tokens: beyond any single answer


@dataclass
class World:
    service: RecallService
    p: str  # id prefix (ids contain ':' on purpose: ranges must still be understood)

    @property
    def alice(self) -> str:
        return f"{self.p}alice"

    @property
    def bob(self) -> str:
        return f"{self.p}bob"

    def trip(self, i: int) -> str:
        return f"{self.p}trip:{i}"

    @property
    def trip_thread(self) -> str:
        return f"{self.p}thread:trip"

    @property
    def work_thread(self) -> str:
        return f"{self.p}thread:work"

    @property
    def bob_thread(self) -> str:
        return f"{self.p}thread:secret"

    def scope(self, *, scope: str = "resource", vector: bool = False, thread: str | None = "trip") -> RecallScope:
        current = {"trip": self.trip_thread, "work": self.work_thread, None: None}[thread]
        return RecallScope(self.alice, current, RetrievalConfig(scope=scope, vector=vector))  # type: ignore[arg-type]

    async def call(self, **arguments: object) -> MessagesResult:
        result = await self.service.recall(self.scope(), arguments)
        assert isinstance(result, MessagesResult)
        return result


def _trip_message(p: str, i: int) -> Message:
    thread, resource = f"{p}thread:trip", f"{p}alice"
    at = T0 + timedelta(minutes=i)
    role = "user" if i % 2 == 0 else "assistant"
    parts: tuple = (TextPart(text=f"Trip message {i}: planning day {i} in Porto."),)
    if i == 5:
        parts = (TextPart(text="Let me look up flights."),
                 ToolCallPart(tool_call_id="c5", tool_name="search_flights", args={"to": "OPO", "date": "2026-04-02"}),
                 ReasoningPart(text="The user wants a morning flight."))
    if i == 6:
        role = "tool"
        parts = (ToolResultPart(tool_call_id="c5", tool_name="search_flights",
                                result={"flights": [{"number": "TP1947", "departs": "07:05"}]}),)
    if i == 8:
        parts = (TextPart(text="Here is my passport scan."), ImagePart(url="https://x/p.png", filename="passport.png",
                                                                        width=800, height=600),
                 FilePart(filename="itinerary.pdf", mime_type="application/pdf"))
    if i == 11:
        role = "assistant"
        parts = (TextPart(text=LONG),)
    if i == 12:
        parts = (ToolCallPart(tool_call_id="c12", tool_name="book_hotel", args={"city": "Porto"}),)
    if i == 13:
        role = "tool"
        parts = (ToolResultPart(tool_call_id="c12", tool_name="book_hotel", result="Booked: Hotel Infante, 3 nights"),)
    if i == 20:
        parts = (TextPart(text="My favourite pastry is the pastel de nata from Manteigaria."),)
    return Message(message_id=f"{p}trip:{i}", thread_id=thread, resource_id=resource, role=role, created_at=at,
                   parts=parts)


async def seed(store: RecallStore, p: str, service: RecallService) -> World:
    """Alice: thread "trip" (30 messages, the current one) and "work" (4); Bob: thread "secret" (3)."""
    for i in range(30):
        await store.put_message(f"{p}thread:trip", _trip_message(p, i), i, 10)
    for i in range(4):
        note = TextPart(text=f"Quarterly budget note {i}: the kafka cluster costs 4k")
        m = Message(message_id=f"{p}work:{i}", thread_id=f"{p}thread:work", resource_id=f"{p}alice", role="user",
                    created_at=T0 - timedelta(days=10, minutes=-i), parts=(note,))
        await store.put_message(f"{p}thread:work", m, i, 10)
    for i in range(3):
        m = Message(message_id=f"{p}secret:{i}", thread_id=f"{p}thread:secret", resource_id=f"{p}bob", role="user",
                    created_at=T0 + timedelta(days=1, minutes=i),
                    parts=(TextPart(text=f"Bob's secret {i}: my favourite pastry is a croissant, bank PIN 0000"),))
        await store.put_message(f"{p}thread:secret", m, i, 10)
    await store.put_thread_metadata(PersistThreadMetadata(thread_id=f"{p}thread:trip", resource_id=f"{p}alice",
                                                          title="Porto trip"))
    await store.put_thread_metadata(PersistThreadMetadata(thread_id=f"{p}thread:secret", resource_id=f"{p}bob",
                                                          title="Bob's secret plans"))
    groups = [
        (f"{p}g-trip-1", f"{p}thread:trip", f"{p}alice", [f"{p}trip:{i}" for i in range(10)],
         "* User plans a Porto trip; flight TP1947 departs 07:05"),
        (f"{p}g-trip-2", f"{p}thread:trip", f"{p}alice", [f"{p}trip:{i}" for i in range(10, 22)],
         "* User's favourite pastry: pastel de nata (Manteigaria)\n* Hotel Infante booked for 3 nights"),
        (f"{p}g-work", f"{p}thread:work", f"{p}alice", [f"{p}work:{i}" for i in range(4)],
         "* Kafka cluster costs 4k per quarter"),
        (f"{p}g-bob", f"{p}thread:secret", f"{p}bob", [f"{p}secret:{i}" for i in range(3)],
         "* Bob's favourite pastry is a croissant; bank PIN 0000"),
    ]
    for n, (gid, thread, resource, ids, text) in enumerate(groups):
        await store.put_segment(PersistSegment(
            record_key=thread, segment_id=gid, kind="observation", status="active", generation=0, text=text,
            tokens=10, cycle_id=f"{gid}-cycle", thread_ids=(thread,), first_message_id=ids[0],
            last_message_id=ids[-1], message_ids=tuple(ids), message_tokens=100,
            boundary_at=max(m.message.created_at_ms for m in [await store.get_message(resource, i) for i in ids]
                            if m),
            created_at=n, ranges=observation_ranges([(i, thread, int(i.rsplit(":", 1)[1])) for i in ids])))
        await service.index_segment(IndexForRecall(thread, resource, (thread,), gid))
    return World(service, p)


# -- messages mode -----------------------------------------------------------------------------------------------


async def check_messages_without_cursor(w: World) -> None:
    r = await w.call()
    assert r.count == 20 and r.cursor == w.trip(0) and r.page == 1 and r.limit == 20 and r.detail == "low"
    assert r.has_next_page and not r.has_prev_page and r.thread_id == w.trip_thread
    assert r.note and "current thread" in r.note and r.messages.startswith("Note:")
    assert f"[{w.trip(0)}]" in r.messages and f"[{w.trip(19)}]" in r.messages and f"[{w.trip(20)}]" not in r.messages
    second = await w.call(page=2)
    assert second.count == 10 and not second.has_next_page and second.has_prev_page
    end = await w.call(threadId="current", anchor="end", limit=5)
    assert [f"[{w.trip(i)}]" in end.messages for i in range(25, 30)] == [True] * 5
    assert end.messages.index(f"[{w.trip(25)}]") < end.messages.index(f"[{w.trip(29)}]")  # oldest first
    assert not end.has_next_page and end.has_prev_page and end.cursor == w.trip(25)
    older = await w.call(threadId="current", anchor="end", limit=5, page=2)
    assert f"[{w.trip(20)}]" in older.messages and f"[{w.trip(24)}]" in older.messages
    assert older.has_next_page and older.has_prev_page
    work = await w.call(threadId=w.work_thread)
    assert work.count == 4 and work.note is None and work.thread_id == w.work_thread
    assert "Quarterly budget note 0" in work.messages


async def check_cursor_paging(w: World) -> None:
    forward = await w.call(cursor=w.trip(10), limit=3)
    assert [f"[{w.trip(i)}]" in forward.messages for i in (10, 11, 12)] == [True] * 3
    assert forward.count == 3 and forward.has_next_page and forward.has_prev_page and forward.cursor == w.trip(10)
    assert (await w.call(cursor=w.trip(10), limit=3, page=0)).messages == forward.messages
    back = await w.call(cursor=w.trip(10), limit=3, page=-1)
    assert [f"[{w.trip(i)}]" in back.messages for i in (8, 9, 10)] == [True] * 3
    assert f"[{w.trip(7)}]" not in back.messages and back.has_prev_page and back.has_next_page
    further = await w.call(cursor=w.trip(10), limit=3, page=-2)
    assert f"[{w.trip(5)}]" in further.messages and f"[{w.trip(7)}]" in further.messages
    assert (await w.call(cursor=w.trip(10), limit=3, page=2)).messages.count("**") // 2 == 3
    first = await w.call(cursor=w.trip(0), page=-1)
    assert first.count == 1 and not first.has_prev_page and first.has_next_page
    last = await w.call(cursor=w.trip(29), limit=5)
    assert last.count == 1 and not last.has_next_page and last.has_prev_page
    past = await w.call(cursor=w.trip(29), page=3)
    assert past.count == 0 and "no messages on this page" in past.messages
    other_thread = await w.call(cursor=f"{w.p}work:2", limit=2)  # a cursor opens its own thread
    assert other_thread.thread_id == w.work_thread and f"[{w.p}work:3]" in other_thread.messages


async def check_range_cursor_hint(w: World) -> None:
    r = await w.call(cursor=f"{w.trip(3)}:{w.trip(9)}")
    assert r.count == 0 and r.cursor == f"{w.trip(3)}:{w.trip(9)}"
    assert f'cursor="{w.trip(3)}"' in r.messages and f'cursor="{w.trip(9)}"' in r.messages  # ids with ':' inside
    listed = await w.call(cursor=f"{w.trip(1)}:{w.trip(2)},{w.trip(7)}:{w.trip(8)}")
    assert f'cursor="{w.trip(1)}"' in listed.messages and f'cursor="{w.trip(8)}"' in listed.messages


async def check_thread_targets_and_access(w: World) -> None:
    current = await w.call(threadId="current", limit=1)
    assert current.thread_id == w.trip_thread and current.note is None
    with pytest.raises(RecallError, match="no thread"):
        await w.call(threadId=w.bob_thread)  # another tenant's thread reads as unknown
    with pytest.raises(RecallError, match="no thread"):
        await w.call(threadId=f"{w.p}thread:never")
    with pytest.raises(RecallError, match="no message"):
        await w.call(cursor=f"{w.p}secret:1")  # another tenant's message reads as unknown
    mismatch = await w.call(cursor=w.trip(3), threadId=w.work_thread)
    assert mismatch.count == 0 and f'threadId="{w.trip_thread}"' in mismatch.messages
    no_current = await w.service.recall(w.scope(thread=None), {"threadId": w.work_thread})
    assert isinstance(no_current, MessagesResult) and no_current.count == 4
    with pytest.raises(RecallError, match="no current thread"):
        await w.service.recall(w.scope(thread=None), {})
    fresh = RecallScope(w.alice, f"{w.p}thread:brand-new", RetrievalConfig())  # nothing stored for it yet
    empty = await w.service.recall(fresh, {"threadId": "current"})
    assert isinstance(empty, MessagesResult) and empty.count == 0 and "no messages in this thread" in empty.messages
    posing = RecallScope(w.alice, w.bob_thread, RetrievalConfig())  # a current thread that is someone else's
    assert (await w.service.recall(posing, {})).count == 0  # type: ignore[union-attr]


async def check_thread_scope(w: World) -> None:
    scope = w.scope(scope="thread")
    own = await w.service.recall(scope, {"cursor": w.trip(2), "limit": 2})
    assert isinstance(own, MessagesResult) and own.count == 2
    with pytest.raises(RecallError, match="limited to the current thread"):
        await w.service.recall(scope, {"threadId": w.work_thread})
    with pytest.raises(RecallError, match="no message"):
        await w.service.recall(scope, {"cursor": f"{w.p}work:1"})  # alice's own, but another thread
    assert isinstance(await w.service.recall(scope, {"threadId": "current"}), MessagesResult)
    threads = await w.service.recall(scope, {"mode": "threads"})
    assert isinstance(threads, ThreadsResult) and threads.count == 1 and "← current" in threads.threads
    assert w.work_thread not in threads.threads


async def check_detail_and_parts(w: World) -> None:
    low = await w.call(cursor=w.trip(5), limit=4)
    assert "[p0] Let me look up flights." in low.messages and "[p1] [Tool Call: search_flights]" in low.messages
    assert "[p2] The user wants a morning flight." in low.messages  # reasoning is shown
    assert "[Image: passport.png]" in low.messages and "[p2] [File: itinerary.pdf]" in low.messages
    high = await w.call(cursor=w.trip(5), detail="high")
    assert high.count == 1 and high.part_index == 0 and "Let me look up flights." in high.messages
    assert f'next part: partIndex=1 on cursor="{w.trip(5)}"' in high.messages
    assert f'next message: partIndex=0 on cursor="{w.trip(6)}"' in high.messages
    part = await w.call(cursor=w.trip(5), partIndex=1)
    assert '"to": "OPO"' in part.messages and part.part_index == 1 and part.detail == "high"
    assert part.has_next_page and part.has_prev_page and part.truncated is None
    image = await w.call(cursor=w.trip(8), partIndex=1)
    assert "image/png, 800x600" in image.messages
    beyond = await w.call(cursor=w.trip(5), partIndex=7)
    assert beyond.cursor == w.trip(6) and "showing the first part of the next message" in beyond.messages
    assert "TP1947" in beyond.messages
    with pytest.raises(RecallError, match="needs a cursor"):
        await w.call(partIndex=0)


async def check_long_parts_and_budget(w: World) -> None:
    count = w.service.count
    low = await w.call(cursor=w.trip(11), limit=1)
    assert f'recall cursor="{w.trip(11)}" partIndex=0 detail="high"' in low.messages  # cut, with the way back
    assert count(low.messages) < 400
    part = await w.call(cursor=w.trip(11), partIndex=0)
    assert part.truncated is True and part.token_offset and part.token_offset > 2000
    assert part.next_char_offset and "word0 " in part.messages and count(part.messages) <= 2100
    assert f"charOffset={part.next_char_offset}" in (part.note or "")
    pieces, offset = [part.messages], part.next_char_offset
    while offset is not None:
        more = await w.call(cursor=w.trip(11), partIndex=0, charOffset=offset)
        pieces.append(more.messages)
        offset = more.next_char_offset
    assert "word2999" in pieces[-1] and len(pieces) >= 3
    with pytest.raises(RecallError, match="past the end"):
        await w.call(cursor=w.trip(11), partIndex=0, charOffset=10**7)
    high = await w.call(cursor=w.trip(11), detail="high")
    assert high.truncated is True and f"partIndex=0 charOffset={high.next_char_offset}" in high.messages


async def check_output_budget(w: World) -> None:
    # every message at once, at high expansion: the whole answer stays within the 2,000-token budget
    service = RecallService(w.service.store, w.service.count, budget_tokens=300)
    r = await service.recall(w.scope(), {"threadId": "current", "limit": 20})
    assert isinstance(r, MessagesResult) and r.truncated is True and r.token_offset and r.token_offset > 0
    assert w.service.count(r.messages) <= 300 + 60  # the cut note is outside the budget
    assert "output cut at the 300-token budget" in r.messages


async def check_filters(w: World) -> None:
    calls = await w.call(threadId="current", partType="tool-call")
    assert calls.count == 2 and "[p1] [Tool Call: search_flights]" in calls.messages
    assert "Let me look up flights" not in calls.messages  # other parts of the message are left out
    assert "[p0] [Tool Call: book_hotel]" in calls.messages
    results = await w.call(threadId="current", partType="tool-result", limit=1)
    assert results.count == 1 and results.has_next_page and "TP1947" in results.messages
    hotel = await w.call(threadId="current", toolName="book_hotel")
    assert hotel.count == 2 and "Hotel Infante" in hotel.messages and "search_flights" not in hotel.messages
    none = await w.call(threadId="current", partType="tool-call", toolName="nothing")
    assert none.count == 0 and "no messages" in none.messages
    images = await w.call(cursor=w.trip(0), partType="image")  # the cursor itself is skipped when it has none
    assert images.count == 1 and "[p1] [Image: passport.png]" in images.messages and images.has_prev_page is False


async def check_limits_and_validation(w: World) -> None:
    assert (await w.call(limit=100)).limit == 20
    with pytest.raises(RecallError, match="partIndex"):
        await w.call(cursor=w.trip(1), partIndex=-1)
    with pytest.raises(RecallError, match="page"):
        await w.call(page=51)
    with pytest.raises(RecallError, match=r"Extra inputs"):
        await w.call(cursr="x")
    with pytest.raises(RecallError, match="before"):
        await w.service.recall(w.scope(), {"mode": "threads", "before": "next tuesday"})
    with pytest.raises(RecallError, match="query"):
        await w.service.recall(w.scope(vector=True), {"mode": "search"})
    with pytest.raises(RecallError, match="charOffset"):
        await w.call(cursor=w.trip(1), charOffset=3)


# -- threads mode ------------------------------------------------------------------------------------------------


async def check_threads_mode(w: World) -> None:
    r = await w.service.recall(w.scope(), {"mode": "threads"})
    assert isinstance(r, ThreadsResult) and r.count == 2 and r.page == 0 and not r.has_more
    assert r.threads.index("Porto trip") < r.threads.index(w.work_thread)  # most recently updated first
    assert "- **Porto trip** ← current" in r.threads and f"  id: {w.trip_thread}" in r.threads
    assert "updated: 2026-03-01 08:29:00Z | created: 2026-03-01 08:00:00Z" in r.threads
    assert "(untitled)" in r.threads and "Bob" not in r.threads and w.bob_thread not in r.threads
    paged = await w.service.recall(w.scope(), {"mode": "threads", "limit": 1, "page": 1})
    assert isinstance(paged, ThreadsResult) and paged.count == 1 and w.work_thread in paged.threads
    assert not paged.has_more and paged.page == 1
    first = await w.service.recall(w.scope(), {"mode": "threads", "limit": 1})
    assert isinstance(first, ThreadsResult) and first.has_more
    before = await w.service.recall(w.scope(), {"mode": "threads", "before": "2026-02-25"})
    assert isinstance(before, ThreadsResult) and before.count == 1 and w.work_thread in before.threads
    after = await w.service.recall(w.scope(), {"mode": "threads", "after": "2026-02-25T00:00:00Z"})
    assert isinstance(after, ThreadsResult) and after.count == 1 and "Porto trip" in after.threads
    empty = await w.service.recall(w.scope(), {"mode": "threads", "after": "2027-01-01"})
    assert isinstance(empty, ThreadsResult) and empty.count == 0 and "No threads found" in empty.threads
    current = await w.service.recall(w.scope(), {"mode": "threads", "threadId": "current"})
    assert isinstance(current, ThreadsResult) and current.count == 1 and "Porto trip" in current.threads
    bob = await w.service.recall(w.scope(), {"mode": "threads", "threadId": w.bob_thread})
    assert isinstance(bob, ThreadsResult) and bob.count == 0


# -- search mode -------------------------------------------------------------------------------------------------


async def check_search_mode(w: World) -> None:
    off = await w.service.recall(w.scope(vector=False), {"mode": "search", "query": "pastry"})
    assert isinstance(off, SearchResult) and off.count == 0 and "not configured" in off.results
    r = await w.service.recall(w.scope(vector=True), {"mode": "search", "query": "favourite pastry"})
    assert isinstance(r, SearchResult) and 0 < r.count <= 10
    assert f'cursor="{w.trip(20)}"' in r.results and "pastel de nata" in r.results
    assert "### Current thread: \"Porto trip\"" in r.results and "score " in r.results
    assert "croissant" not in r.results and "PIN" not in r.results and w.bob_thread not in r.results
    assert r.results.index("pastel") < r.results.index("Another thread") if "Another thread" in r.results else True
    work = await w.service.recall(w.scope(vector=True), {"mode": "search", "query": "kafka cost",
                                                           "threadId": w.work_thread, "limit": 3})
    assert isinstance(work, SearchResult) and 0 < work.count <= 3 and w.trip_thread not in work.results
    assert "Another thread" in work.results and f"raw messages (first:last) {w.p}work:0:{w.p}work:3" in work.results
    scoped = await w.service.recall(w.scope(scope="thread", vector=True), {"mode": "search", "query": "kafka cost"})
    assert isinstance(scoped, SearchResult) and w.work_thread not in scoped.results
    with pytest.raises(RecallError, match="no thread"):
        await w.service.recall(w.scope(vector=True), {"mode": "search", "query": "x", "threadId": w.bob_thread})
    late = await w.service.recall(w.scope(vector=True), {"mode": "search", "query": "kafka cost",
                                                           "after": "2026-02-27"})
    assert isinstance(late, SearchResult) and w.work_thread not in late.results


# -- shared threads: recall by author ----------------------------------------------------------------------------

ANA = Author(id="user-42", name="Ana", kind="human")
BEN = Author(id="user-77", name="Ben", kind="human")
BILLING = Author(id="billing-agent", kind="agent")


async def _support_thread(w: World) -> tuple[RecallScope, list[str]]:
    """A support channel of tenant "acme": Ana and Ben write to it, the billing agent answers, one message has no
    author; the current thread of the scope it returns. Indexed for search when the world has an index."""
    resource, thread = f"{w.p}acme", f"{w.p}thread:support"
    said = [(ANA, "user", "Our March invoice charged the espresso machine twice."),
            (BEN, "user", "I own the account; refund the espresso machine to the card ending 4242."),
            (BILLING, "assistant", "I refunded the duplicate espresso machine charge of 120 EUR."),
            (None, "user", "Thanks, the espresso machine refund arrived."),
            (ANA, "user", "Please also send the corrected March invoice.")]
    ids = []
    store = w.service.store
    for i, (author, role, text) in enumerate(said):
        m = Message(message_id=f"{w.p}support:{i}", thread_id=thread, resource_id=resource, role=role,
                    created_at=T0 + timedelta(days=2, minutes=i), parts=(TextPart(text=text),), author=author)
        await store.put_message(thread, m, i, 12)
        ids.append(m.message_id)
    gid = f"{w.p}g-support"
    await store.put_segment(PersistSegment(
        record_key=thread, segment_id=gid, kind="observation", status="active", generation=0,
        text="* Ana reported the espresso machine was charged twice; billing-agent refunded it", tokens=10,
        cycle_id=f"{gid}-cycle", thread_ids=(thread,), first_message_id=ids[0], last_message_id=ids[-1],
        message_ids=tuple(ids), message_tokens=60, boundary_at=int((T0 + timedelta(days=2, minutes=4)).timestamp()
                                                                   * 1000),
        created_at=9, ranges=observation_ranges([(m, thread, i) for i, m in enumerate(ids)])))
    await w.service.index_segment(IndexForRecall(thread, resource, (thread,), gid))
    return RecallScope(resource, thread, RetrievalConfig(scope="resource", vector=True)), ids


async def check_author_filter(w: World) -> None:
    scope, ids = await _support_thread(w)

    async def call(**arguments: object) -> MessagesResult:
        result = await w.service.recall(scope, arguments)
        assert isinstance(result, MessagesResult)
        return result

    everyone = await call(threadId="current")
    assert everyone.count == 5 and "**user [Ana] (" in everyone.messages
    assert "**assistant [billing-agent] (" in everyone.messages and "**user (2026-03-03 08:03" in everyone.messages
    ana = await call(threadId="current", author="Ana")
    assert ana.count == 2 and ids[0] in ana.messages and ids[4] in ana.messages
    assert all(i not in ana.messages for i in ids[1:4]) and not ana.has_next_page
    assert (await call(threadId="current", author="user-42")).messages == ana.messages  # by id, or by name
    assert (await call(threadId="current", author=" ana ")).count == 2  # a name in any case
    agent = await call(threadId="current", author="billing-agent", anchor="end")
    assert agent.count == 1 and "120 EUR" in agent.messages
    ben = await call(cursor=ids[0], author="Ben")  # the cursor itself is not Ben's: it is skipped
    assert ben.count == 1 and ids[1] in ben.messages and ben.has_prev_page is False
    paged = await call(threadId="current", author="Ana", limit=1)
    assert paged.count == 1 and paged.has_next_page and ids[0] in paged.messages
    nobody = await call(threadId="current", author="Zoe")
    assert nobody.count == 0 and 'no messages by "Zoe"' in nobody.messages
    # the filter never reaches past the tenant: Alice's threads have no message of Ana's
    assert (await w.call(threadId="current", author="Ana")).count == 0
    with pytest.raises(RecallError, match="author"):
        await w.service.recall(scope, {"mode": "threads", "author": "Ana"})
    with pytest.raises(RecallError, match="author"):
        await w.service.recall(scope, {"cursor": ids[0], "partIndex": 0, "author": "Ana"})
    with pytest.raises(RecallError, match="author"):
        await w.service.recall(scope, {"author": "   "})


async def check_author_search(w: World) -> None:
    scope, ids = await _support_thread(w)
    query = {"mode": "search", "query": "espresso machine refund"}
    everyone = await w.service.recall(scope, query)
    assert isinstance(everyone, SearchResult) and everyone.count >= 3
    assert "observation group" in everyone.results  # the group sums up everyone's messages
    ana = await w.service.recall(scope, {**query, "author": "Ana"})
    assert isinstance(ana, SearchResult) and 0 < ana.count <= 2
    assert "observation group" not in ana.results and "from user [Ana]" in ana.results
    assert all(f'cursor="{i}"' not in ana.results for i in ids[1:4])
    assert (await w.service.recall(scope, {**query, "author": "user-4"})).count == 0  # an id matches whole
    agent = await w.service.recall(scope, {**query, "author": "Billing-Agent"})  # without a name: its id, any case
    assert isinstance(agent, SearchResult) and agent.count == 1 and f'cursor="{ids[2]}"' in agent.results
    assert "from assistant [billing-agent]" in agent.results


async def check_wire_round_trip(w: World) -> None:
    # through the endpoint the HTTP route and the request/reply topics share: the wire is the runtime's business
    endpoint = RecallEndpoint(w.service, Metrics.create())
    request = RecallRequest.model_validate({
        "schema": "om.recall.request/v1", "correlation_id": "c-1", "resource_id": w.alice,
        "thread_id": w.trip_thread, "retrieval": {"scope": "resource"},
        "arguments": {"cursor": w.trip(3), "limit": 2, "partType": "text"}})
    response = await endpoint.answer(request, "topic")
    data = json.loads(response.model_dump_json(by_alias=True, exclude_none=True))
    assert data["schema"] == "om.recall.response/v1" and data["correlation_id"] == "c-1"
    assert data["result"]["mode"] == "messages" and data["result"]["hasNextPage"] is True
    assert data["result"]["count"] == 2 and "truncated" not in data["result"]
    bad = await endpoint.answer(request.model_copy(update={"resource_id": w.bob}), "topic")
    assert bad.error is not None and bad.error.code == "invalid_request" and bad.result is None
    assert w.trip(3) in bad.error.message and "Porto" not in bad.error.message


MESSAGE_CHECKS = (check_messages_without_cursor, check_cursor_paging, check_range_cursor_hint,
                  check_thread_targets_and_access, check_thread_scope, check_detail_and_parts,
                  check_long_parts_and_budget, check_output_budget, check_filters, check_limits_and_validation,
                  check_threads_mode, check_wire_round_trip, check_author_filter)
SEARCH_CHECKS = (check_search_mode, check_author_search)
ALL_CHECKS = MESSAGE_CHECKS + SEARCH_CHECKS
