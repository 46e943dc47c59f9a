"""Access control as a property: random tenants, threads, messages, groups and recall calls; nothing of another
tenant ever comes back, in any mode.

Every tenant's texts carry a marker (``SECRET-<tenant>``) and its ids start with the tenant's name. An answer (or
an error message) scoped to tenant R may contain another tenant's id only where the caller typed it (an id echoed
in a hint or an error); it may never contain another tenant's marker or title.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from hypothesis import strategies as st

from om_stream.core.commands import IndexForRecall, PersistSegment, PersistThreadMetadata
from om_stream.core.config import RetrievalConfig
from om_stream.core.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.recall import RecallScope
from om_stream.core.recall.groups import observation_ranges
from om_stream.errors import RecallError
from om_stream.ports import RecallStore
from om_stream.runtime.recall_service import RecallService

TENANTS = ("ta", "tb", "tc")
T0 = datetime(2026, 2, 1, tzinfo=UTC)
WORDS = ("porto", "flight", "budget", "kafka", "pastry", "hotel", "invoice", "meeting")


class HashEmbedder:
    """A fast deterministic embedder (hashed bag of words): search ranks by shared words."""

    model_id = "test-hash"
    dimension = 32

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            v = [0.0] * self.dimension
            for word in text.lower().split():
                v[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dimension] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            vectors.append([x / norm for x in v] if any(v) else [1.0] + [0.0] * (self.dimension - 1))
        return vectors


@dataclass
class Thread:
    tenant: str
    thread_id: str
    messages: list[Message] = field(default_factory=list)


@st.composite
def worlds(draw: st.DrawFn) -> list[Thread]:
    threads: list[Thread] = []
    for tenant in TENANTS[:draw(st.integers(2, 3))]:
        for t in range(draw(st.integers(1, 3))):
            thread = Thread(tenant, f"{tenant}-th{t}")
            for m in range(draw(st.integers(0, 6) | st.integers(1, 6))):
                words = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
                text = f"SECRET-{tenant} {words}"
                kind = draw(st.sampled_from(("text", "text", "tool", "reasoning")))
                if kind == "tool":
                    parts: tuple[Any, ...] = (
                        ToolCallPart(tool_call_id=f"c{m}", tool_name="lookup", args={"q": text}),
                        ToolResultPart(tool_call_id=f"c{m}", tool_name="lookup", result=text))
                elif kind == "reasoning":
                    parts = (TextPart(text=text), ReasoningPart(text=text))
                else:
                    parts = (TextPart(text=text),)
                thread.messages.append(Message(
                    message_id=f"{thread.thread_id}-m{m}", thread_id=thread.thread_id, resource_id=tenant,
                    role=draw(st.sampled_from(("user", "assistant"))),
                    created_at=T0 + timedelta(hours=draw(st.integers(0, 2000)), seconds=m), parts=parts))
            threads.append(thread)
    return threads


def _ids(threads: list[Thread]) -> list[str]:
    return [t.thread_id for t in threads] + [m.message_id for t in threads for m in t.messages]


@st.composite
def calls(draw: st.DrawFn, threads: list[Thread]) -> tuple[str, str | None, str, bool, dict[str, Any]]:
    """(tenant, current thread (any tenant's: a caller may lie), scope, vector, arguments). Ids are mostly drawn
    from other tenants: the adversarial case. Queries name markers in lower case (the embedder ignores case), so a
    query echoed in an answer is never mistaken for a leak."""
    tenant = draw(st.sampled_from(sorted({t.tenant for t in threads})))
    own = [t for t in threads if t.tenant == tenant]
    foreign = [t for t in threads if t.tenant != tenant]
    foreign_messages = [m.message_id for t in foreign for m in t.messages] or ["none"]
    own_messages = [m.message_id for t in own for m in t.messages] or ["none"]
    any_thread = st.sampled_from([t.thread_id for t in threads])
    current = draw(st.sampled_from([t.thread_id for t in own]) | st.none() | any_thread)
    scope = draw(st.sampled_from(("resource", "resource", "thread")))
    message_id = st.sampled_from(foreign_messages) | st.sampled_from(own_messages)
    args: dict[str, Any] = {"mode": draw(st.sampled_from(("messages", "messages", "threads", "search")))}
    cursor = draw(st.none() | message_id | st.builds(lambda a, b: f"{a}:{b}", message_id, message_id) | any_thread)
    if cursor is not None:
        args["cursor"] = cursor
    thread_id = draw(st.none() | st.none() | any_thread | st.just("current"))
    if thread_id is not None:
        args["threadId"] = thread_id
    if args["mode"] == "search" or draw(st.booleans()):
        args["query"] = " ".join(draw(st.lists(st.sampled_from((*WORDS, "secret-ta", "secret-tb")), min_size=1,
                                               max_size=3)))
    for name, strategy in (("page", st.integers(-3, 3)), ("limit", st.integers(1, 30)),
                           ("anchor", st.sampled_from(("start", "end"))), ("detail", st.sampled_from(("low", "high"))),
                           ("partType", st.sampled_from(("text", "tool-call", "tool-result", "reasoning"))),
                           ("toolName", st.just("lookup")), ("partIndex", st.integers(0, 3)),
                           ("before", st.sampled_from(("2026-02-20", "2026-05-01T00:00:00Z"))),
                           ("after", st.sampled_from(("2026-02-01", "2026-03-15")))):
        if draw(st.integers(0, 4)) == 0:
            args[name] = draw(strategy)
    return tenant, current, scope, draw(st.booleans()), args


async def seed_world(store: RecallStore, service: RecallService, threads: list[Thread], prefix: str = "") -> None:
    for thread in threads:
        ordered = sorted(thread.messages, key=lambda m: (m.created_at, m.message_id))
        for seq, message in enumerate(ordered):
            await store.put_message(thread.thread_id, message, seq, 5)
        await store.put_thread_metadata(PersistThreadMetadata(thread_id=thread.thread_id, resource_id=thread.tenant,
                                                              title=f"Title SECRET-{thread.tenant}"))
        if ordered:
            gid = f"{thread.thread_id}-group"
            await store.put_segment(PersistSegment(
                record_key=thread.thread_id, segment_id=gid, kind="observation", status="active", generation=0,
                text=f"* SECRET-{thread.tenant} observed " + " ".join(m.text for m in ordered)[:200], tokens=5,
                cycle_id=f"{gid}-c", thread_ids=(thread.thread_id,), first_message_id=ordered[0].message_id,
                last_message_id=ordered[-1].message_id, message_ids=tuple(m.message_id for m in ordered),
                message_tokens=10, boundary_at=ordered[-1].created_at_ms, created_at=0,
                ranges=observation_ranges([(m.message_id, thread.thread_id, seq) for seq, m in enumerate(ordered)])))
            await service.index_segment(IndexForRecall(thread.thread_id, thread.tenant, (thread.thread_id,), gid))


def rename(threads: list[Thread], prefix: str) -> list[Thread]:
    """The same world with every id and tenant prefixed (to share one Cassandra keyspace between examples)."""
    renamed: list[Thread] = []
    for thread in threads:
        tenant = f"{prefix}{thread.tenant}"
        t = Thread(tenant, f"{prefix}{thread.thread_id}")
        for m in thread.messages:
            t.messages.append(m.model_copy(update={
                "message_id": f"{prefix}{m.message_id}", "thread_id": t.thread_id, "resource_id": tenant,
                "parts": tuple(_retag(p, thread.tenant, tenant) for p in m.parts)}))
        renamed.append(t)
    return renamed


def _retag(part: Any, old: str, new: str) -> Any:
    raw = json.dumps(part.model_dump()).replace(f"SECRET-{old}", f"SECRET-{new}")
    return type(part).model_validate(json.loads(raw))


async def assert_no_leak(service: RecallService, threads: list[Thread],
                         call: tuple[str, str | None, str, bool, dict[str, Any]]) -> None:
    tenant, current, scope_name, vector, args = call
    others = {t.tenant for t in threads} - {tenant}
    scope = RecallScope(tenant, current, RetrievalConfig(scope=scope_name, vector=vector))  # type: ignore[arg-type]
    try:
        result = await service.recall(scope, args)
        text = json.dumps(result.model_dump(by_alias=True))
    except RecallError as exc:
        text = str(exc)
    typed = json.dumps(args) + (current or "")
    for other in others:
        assert f"SECRET-{other}" not in text, (call, text)
        for foreign in _ids([t for t in threads if t.tenant == other]):
            if foreign in text:
                assert foreign in typed, (call, foreign, text)


@cache
def _counter() -> Any:
    from om_stream.adapters.tiktoken_counter import TiktokenCounter

    return TiktokenCounter()


def check_no_leak(store: RecallStore, threads: list[Thread],
                  queries: list[tuple[str, str | None, str, bool, dict[str, Any]]]) -> None:
    """Seed ``store`` with ``threads`` (indexed in a fresh Qdrant local index), run every query and check it returns
    nothing of another resource; closes the store and the index."""
    from om_stream.adapters.qdrant_index import QdrantRecallIndex

    async def run() -> None:
        embedder = HashEmbedder()
        index = QdrantRecallIndex(embedder.model_id, embedder.dimension)
        service = RecallService(store, _counter().count, index=index, embedder=embedder)
        try:
            await seed_world(store, service, threads)
            for query in queries:
                await assert_no_leak(service, threads, query)
        finally:
            await index.close()
            await store.close()

    asyncio.run(run())
