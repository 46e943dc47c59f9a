"""One SQLite transaction per input batch: the store holds a task's writes in a ``batched_writes`` block and commits
them together, and the host gives a store that declares it (``ports.BatchedWrites``) a whole batch's writes at once.

What must hold: the store behaves as its contract says with its writes held (every read sees every write before it);
a block is one transaction, all or none; the host's results are those of writing input by input, over many seeds of
batches; and a batch the store refuses is written input by input, so that only the refused input fails."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.commands import (
    EmitEvent,
    IndexForRecall,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.config import OMConfig
from om_stream.core.engine import record_key
from om_stream.core.events import OMEvent
from om_stream.core.inputs import MessageAppended, ModelResultArrived
from om_stream.core.state import RecordState
from om_stream.core.tokens import TokenAccountant
from om_stream.errors import StorageError
from om_stream.observability.tracing import Tracing
from om_stream.ports import BatchedWrites, ContentStore
from om_stream.runtime.effects import Effects
from om_stream.runtime.host import Host
from om_stream.runtime.host_ports import Arrival, StoreRetry
from om_stream.runtime.timers import TimerWheel
from tests.support.sim import word_count
from tests.support.spans import parent_of, provider_into, spans_named
from tests.support.store_contract import CHECKS, T0, message


def refuse_message(path: Path, message_id: str) -> None:
    """From now on the database at ``path`` refuses to store the message ``message_id`` (a constraint error: not
    transient)."""
    refuser = sqlite3.connect(path, isolation_level=None)
    refuser.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON messages WHEN NEW.message_id = '{message_id}'"
                    " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    refuser.close()


def transactions(store: SqliteContentStore) -> list[str]:
    """Every transaction the store's connection begins from now on (its statements, traced)."""
    begun: list[str] = []
    conn = store._db._conn
    assert conn is not None, "start the store first"
    conn.set_trace_callback(lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None)
    return begun


# -- the store ---------------------------------------------------------------------------------------------------


def test_the_sqlite_store_declares_batched_writes_and_the_memory_store_does_not() -> None:
    assert isinstance(SqliteContentStore(), BatchedWrites)
    assert not isinstance(InMemoryContentStore(), BatchedWrites)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
async def test_store_contract_with_every_write_held(check) -> None:
    """The whole contract inside one block: each read sees the writes made before it."""
    store = SqliteContentStore(":memory:")
    try:
        async with store.batched_writes():
            await check(store, "p-")
    finally:
        await store.close()


async def test_a_block_is_one_transaction_committed_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    store = SqliteContentStore(path)
    await store.start()
    reader = sqlite3.connect(path)
    try:
        begun = transactions(store)
        async with store.batched_writes():
            for i in range(20):
                await store.put_message("t1", message(f"m{i}", "t1", "r1", T0 + timedelta(seconds=i)), i, 3)
            assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 0  # held, not committed
            assert begun == []
        assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 20
        assert begun == ["BEGIN IMMEDIATE"]
        # outside a block, each write is its own transaction again
        await store.put_message("t1", message("m20", "t1", "r1", T0), 20, 3)
        assert len(begun) == 2
    finally:
        reader.close()
        await store.close()


