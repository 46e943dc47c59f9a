"""Export and import through the embedded runner: a memory exported from one ``Memory`` and imported into a fresh
one (its own store, index and embedder) gives every thread the same context, byte for byte, the same recall
answers, and goes on the same: the next messages, observations and reflections are decided alike in both."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from om_stream.adapters.embedders import OfflineMiniLMEmbedder
from om_stream.adapters.offline_model import OfflineModel
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.config import OMConfig
from om_stream.core.engine import record_config
from om_stream.core.messages import Message
from om_stream.core.views import context_spec
from om_stream.errors import InputRejected
from om_stream.ports import ChatRequest, ChatResponse
from om_stream.replay.shapes import generate
from om_stream.runtime.embedded import ManualClock, Memory
from om_stream.wire.codec import encode

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 400, "bufferTokens": 0.25},
                           "reflection": {"observationTokens": 350}}
EMBEDDER = OfflineMiniLMEmbedder()


def conversation(seed: int, shapes: tuple[str, str] = ("chatty", "tool-heavy"), turns: int = 24) -> list[Message]:
    """Two threads of ``ana`` (two conversation shapes) and one of ``bob``, interleaved by time."""
    messages: list[Message] = []
    for n, (shape, thread, resource) in enumerate(((shapes[0], "t-a", "ana"), (shapes[1], "t-b", "ana"),
                                                   ("mixed", "t-bob", "bob"))):
        for turn in generate(shape, turns if resource == "ana" else 6, seed=seed + n).turns():
            for m in turn.messages:
                messages.append(Message.model_validate({**m.model_dump(), "thread_id": thread, "resource_id": resource,
                                                        "message_id": f"{thread}:{m.message_id}"}))
    return sorted(messages, key=lambda m: m.created_at_ms)


async def play(om: Memory, messages: list[Message]) -> None:
    for m in messages:
        await om.advance_to(m.created_at_ms)
        await om.add_message(m)
        await om.settle()


async def contexts(om: Memory, threads: tuple[str, ...] = ("t-a", "t-b")) -> dict[str, bytes]:
    found = {}
    for thread in threads:
        context = await om.context(thread)
        assert context is not None, thread
        found[thread] = encode(context)
    return found


async def rendered_now(om: Memory, thread: str) -> bytes:
    """The thread's context as its record renders it now (what a worker's ``GET /v1/threads/{id}/context``
    answers), whether or not it was published since the record last changed."""
    state = om.state(thread, "ana")
    assert state is not None
    spec = context_spec(state, thread, record_config(om.config, state), state.context_version)
    return encode(await om.effects.context(spec, now_ms=om.clock.now_ms()))


def memory(now: int, **extra: Any) -> Memory:
    return Memory(OPTIONS, clock=ManualClock(now), store=SqliteContentStore(":memory:"), **extra)


async def moved(source: Memory, **extra: Any) -> Memory:
    """A fresh memory, on the source's clock time, holding what the source exported of ``ana``."""
    assert isinstance(source.clock, ManualClock)
    target = memory(source.clock.now, **extra)
    await target.__aenter__()
    lines = [line async for line in source.export_resource("ana")]
    report = await target.import_resource(lines)
    assert report.states == 2 and report.messages > 0
    return target


@pytest.mark.parametrize(("seed", "shapes"), [(1, ("chatty", "tool-heavy")), (2, ("documents", "multi-day")),
                                              (3, ("mixed", "project")), (4, ("tool-heavy", "chatty")),
                                              (5, ("multi-day", "mixed"))])
async def test_an_imported_memory_has_the_same_contexts_and_goes_on_the_same(seed: int,
                                                                             shapes: tuple[str, str]) -> None:
    messages = conversation(seed, shapes)
    cut = 2 * len(messages) // 3
    start = messages[0].created_at_ms
    async with memory(start) as source:
        await play(source, messages[:cut])
        await source.override("t-b", message_tokens=500, resource_id="ana")
        await source.settle()  # the override may start a call: exported in flight, see the test below
        before = [source.state(thread, "ana") for thread in ("t-a", "t-b")]
        assert all(s is not None and s.log for s in before), "a thread was not observed"
        assert any(s is not None and s.generation > 0 for s in before), "no thread was reflected"
        target = await moved(source)
        try:
            assert await contexts(target) == await contexts(source)
            for thread in ("t-a", "t-b"):
                assert target.state(thread, "ana") == source.state(thread, "ana")
            assert target.state("t-bob", "bob") is None and await target.context("t-bob") is None
            rest = [m for m in messages[cut:] if m.resource_id == "ana"]
            await play(source, rest)
            await play(target, rest)
            assert await contexts(target) == await contexts(source)
            for thread in ("t-a", "t-b"):
                assert target.state(thread, "ana") == source.state(thread, "ana")
        finally:
            await target.close()


