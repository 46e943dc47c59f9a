"""A deterministic model of the Kafka worker around the real ``Host``, to kill it or take its partition away at any
phase of the commit order and check what its agents end up with.

What is modelled, and how it maps onto the worker (``runtime/worker/``):

* **Durable**: the input logs (``messages``, and ``results``, which carries model results and timers like the
  internal results topic), the model-requests log, the contexts agents read (``om.context``), the state table's
  changelog (the newest state per record), the committed input offsets, and the content store (the in-memory twin
  of Cassandra, shared by every worker).
* **A worker's life** (``tests.support.crash_worker.Life``): the table it recovered from the changelog, its timers
  rebuilt from it and a ``resend`` for every cycle in flight (as ``TakeOver`` in ``runtime/worker/handover.py`` does
  after a rebalance), the offsets it read and handled, its content cache and its producer's queue. Nothing queued is
  durable until it is flushed. The changelog, the requests, the timers and each thread's contexts are separate streams
  (topic partitions) of the queue, and Faust sends table writes through a buffer of its own: a kill leaves any prefix
  of each stream out, independently of the others.
* **A batch**: records read from both input logs (in the order they were appended, or interleaved at random: the
  brokers keep no order between topics), handed to ``Host.apply`` with the worker's ``may_commit``. Its records
  then count as handled; the producer sends on its own, and every so often the ledger flushes it and commits the
  handled offsets.
* **The model workers**: answer each request from the result stored under its key (``model_calls.request_key``)
  or compute one (observations name each message once; a reflection names, on one line, every message its
  segments named), store it and append it to the results log. A call may be lost (``lost_chance``: a model worker
  died in it), but not its last attempt: its deadline timer asks again. Whether a call is lost and how long it
  takes depend on the call only, so every run of a seed meets the same model.
* **Agents**: each thread publishes its next message once a context through its previous one is out (read your
  writes). A patient agent also waits until its record has nothing in flight, which fixes the order of its
  record's inputs: runs with patient agents and ordered logs must end alike, whatever befell the worker.

A ``Fault`` kills the worker (``sigkill``: what was not durable is lost) or hands its partition to a new owner
(``rebalance``: the batch in hand is fenced if it had not written its states yet, then the old owner commits what
it handled) at one phase of the commit order, in the n-th batch doing a given kind of work. The new life recovers
from the changelog and reads again from the committed offsets.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.engine import decide, new_record
from om_stream.core.inputs import Input, MessageAppended, ModelResultArrived
from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.internal_codec import decode_internal, encode_internal
from om_stream.runtime.worker.model_calls import request_key
from om_stream.wire.context import ContextRecord
from tests.support.crash_worker import (
    PHASES,
    TRIGGERS,
    Armed,
    Crash,
    Fault,
    FaultKind,
    Life,
    LogRecord,
    Phase,
    Trigger,
    WatchedStore,
    agent_view,
    covered,
    message_ids_in,
    word_count,
    work_done,
)

__all__ = ["PHASES", "TRIGGERS", "Fault", "FaultKind", "Phase", "Trigger", "World", "agent_view"]

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
_FOLDED = re.compile(r"earlier observations? folded")  # core.condensation's marker line


@dataclass(frozen=True)
class _Said:
    """One message of a thread's script."""

    role: str
    words: int
    think_ms: int
    calls: tuple[str, ...] = ()
    results: tuple[str, ...] = ()


def script(seed: int, thread: str, turns: int) -> list[_Said]:
    """A thread's conversation: ``turns`` turns, each a user message, sometimes a tool call and its result, and
    the assistant's reply (so every turn, the last included, is answered). The same for a seed whatever befalls
    the run."""
    rng = random.Random(f"{seed}/{thread}")
    said: list[_Said] = []
    for turn in range(turns):
        said.append(_Said("user", rng.randint(3, 9), rng.randint(200, 3_000)))
        if rng.random() < 0.25:
            call = f"{thread}-c{turn}"
            said.append(_Said("assistant", rng.randint(2, 5), rng.randint(100, 800), calls=(call,)))
            said.append(_Said("tool", rng.randint(4, 12), rng.randint(100, 800), results=(call,)))
        said.append(_Said("assistant", rng.randint(3, 9), rng.randint(200, 3_000)))
    return said


