"""The worker under test in ``tests.support.crash_world``: one life of it around the real ``Host`` (its table
recovered from the changelog, its timers, its producer's queue, its offsets), and the faults that end a life at a
phase of the commit order.

* ``ProducerQueue``: what a life queued to send, per stream (topic partition); durable once flushed, and at a kill
  any prefix of each stream, independently of the others (Faust sends table writes through a buffer of its own).
* ``Life.run_batch``: records read from both input logs, handed to ``Host.apply`` with ``may_commit``; the fault
  armed for the batch (``Fault``: a kill, or a rebalance that fences the batch if it had not written its states)
  strikes where its phase says: before the store writes, amid them, after them (at ``may_commit``), amid or after
  the table writes, amid the publications, after them, after the offsets' commit.
* ``work_done``: what a batch does (a message, a cycle started or answered, an activation, a new generation, a timer),
  for faults that wait for the n-th batch doing a given kind of work.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import (
    ActivateChunks,
    Command,
    CommitGeneration,
    EmitEvent,
    IndexForRecall,
    PersistSegment,
    PersistThreadMetadata,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.events import OMEvent
from om_stream.core.inputs import Input, MessageAppended, ModelResultArrived, TimerFired
from om_stream.core.messages import Message
from om_stream.core.state import RecordState
from om_stream.runtime.effects import Effects
from om_stream.runtime.host import Host
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.timers import TimerWheel
from om_stream.wire.context import ContextRecord

if TYPE_CHECKING:
    from tests.support.crash_world import World

__all__ = [
    "PHASES",
    "TRIGGERS",
    "Crash",
    "Fault",
    "FaultKind",
    "Life",
    "LogRecord",
    "Phase",
    "Trigger",
    "agent_view",
    "covered",
    "message_ids_in",
    "word_count",
    "work_done",
]

FaultKind = Literal["sigkill", "rebalance"]
Phase = Literal["before-store", "mid-store", "after-store", "mid-table", "after-table", "mid-publish",
                "after-publish", "after-offsets"]
Trigger = Literal["message", "sync-start", "sync-result", "buffer-start", "buffer-result", "activation",
                  "reflection-start", "reflection-result", "generation", "timer"]
PHASES: tuple[Phase, ...] = ("before-store", "mid-store", "after-store", "mid-table", "after-table", "mid-publish",
                             "after-publish", "after-offsets")
TRIGGERS: tuple[Trigger, ...] = ("message", "sync-start", "sync-result", "buffer-start", "buffer-result",
                                 "activation", "reflection-start", "reflection-result", "generation", "timer")
_ID = re.compile(r"\bt\d+-m\d+\b")


class Crash(BaseException):
    """The worker process dies where it stands (SIGKILL): nothing after this point runs."""


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    phase: Phase
    trigger: Trigger
    occurrence: int = 1  # the n-th batch that does this kind of work


def word_count(text: str) -> int:
    return len(text.split())


def message_ids_in(text: str) -> list[str]:
    """The message ids an observation (or a rendered log) names."""
    return _ID.findall(text)


def covered(context: ContextRecord) -> list[str]:
    """The messages a context holds: those its observations name, and the raw ones."""
    return message_ids_in(context.observations) + [m.message_id for m in context.messages]


def agent_view(context: ContextRecord) -> tuple[Any, ...]:
    """What an agent sends its model from a context (the version is only its order)."""
    return (context.observations, [m.message_id for m in context.messages], context.hints, context.tokens,
            context.generation, context.through_message_id)


@dataclass(frozen=True)
class LogRecord:
    offset: int
    key: str
    resource_id: str
    input: Input
    at: int  # when it was appended (world time, ms)
    tie: int  # then in which order


class ProducerQueue:
    """A worker's producer: records queued per stream, durable once flushed (or, at a kill, a prefix of each)."""

    def __init__(self) -> None:
        self.streams: dict[str, list[Callable[[], None]]] = {}

    def send(self, stream: str, deliver: Callable[[], None]) -> None:
        self.streams.setdefault(stream, []).append(deliver)

    def flush(self) -> None:
        streams, self.streams = self.streams, {}
        for stream in sorted(streams):
            for deliver in streams[stream]:
                deliver()

    def kill(self, rng: random.Random) -> None:
        streams, self.streams = self.streams, {}
        for stream in sorted(streams):
            pending = streams[stream]
            for deliver in pending[:rng.randint(0, len(pending))]:
                deliver()