def ties_in_any_order(found: Any) -> Any:
    """A search answer with the hits of equal score in one order: the index orders equal scores (identical texts,
    such as two results of one tool) as their points were inserted, which an import cannot reproduce."""
    if found.mode != "search":
        return found
    head, *hits = found.results.split("\n- score ")
    runs: list[list[str]] = []
    for hit in hits:
        if runs and runs[-1][0].split(" ", 1)[0] == hit.split(" ", 1)[0]:
            runs[-1].append(hit)
        else:
            runs.append([hit])
    return head, [sorted(run) for run in runs], found.count


async def test_buffered_chunks_overrides_and_recall_answers_move_too() -> None:
    options = {**OPTIONS, "retrieval": {"vector": True}}
    messages = conversation(11, turns=6)
    start = messages[0].created_at_ms
    async with Memory(options, clock=ManualClock(start), embedder=EMBEDDER) as source:
        await play(source, messages)
        await source.override("t-a", message_tokens=700, observation_tokens=900, resource_id="ana")
        await source.settle()
        state = source.state("t-a", "ana")
        assert state is not None and state.buffered and state.override_observation_tokens == 900
        assert isinstance(source.clock, ManualClock)
        async with Memory(options, clock=ManualClock(source.clock.now), embedder=EMBEDDER) as target:
            report = await target.import_resource([line async for line in source.export_resource("ana")])
            assert report.recall_points > 0 and report.recall_points_skipped == 0
            assert await contexts(target) == await contexts(source)
            assert target.state("t-a", "ana") == state
            for arguments, thread in (({"mode": "search", "query": "what did the user ask about the plan"}, None),
                                      ({"mode": "threads"}, "t-a"), ({"threadId": "current", "limit": 5}, "t-b"),
                                      ({"mode": "search", "query": "tool results", "threadId": "t-b"}, "t-b")):
                mine = ties_in_any_order(await source.recall("ana", arguments, thread_id=thread))
                assert ties_in_any_order(await target.recall("ana", arguments, thread_id=thread)) == mine, arguments
            assert (await target.recall("bob", {"mode": "threads"})).count == 0  # the other tenant stayed behind


class Gated:
    """The offline model, answering only once ``open`` is set: the calls stay in flight until then."""

    def __init__(self, model: OfflineModel) -> None:
        self.model = model
        self.open = asyncio.Event()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        await self.open.wait()
        return await self.model.complete(request)


async def test_calls_in_flight_when_exported_are_asked_again_by_the_importer() -> None:
    messages = [m for m in conversation(21) if m.resource_id == "ana"]
    start = messages[0].created_at_ms
    counter = TiktokenCounter(OMConfig.parse(OPTIONS).resolve().token_encoding)
    gated = Gated(OfflineModel(counter.count))
    async with Memory(OPTIONS, clock=ManualClock(start), model=gated) as source:
        gated.open.set()
        await play(source, messages[:-12])
        gated.open.clear()
        for m in messages[-12:]:  # the clock moves, no timer fires (advance_to would wait for the calls)
            assert isinstance(source.clock, ManualClock)
            source.clock.now = max(source.clock.now, m.created_at_ms)
            await source.add_message(m, wait=False)
        in_flight = [c for t in ("t-a", "t-b") if (s := source.state(t, "ana")) for c in s.cycles]
        assert in_flight, "no call was in flight when the memory was exported"
        target = await moved(source)  # its own model: the offline one, ungated
        try:
            await target.settle()
            gated.open.set()
            await source.settle()
            assert await contexts(target) == await contexts(source)
            for thread in ("t-a", "t-b"):
                assert target.state(thread, "ana") == source.state(thread, "ana")
        finally:
            await target.close()


async def test_resource_scope_moves_its_one_record() -> None:
    options = {"scope": "resource", "observation": {"messageTokens": 400}, "reflection": {"observationTokens": 350}}
    messages = [m for m in conversation(31) if m.resource_id == "ana"]
    async with Memory(options, clock=ManualClock(messages[0].created_at_ms)) as source:
        await play(source, messages)
        assert isinstance(source.clock, ManualClock)
        async with Memory(options, clock=ManualClock(source.clock.now)) as target:
            report = await target.import_resource([line async for line in source.export_resource("ana")])
            assert report.states == 1
            assert target.state("t-a", "ana") == source.state("t-b", "ana")  # one record for both threads
            # one record holds both threads, its log shared: an observation made for one thread changes the other's
            # context too, which is published again only when that thread is next active. The import publishes
            # each thread's context as the record now renders it (as a worker's GET /context does), at the
            # record's version (its threads share the counter): never behind what the thread had.
            for thread in ("t-a", "t-b"):
                mine, theirs = await source.context(thread), await target.context(thread)
                assert mine is not None and theirs is not None and theirs.version >= mine.version
                assert encode(theirs) == await rendered_now(source, thread)
        async with Memory(OPTIONS, clock=ManualClock(0)) as thread_scoped:
            with pytest.raises(InputRejected, match="resource scope; this one is in thread scope"):
                await thread_scoped.import_resource([line async for line in source.export_resource("ana")])