@dataclass
class World:
    """Threads of a conversation through one partition whose owner may be killed or replaced."""

    options: dict[str, Any]
    threads: int = 3
    turns: int = 10
    seed: int = 0
    faults: Sequence[Fault] = ()
    interleave: Literal["ordered", "shuffled"] = "ordered"
    patient: bool = True  # an agent also waits until its record has nothing in flight before its next message
    batch_max: int = 6
    commit_chance: float = 0.3
    flush_chance: float = 0.7
    lost_chance: float = 0.0  # share of model calls whose answer never comes (a model worker died in them)
    # how long a killed worker's partition waits for its next owner (session timeout, the table's recovery): time
    # that moves the rules that read the clock (back-offs, deadlines)
    recovery_ms: int = 10_000
    limits: EngineLimits = field(default_factory=EngineLimits)
    now: int = int(START.timestamp() * 1000)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.config: ResolvedConfig = OMConfig.parse(self.options).resolve()
        self.accountant = TokenAccountant(word_count, message_overhead=1, conversation_overhead=0)
        self.store = WatchedStore()
        self.logs: dict[str, list[LogRecord]] = {"messages": [], "results": []}
        self.requests: list[RequestObservation | RequestReflection] = []
        self.answered = 0  # requests the model workers have taken
        self.changelog: dict[str, RecordState] = {}
        self.committed = {"messages": 0, "results": 0}
        self.contexts: dict[str, list[ContextRecord]] = {}
        # every context any life rendered, published or not: (thread, version) -> what it held
        self.decided: dict[tuple[str, int], set[str]] = {}
        self.scripts = {f"t{n}": script(self.seed, f"t{n}", self.turns) for n in range(self.threads)}
        self.sent: dict[str, int] = dict.fromkeys(self.scripts, 0)
        self.faults_left = list(self.faults)
        self.seen: Counter[Trigger] = Counter()  # batches per kind of work
        self.struck: list[Fault] = []
        self.lives = 1
        self._tie = 0
        self._loop = asyncio.new_event_loop()
        self.life = Life(self)

    def close(self) -> None:
        self._loop.close()

    # -- plumbing ------------------------------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.now

    def run(self, work: Any) -> Any:
        return self._loop.run_until_complete(work)

    def append(self, topic: str, key: str, resource_id: str, event: Input) -> None:
        self._tie += 1
        log = self.logs[topic]
        log.append(LogRecord(len(log), key, resource_id, event, self.now, self._tie))

    def published(self, context: ContextRecord) -> None:
        self.contexts.setdefault(context.thread_id, []).append(context)

    # -- faults --------------------------------------------------------------------------------------------------

    def arm(self, life: Life, arrivals: list[Arrival]) -> Armed | None:
        """The fault for this batch, if it is the n-th batch doing the work the next fault waits for."""
        if not self.faults_left:
            return None
        kinds, writes, states = self._foresee(life, arrivals)
        self.seen.update(kinds)
        fault = self.faults_left[0]
        if fault.trigger not in kinds or self.seen[fault.trigger] < fault.occurrence:
            return None
        self.struck.append(self.faults_left.pop(0))
        return Armed(fault, writes, states)

    def _foresee(self, life: Life, arrivals: list[Arrival]) -> tuple[set[Trigger], int, int]:
        """What the batch will do (``decide`` is pure: the host will decide the same): its kinds of work, its
        store writes and how many states it will write."""
        held: dict[str, RecordState] = {}
        kinds: set[Trigger] = set()
        writes = 0
        for arrival in arrivals:
            state = held.get(arrival.key) or life.table.get(arrival.key)
            if state is None:
                if not arrival.resource_id:
                    continue
                state = new_record(arrival.key, self.config.scope, arrival.resource_id)
            decision = decide(state, arrival.input, self.now, self.config, self.accountant, self.limits)
            held[arrival.key] = decision.state
            kinds |= work_done(state, arrival.input, decision.commands)
            writes += sum(1 for c in decision.commands if c.phase == 1)
        return kinds, writes, len(held)

    def hand_over(self, life: Life) -> None:
        """A rebalance: the batch in hand is done or fenced; the old owner commits what it handled (its producer
        flushed first) and a new owner recovers the partition from the changelog."""
        life.commit()
        self._new_life()

    def crashed(self) -> None:
        """A kill: each stream keeps what had left the process; the rest of the life is gone."""
        self.life.queue.kill(self.rng)
        self.now += self.recovery_ms
        self._new_life()

    def _new_life(self) -> None:
        self.lives += 1
        self.life = Life(self)

    # -- the world's moves ---------------------------------------------------------------------------------------

    def play(self, max_steps: int = 100_000) -> World:
        """Run until every thread has said everything and nothing is left to do."""
        for _ in range(max_steps):
            if not self._step():
                return self
        raise AssertionError("the world did not settle")

    def _step(self) -> bool:
        """One move: a patient world handles every input and answers every request before an agent speaks; an
        impatient one makes any move it can."""
        life = self.life
        moves: list[Callable[[], None]] = []
        if life.unread():
            moves.append(self._batch)
        if self.answered < len(self.requests):
            moves.append(self._answer_next)
        ready = [t for t in self.scripts if self._may_speak(t)]
        if ready:
            moves.append(lambda: self._speak(self.rng.choice(ready)))
        if moves:
            (moves[0] if self.patient else self.rng.choice(moves))()
            return True
        if life.fire_timers():
            return True
        if life.queue.streams:
            life.commit()
            return True
        due = life.timers.next_due()
        if due is not None:
            self.now = max(self.now, due)
            return True
        return False

    def _batch(self) -> None:
        try:
            self.life.run_batch()
        except Crash:
            self.crashed()

    def _may_speak(self, thread: str) -> bool:
        count = self.sent[thread]
        if count >= len(self.scripts[thread]):
            return False
        if count and not any(c.through_message_id == f"{thread}-m{count - 1}" for c in self.contexts.get(thread, [])):
            return False  # read your writes: the agent waits for the context through its last message
        if self.patient:  # and it thinks until its record's background work is done
            state = self.life.table.get(thread)
            if state is not None and (state.cycles or state.owed_threads):
                return False
        return True

    def _speak(self, thread: str) -> None:
        index = self.sent[thread]
        said = self.scripts[thread][index]
        self.sent[thread] = index + 1
        self.now += said.think_ms
        parts: list[Any] = [TextPart(text=f"{thread}-m{index} " + " ".join(["word"] * said.words))]
        parts += [ToolCallPart(tool_call_id=c, tool_name="search", args={"q": "x"}) for c in said.calls]
        parts += [ToolResultPart(tool_call_id=c, tool_name="search", result="found") for c in said.results]
        message = Message(message_id=f"{thread}-m{index}", thread_id=thread, resource_id=f"user-{thread}",
                          role=said.role, created_at=START + timedelta(seconds=30 * index),
                          parts=tuple(parts))
        self.append("messages", thread, f"user-{thread}", MessageAppended(message))

    def _answer_next(self) -> None:
        request = self.requests[self.answered]
        self.answered += 1
        # the same for the same call in every run of a seed (ids are no part of it: the model does not read them)
        covers = request.message_ids if isinstance(request, RequestObservation) else (str(request.input_tokens),)
        fate = random.Random(f"{self.seed}/{request.kind}/{request.attempt}/{'/'.join(covers)}")
        if fate.random() < self.lost_chance and not request.use_offline_model \
                and request.attempt < self.limits.max_cycle_attempts:
            # its deadline asks again (the offline model answers a blocking cycle that waited too long); the last
            # attempt is answered, or a call that fails alike each time would be retried for ever
            return
        key = request_key(request)
        stored = self.run(self.store.get_result(key))
        if stored is None:
            result = self._model(request)
            self.run(self.store.put_result(key, encode_internal(result), record_key=request.record_key))
        else:
            answer = decode_internal(stored)
            assert isinstance(answer, ModelResultArrived)
            result = answer
        self.now += fate.randint(50, 1_500)
        self.append("results", request.record_key, "", result)

    def _model(self, request: RequestObservation | RequestReflection) -> ModelResultArrived:
        if isinstance(request, RequestObservation):
            text = "\n".join(f"* observed {mid}" for mid in request.message_ids)
            return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation="observation",
                                      ok=True, observations=text, current_task=f"task after {request.message_ids[-1]}")
        texts = self.run(self.store.get_segment_texts(request.segment_ids))
        named = [mid for sid in request.segment_ids for mid in message_ids_in(texts.get(sid, ""))]
        return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation="reflection",
                                  ok=True, observations="* reflected " + " ".join(named))

    # -- what agents have ----------------------------------------------------------------------------------------

    def finals(self) -> dict[str, ContextRecord]:
        """Each thread's context as its agent holds it at the end: the newest version it read."""
        return {thread: max(seen, key=lambda c: c.version) for thread, seen in self.contexts.items()}

    def problems(self) -> list[str]:
        """What an agent would notice, per thread: its final context holding a message of the conversation other
        than once, a context that takes it back (an agent keeps the newest version it read: a newer one that lacks
        a message the one it kept held), a message its context never came through; and, when the logs are read in
        the order they were written, a version that named two contents (whichever life decided them: read in
        another order, a replay onto a state older than what went out may decide otherwise, see
        docs/architecture.md).

        A log over its bound (the models did not answer in time) is condensed as it is rendered: some observations
        are folded into a marker line, by design. Such a context may lack messages, never hold one twice."""
        found = []
        for thread, said in self.scripts.items():
            seen = self.contexts.get(thread, [])
            if self.sent[thread] < len(said) or not seen:
                found.append(f"{thread}: stalled after {self.sent[thread]} of {len(said)} messages")
                continue
            final = max(seen, key=lambda c: c.version)
            counts = Counter(covered(final))
            wanted = range(2) if _FOLDED.search(final.observations) else range(1, 2)
            wrong = {f"{thread}-m{i}": counts[f"{thread}-m{i}"] for i in range(len(said))
                     if counts[f"{thread}-m{i}"] not in wanted}
            if wrong:
                found.append(f"{thread}: final context v{final.version} holds messages other than once: {wrong}")
            kept = seen[0]
            for context in seen[1:]:
                if context.version > kept.version:
                    lacking = set(covered(kept)) - set(covered(context))
                    if lacking and not _FOLDED.search(context.observations):
                        found.append(f"{thread}: v{context.version} lacks what v{kept.version} held: {sorted(lacking)}")
                    kept = context
        if self.interleave == "ordered":
            found += [f"{thread}: v{version} named two contents" for (thread, version), views in self.decided.items()
                      if len(views) > 1]
        return found