async def test_a_refused_block_commits_none_of_its_writes(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    store = SqliteContentStore(path)
    await store.start()
    refuse_message(path, "bad")
    try:
        async def two_writes() -> None:
            async with store.batched_writes():
                await store.put_message("t1", message("m1", "t1", "r1", T0), 0, 3)
                await store.put_message("t1", message("bad", "t1", "r1", T0), 1, 3)

        with pytest.raises(StorageError, match="refused by the test") as refused:
            await two_writes()
        assert not refused.value.transient  # a constraint fails the same way every time: not an outage
        assert await store.count_thread_messages("r1", "t1") == 0
        assert await store.get_messages(["m1"], resource_id="r1") == []  # nothing cached of what was not stored
        await store.put_message("t1", message("m1", "t1", "r1", T0), 0, 3)  # the store goes on
        assert await store.count_thread_messages("r1", "t1") == 1
    finally:
        await store.close()


async def test_a_block_that_raises_drops_its_writes() -> None:
    store = SqliteContentStore(":memory:")
    try:
        async def failing() -> None:
            async with store.batched_writes():
                await store.put_message("t1", message("m1", "t1", "r1", T0), 0, 3)
                raise RuntimeError("the caller failed")

        with pytest.raises(RuntimeError):
            await failing()
        assert await store.count_thread_messages("r1", "t1") == 0
    finally:
        await store.close()


async def test_a_task_started_in_a_block_writes_at_once(tmp_path: Path) -> None:
    """A new task inherits the block's context, and may outlive it: its writes are not held."""
    path = tmp_path / "om.db"
    store = SqliteContentStore(path)
    await store.start()
    reader = sqlite3.connect(path)
    try:
        async with store.batched_writes():
            await asyncio.create_task(store.put_message("t1", message("m1", "t1", "r1", T0), 0, 3))
            assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
            await store.put_message("t1", message("m2", "t1", "r1", T0), 1, 3)
            assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
        assert reader.execute("SELECT count(*) FROM messages").fetchone()[0] == 2
    finally:
        reader.close()
        await store.close()


# -- the host ----------------------------------------------------------------------------------------------------

OPTIONS = {"observation": {"messageTokens": 60, "bufferTokens": False},
           "reflection": {"observationTokens": 80}}
THREADS = ("t1", "t2", "t3", "t4")


@dataclass
class Driver:
    """A host over ``store``: its state table, what it publishes, and the model requests it makes (answered by
    the next batch)."""

    store: ContentStore
    now: int = 1_767_225_600_000
    states: dict[str, RecordState] = field(default_factory=dict)
    contexts: dict[str, PublishContext] = field(default_factory=dict)
    requests: list[RequestObservation | RequestReflection] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    tracing: Tracing = field(default_factory=Tracing.off)

    def __post_init__(self) -> None:
        config = OMConfig.parse(OPTIONS).resolve()
        self.host = Host(config=config, accountant=TokenAccountant(word_count, message_overhead=1,
                                                                   conversation_overhead=0),
                         effects=Effects(self.store, config, count_text=word_count), table=self,
                         outlets=lambda: _Outlet(self), timers=TimerWheel(), clock=self,
                         store_retry=StoreRetry(retry_outages=True), tracing=self.tracing)

    def now_ms(self) -> int:
        return self.now

    def get(self, arrival: Arrival) -> RecordState | None:
        return self.states.get(arrival.key)

    def set(self, arrival: Arrival, state: RecordState) -> None:
        self.states[arrival.key] = state

    def answers(self) -> list[Arrival]:
        """Every model request made so far, answered (the Observer's and the Reflector's texts are made up)."""
        answered = []
        for request in self.requests:
            ids = request.message_ids if isinstance(request, RequestObservation) else ()
            text = "\n".join(f"* 🔴 observed {mid}" for mid in ids) or "* 🔴 the conversation so far"
            answered.append(Arrival(request.record_key, "", ModelResultArrived(
                cycle_id=request.cycle_id, attempt=request.attempt, ok=True, observations=text, duration_ms=5,
                operation="observation" if isinstance(request, RequestObservation) else "reflection"), None))
        self.requests.clear()
        return answered


class _Outlet:
    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.requests: list[RequestObservation | RequestReflection] = []
        self.contexts: list[PublishContext] = []
        self.failures: list[tuple[str, str]] = []

    async def event(self, event: OMEvent, command: EmitEvent, arrival: Arrival) -> None: ...

    async def context(self, command: PublishContext, arrival: Arrival, *, folded: Sequence[Arrival] = ()) -> None:
        self.contexts.append(command)

    async def request(self, command: RequestObservation | RequestReflection, arrival: Arrival) -> None:
        self.requests.append(command)

    async def index(self, command: IndexForRecall, arrival: Arrival) -> None: ...

    async def forget(self, resource_id: str, key: str, arrival: Arrival) -> None: ...

    async def refuse(self, command: RejectInput, arrival: Arrival) -> None: ...

    async def failed(self, arrival: Arrival, reason: str, detail: str, error: BaseException) -> None:
        self.failures.append((arrival.key, reason))

    async def commit(self) -> None:
        self.driver.requests.extend(self.requests)
        self.driver.contexts.update((c.spec.thread_id, c) for c in self.contexts)
        self.driver.failures.extend(self.failures)

    def discard(self) -> None: ...


def said(rng: random.Random, n: int) -> Arrival:
    thread = rng.choice(THREADS)
    words = " ".join(f"w{rng.randrange(500)}" for _ in range(rng.randrange(3, 25)))
    return Arrival(record_key("thread", thread, "r1"), "r1",
                   MessageAppended(message(f"m{n}", thread, "r1", T0 + timedelta(seconds=n), words)), None)


def batches(seed: int) -> list[list[Arrival]]:
    """Rounds of messages, each round followed by the answers to the model requests made so far: the answers are
    made when the round is applied, so a round is a recipe, resolved by ``drive``."""
    rng = random.Random(seed)
    n = 0
    rounds = []
    for _ in range(rng.randrange(4, 9)):
        size = rng.randrange(1, 40)
        rounds.append([said(rng, n + i) for i in range(size)])
        n += size
    return rounds


async def drive(driver: Driver, rounds: list[list[Arrival]], *, one_by_one: bool) -> None:
    for arrivals in rounds:
        batch = [*driver.answers(), *arrivals]
        driver.now += 1_000
        if one_by_one:
            for arrival in batch:
                await driver.host.apply([arrival])
        else:
            await driver.host.apply(batch)
    await driver.host.apply(driver.answers())


async def stored(store: ContentStore, driver: Driver) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, state in driver.states.items():
        messages = await store.get_record_messages(key, resource_id="r1", thread_ids=tuple(state.threads),
                                                   through_seq=state.msg_seq)
        ids = [s.id for s in state.log]
        out[key] = ([m.message.message_id for m in messages], await store.get_segment_texts(ids))
    return out


@pytest.mark.parametrize("seed", range(12))
async def test_a_batch_is_one_transaction_and_ends_as_input_by_input_does(seed: int) -> None:
    """Over many seeds of batches and model answers: the host on SQLite, a batch per call, commits each batch's
    writes in one transaction and ends with the states, contexts and stored content of the host on the in-memory
    store (which writes input by input) given the same inputs one at a time."""
    sqlite, memory = SqliteContentStore(":memory:"), InMemoryContentStore()
    await sqlite.start()
    begun = transactions(sqlite)
    batched, single = Driver(sqlite), Driver(memory)
    try:
        rounds = batches(seed)
        await drive(batched, rounds, one_by_one=False)
        await drive(single, rounds, one_by_one=True)
        assert batched.states == single.states
        assert {t: c.spec for t, c in batched.contexts.items()} == {t: c.spec for t, c in single.contexts.items()}
        assert await stored(sqlite, batched) == await stored(memory, single)
        assert any(s.log for s in batched.states.values()), "the seed never observed: the test proves little"
        assert len(begun) <= len(rounds) + 1  # one per batch (a batch of model answers only may write nothing)
        assert batched.failures == single.failures == []
    finally:
        await sqlite.close()


async def test_a_refused_batch_is_written_input_by_input_and_only_the_refused_input_fails(tmp_path: Path) -> None:
    path = tmp_path / "om.db"
    store = SqliteContentStore(path)
    await store.start()
    refuse_message(path, "m3")
    driver = Driver(store)
    try:
        rng = random.Random(7)
        await driver.host.apply([said(rng, n) for n in range(8)])
        # the batch was decided again input by input: the refused input failed, every other one was written
        assert [reason for _, reason in driver.failures] == ["store_refused"]
        rows = sqlite3.connect(path).execute("SELECT message_id FROM messages").fetchall()
        assert sorted(r[0] for r in rows) == sorted(f"m{n}" for n in range(8) if n != 3)
    finally:
        await store.close()


async def test_a_batchs_one_commit_is_one_span_in_its_first_inputs_trace_linked_to_the_others(
        exporter: InMemorySpanExporter) -> None:
    tracing = Tracing.from_provider(provider_into(exporter))
    store = SqliteContentStore(":memory:")
    await store.start()
    driver = Driver(store, tracing=tracing)
    rng = random.Random(3)
    try:
        agents = [tracing.tracer.start_span(f"agent turn {n}") for n in range(3)]
        await driver.host.apply([replace(said(rng, n), trace=set_span_in_context(agent))
                                 for n, agent in enumerate(agents)])
        for agent in agents:
            agent.end()
    finally:
        await store.close()
    (write,) = spans_named(exporter, "om.store write")
    assert parent_of(write) == agents[0].get_span_context().span_id
    assert [link.context.span_id for link in write.links] == [a.get_span_context().span_id for a in agents[1:]]
    attributes = write.attributes or {}
    assert attributes["om.store.inputs"] == 3
    assert "PersistMessage" in attributes["om.store.commands"]  # type: ignore[operator]