class WatchedStore(InMemoryContentStore):
    """The content store, telling the fault armed for the batch in hand of each write it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.wrote: Callable[[], None] = lambda: None

    async def put_message(self, record_key: str, message: Message, seq: int, tokens: int) -> None:
        await super().put_message(record_key, message, seq, tokens)
        self.wrote()

    async def put_segment(self, segment: PersistSegment) -> None:
        await super().put_segment(segment)
        self.wrote()

    async def activate_chunks(self, command: ActivateChunks) -> None:
        await super().activate_chunks(command)
        self.wrote()

    async def commit_generation(self, command: CommitGeneration) -> None:
        await super().commit_generation(command)
        self.wrote()

    async def put_thread_metadata(self, command: PersistThreadMetadata) -> None:
        await super().put_thread_metadata(command)
        self.wrote()


@dataclass
class Armed:
    """The fault armed for the batch in hand, and how far the batch has gone in each phase."""

    fault: Fault
    writes: int  # store writes the batch will make
    states: int  # states it will write
    writes_done: int = 0
    states_done: int = 0

    def kills_at(self, phase: Phase) -> bool:
        return self.fault.kind == "sigkill" and self.fault.phase == phase


class Life:
    """One worker owning the partition, from its recovery to its death or its partition's revocation."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.table: dict[str, RecordState] = dict(world.changelog)
        self.read = dict(world.committed)  # next offset to read, per input log
        self.handled = dict(world.committed)
        self.queue = ProducerQueue()
        self.timers = TimerWheel()
        self.timers.rebuild((key, state.timers) for key, state in self.table.items())
        self.armed: Armed | None = None
        self.effects = Effects(world.store, world.config, count_text=word_count)
        self.host = Host(config=world.config, accountant=world.accountant, effects=self.effects,
                         table=_Table(self), outlets=lambda: _Outlet(self), timers=self.timers, clock=world,
                         limits=world.limits)
        for key, state in sorted(self.table.items()):  # calls lost with the previous owner are asked again
            for cycle in state.cycles:
                self.send_timer(key, TimerFired(f"resend:{cycle.id}"))

    def send_timer(self, key: str, timer: TimerFired) -> None:
        world = self.world
        self.queue.send("results", lambda: world.append("results", key, "", timer))

    def unread(self) -> bool:
        return any(self.read[topic] < len(self.world.logs[topic]) for topic in self.read)

    # -- a batch -------------------------------------------------------------------------------------------------

    def _next_batch(self) -> list[tuple[str, LogRecord]]:
        world = self.world
        size = world.rng.randint(1, world.batch_max)
        pending = {topic: list(world.logs[topic][self.read[topic]:]) for topic in ("messages", "results")}
        batch: list[tuple[str, LogRecord]] = []
        while len(batch) < size and (pending["messages"] or pending["results"]):
            topics = [t for t in ("messages", "results") if pending[t]]
            if world.interleave == "ordered":
                topic = min(topics, key=lambda t: (pending[t][0].at, pending[t][0].tie))
            else:
                topic = world.rng.choice(topics)
            batch.append((topic, pending[topic].pop(0)))
        return batch

    def run_batch(self) -> None:
        """One batch through the host, the fault armed for it (if any) striking where it says. Raises ``Crash``."""
        world = self.world
        batch = self._next_batch()
        arrivals = [Arrival(r.key, r.resource_id, r.input, (topic, r.offset)) for topic, r in batch]
        for topic, record in batch:
            self.read[topic] = record.offset + 1
        self.armed = world.arm(self, arrivals)
        fault = self.armed.fault if self.armed else None
        if fault is not None and fault.phase == "before-store":
            if fault.kind == "sigkill":
                raise Crash(fault.phase)
            world.hand_over(self)  # read in the generation before the rebalance: fenced before it is handled
            return
        world.store.wrote = self._wrote
        try:
            done = world.run(self.host.apply(arrivals, may_commit=self._may_commit))
        finally:
            world.store.wrote = lambda: None
        if not done:  # fenced at may_commit: nothing of it counts as handled
            world.hand_over(self)
            return
        for topic, record in batch:
            self.handled[topic] = max(self.handled[topic], record.offset + 1)
        if world.rng.random() < world.flush_chance:
            self.queue.flush()  # the producer sends on its own, long before the ledger's next commit
        if fault is None:
            if world.rng.random() < world.commit_chance:
                self.commit()
            return
        if fault.kind == "rebalance":  # the revocation waited for the batch, which went through
            world.hand_over(self)
            return
        if fault.phase == "after-offsets":
            self.commit()
        raise Crash(fault.phase)

    def commit(self) -> None:
        """The ledger's commit: flush the producer (every output acknowledged), then commit the handled offsets."""
        self.queue.flush()
        self.world.committed.update(self.handled)

    def _wrote(self) -> None:
        armed = self.armed
        if armed is not None:
            armed.writes_done += 1
            if armed.kills_at("mid-store") and armed.writes_done == max(1, armed.writes // 2):
                raise Crash("mid-store")

    async def _may_commit(self) -> bool:
        armed = self.armed
        if armed is None or armed.fault.phase not in ("mid-store", "after-store"):
            return True
        if armed.fault.kind == "sigkill":  # (mid-store, when the batch wrote nothing)
            raise Crash(armed.fault.phase)
        return False  # the group moved on during phase 1: the batch is fenced off

    def state_written(self) -> None:
        armed = self.armed
        if armed is not None:
            armed.states_done += 1
            if armed.kills_at("mid-table") and armed.states_done == max(1, armed.states // 2):
                raise Crash("mid-table")

    def publishing(self, sent: int, total: int) -> None:
        """Told before each publication leaves (``sent`` of ``total`` have), and once after the last."""
        armed = self.armed
        if armed is None:
            return
        if armed.kills_at("after-table") and sent == 0:
            raise Crash("after-table")
        if armed.kills_at("mid-publish") and sent == min(total, max(1, total // 2)):
            raise Crash("mid-publish")

    # -- timers --------------------------------------------------------------------------------------------------

    def fire_timers(self) -> bool:
        fired = False
        for key, timer in self.timers.due(self.world.now):
            if key in self.table:
                self.send_timer(key, timer)
                fired = True
        if fired:
            self.queue.flush()
        return fired


class _Table:
    def __init__(self, life: Life) -> None:
        self.life = life

    def get(self, arrival: Arrival) -> RecordState | None:
        return self.life.table.get(arrival.key)

    def set(self, arrival: Arrival, state: RecordState) -> None:
        life, world = self.life, self.life.world
        life.table[arrival.key] = state
        life.queue.send("changelog", lambda: world.changelog.__setitem__(arrival.key, state))
        life.state_written()


class _Outlet:
    """The Kafka outlet: contexts rendered at phase 1 (reading the store), everything queued at ``commit``."""

    def __init__(self, life: Life) -> None:
        self.life = life
        self.prepared: list[tuple[str, Callable[[], None]]] = []

    async def event(self, event: OMEvent, command: EmitEvent, arrival: Arrival) -> None: ...

    async def context(self, command: PublishContext, arrival: Arrival, *, folded: Sequence[Arrival] = ()) -> None:
        world = self.life.world
        context = await self.life.effects.context(command.spec, now_ms=world.now)
        world.decided.setdefault((context.thread_id, context.version), set()).add(repr(agent_view(context)))
        self.prepared.append((f"context:{context.thread_id}", lambda: world.published(context)))

    async def request(self, command: RequestObservation | RequestReflection, arrival: Arrival) -> None:
        requests = self.life.world.requests
        self.prepared.append(("requests", lambda: requests.append(command)))

    async def index(self, command: IndexForRecall, arrival: Arrival) -> None: ...

    async def forget(self, resource_id: str, key: str, arrival: Arrival) -> None: ...

    async def refuse(self, command: RejectInput, arrival: Arrival) -> None: ...

    async def failed(self, arrival: Arrival, reason: str, detail: str, error: BaseException) -> None:
        raise error  # no replay may make the engine fail

    async def commit(self) -> None:
        prepared, self.prepared = self.prepared, []
        for sent, (stream, deliver) in enumerate(prepared):
            self.life.publishing(sent, len(prepared))
            self.life.queue.send(stream, deliver)
        self.life.publishing(len(prepared), len(prepared))

    def discard(self) -> None:
        self.prepared.clear()



def work_done(state: RecordState, event: Input, commands: list[Command]) -> set[Trigger]:
    kinds: set[Trigger] = set()
    if isinstance(event, MessageAppended):
        kinds.add("message")
    elif isinstance(event, TimerFired):
        kinds.add("timer")
    elif isinstance(event, ModelResultArrived):
        cycle = state.cycle(event.cycle_id)
        if event.operation == "reflection":
            kinds.add("reflection-result")
        elif cycle is not None:
            kinds.add("buffer-result" if cycle.kind == "buffer" else "sync-result")
    for command in commands:
        if isinstance(command, RequestObservation):
            kinds.add("buffer-start" if command.kind == "buffer" else "sync-start")
        elif isinstance(command, RequestReflection):
            kinds.add("reflection-start")
        elif isinstance(command, ActivateChunks):
            kinds.add("activation")
        elif isinstance(command, CommitGeneration):
            kinds.add("generation")
    return kinds