async def test_an_import_never_merges_into_a_memory_that_holds_the_resource() -> None:
    messages = [m for m in conversation(41, turns=8) if m.resource_id == "ana"]
    async with memory(messages[0].created_at_ms) as source:
        await play(source, messages)
        lines = [line async for line in source.export_resource("ana")]
        with pytest.raises(InputRejected) as refused:
            await source.import_resource(lines)
        assert refused.value.reason in ("resource_exists", "record_exists")
        assert isinstance(source.clock, ManualClock)
        async with memory(source.clock.now) as target:
            # a thread of the resource reached the target first: its record is the target's, not the file's
            first = messages[0]
            await target.add_message(first)
            with pytest.raises(InputRejected, match="already holds"):
                await target.import_resource(lines)
            context = await target.context(first.thread_id)
            assert context is not None and [m.message_id for m in context.messages] == [first.message_id]


async def test_the_export_streams_what_a_memory_holds_while_it_takes_messages() -> None:
    """Exported while messages arrive: every message a state refers to is in the file (states are read first)."""
    messages = conversation(51)
    ta, tb = ([m for m in messages if m.thread_id == thread] for thread in ("t-a", "t-b"))
    async with memory(messages[0].created_at_ms) as source:
        await play(source, ta[:20] + tb[:20])
        lines: list[bytes] = []
        async for line in source.export_resource("ana"):
            if b'"type":"record"' in line and b'"type":"record"' not in lines[-1]:
                # the messages were read: more come in before the rest is (a state read now would name them)
                for m in ta[20:30] + tb[20:30]:
                    await source.add_message(m)
            lines.append(line)
        exported = [json.loads(line) for line in lines]
        threads = [line["record_key"] for line in exported if line["type"] == "state"]
        assert len(threads) == 2 and sum(line["type"] == "message" for line in exported) == 40
        async with memory(messages[0].created_at_ms) as target:
            await target.import_resource(lines)
            for thread in threads:
                state = target.state(thread, "ana")
                assert state is not None
                named = {r.id for r in state.unobserved} | {t.turn_message.id for t in state.threads.values()
                                                            if t.turn_message is not None}
                assert len(await target.store.get_messages(sorted(named), resource_id="ana")) == len(named) > 0
                context = await target.context(thread)
                assert context is not None and context.messages


async def test_a_shared_threads_authors_move_with_its_messages_and_its_recall_points() -> None:
    from datetime import UTC, datetime, timedelta

    from om_stream.core.messages import Author, TextPart
    from om_stream.core.recall import MessagesResult, SearchResult

    options = {**OPTIONS, "retrieval": {"vector": True}}
    ana, ben = Author(id="u-ana", name="Ana", kind="human"), Author(id="u-ben", name="Ben", kind="human")
    agent = Author(id="billing-agent", kind="agent")
    start = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    said = [(ana, "user", "Our March invoice charged the Pro plan twice."),
            (agent, "assistant", "I found the duplicate charge of 49 EUR."),
            (ben, "user", "Refund it to the card ending 4242, not as credit."),
            (agent, "assistant", "Refunded 49 EUR to the card ending 4242."),
            (ana, "user", "Please send the corrected invoice to finance.")]
    async with Memory(options, clock=ManualClock(int(start.timestamp() * 1000)), embedder=EMBEDDER) as source:
        for i, (author, role, text) in enumerate(said):
            await source.add_message(Message(message_id=f"s-{i}", thread_id="support", resource_id="acme",
                                             role=role, created_at=start + timedelta(minutes=i),  # type: ignore[arg-type]
                                             parts=(TextPart(text=text),), author=author))
        await source.observe("support", force=True)
        await source.settle()
        lines = [line async for line in source.export_resource("acme")]
        points = [json.loads(line) for line in lines if b'"recall-point"' in line]
        authored = {tuple(p["author_keys"]) for p in points if p["kind"] == "message"}
        assert authored == {a.keys for a in (ana, ben, agent)}
        assert all("author_keys" not in p for p in points if p["kind"] == "group")
        assert isinstance(source.clock, ManualClock)
        async with Memory(options, clock=ManualClock(source.clock.now), embedder=EMBEDDER) as target:
            report = await target.import_resource(lines)
            assert report.messages == 5 and report.recall_points == len(points)
            for arguments in ({"mode": "search", "query": "refund to the card", "author": "Ben"},
                              {"mode": "search", "query": "invoice", "author": "ana"},
                              {"threadId": "current", "author": "billing-agent"}):
                mine = await source.recall("acme", arguments, thread_id="support")
                theirs = await target.recall("acme", arguments, thread_id="support")
                assert isinstance(mine, SearchResult | MessagesResult) and mine.count > 0, arguments
                assert theirs == mine, arguments
            ben_only = await target.recall("acme", {"mode": "search", "query": "refund", "author": "Ben"})
            assert isinstance(ben_only, SearchResult) and ben_only.count == 1 and "s-2" in ben_only.results
            again = [line async for line in target.export_resource("acme")]
            assert [json.loads(line) for line in again if b'"header"' not in line] == \
                [json.loads(line) for line in lines if b'"header"' not in line]
