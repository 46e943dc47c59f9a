"""What ``data-om-progress`` and ``settled`` promise, checked after every decision the host makes (``Sim.checks``).

1. **the cursor**: a thread's observed messages are exactly those up to its observation cursor (the prefix property
   the progress view stands on);
2. **quiescent means it**: once a decision leaves the record quiescent, no observation work happens (no Observer
   request, no activation, no observation segment) until new input (a message or a command) arrives;
3. **the events say what the state says**: for every message taken in at or before a thread's latest progress
   event, "settled" read from that event (``settledThrough.seq`` reaches the message's seq) is ``settled()`` of the
   record as it stands, after every decision: every change that matters was published;
4. **no event for nothing**: two change events of a thread in a row differ in something a message alone does not
   change, and every event id is new.

A message taken in is new input (seen by the checks); a command is too, and the driver says so
(:meth:`ProgressChecks.new_input`).
"""

from __future__ import annotations

from typing import Any

from om_stream.core.commands import (
    ActivateChunks,
    Command,
    EmitEvent,
    PersistMessage,
    PersistSegment,
    RequestObservation,
)
from om_stream.core.engine import record_key
from om_stream.core.events import ProgressEvent
from om_stream.core.inputs import MessageAppended, ReportProgress
from om_stream.core.messages import Message
from om_stream.core.progress import quiescent, settled
from om_stream.core.state import RecordState
from tests.support.sim import Sim


def _beyond_ingestion(event: ProgressEvent) -> tuple[Any, ...]:
    return (event.observed_through, event.buffered, event.in_flight, event.waiting_for, event.pending,
            event.generation_count)


class ProgressChecks:
    def __init__(self) -> None:
        self.violations: list[str] = []
        self.seqs: dict[str, tuple[str, int]] = {}  # message id -> (thread, seq)
        self.inputs = 0
        self.quiet_at: int | None = None  # the input count when a decision last left the record quiescent
        self.latest: dict[str, ProgressEvent] = {}  # thread -> its latest change event
        self.event_ids: set[str] = set()
        self.decisions = 0

    def new_input(self) -> None:
        self.inputs += 1

    def __call__(self, sim: Sim, before: RecordState, after: RecordState, commands: list[Command]) -> None:
        self.decisions += 1
        if after.msg_seq > before.msg_seq:
            self.new_input()
        for command in commands:
            if isinstance(command, PersistMessage):
                self.seqs[command.message.message_id] = (command.message.thread_id, command.seq)
            elif isinstance(command, EmitEvent):
                self._event(command)
        self._cursor(after)
        self._quiescence(after, commands)
        self._events_agree(after)

    def _event(self, command: EmitEvent) -> None:
        if command.event_id in self.event_ids:
            self.violations.append(f"event id {command.event_id} published twice")
        self.event_ids.add(command.event_id)
        event = command.event
        if isinstance(event, ProgressEvent) and event.request_id is None:
            previous = self.latest.get(event.thread_id)
            if previous is not None and _beyond_ingestion(previous) == _beyond_ingestion(event):
                self.violations.append(f"a progress event of {event.thread_id} changed nothing but ingestion: "
                                       f"{event.model_dump_json(by_alias=True)}")
            self.latest[event.thread_id] = event

    def _cursor(self, state: RecordState) -> None:
        unobserved = {m.id for m in state.unobserved}
        for message_id, (thread_id, seq) in self.seqs.items():
            observed = message_id not in unobserved
            if observed != (seq <= state.threads[thread_id].observed_through_seq):
                self.violations.append(f"{message_id} (seq {seq}) observed={observed} but the cursor of "
                                       f"{thread_id} is {state.threads[thread_id].observed_through_seq}")

    def _quiescence(self, state: RecordState, commands: list[Command]) -> None:
        works = [c for c in commands if isinstance(c, RequestObservation | ActivateChunks)
                 or (isinstance(c, PersistSegment) and c.kind == "observation")]
        if works and self.quiet_at == self.inputs:
            self.violations.append(f"observation work ({type(works[0]).__name__}) with no new input since the "
                                   f"record was quiescent")
        self.quiet_at = self.inputs if quiescent(state) else None

    def _events_agree(self, state: RecordState) -> None:
        for thread_id, event in self.latest.items():
            if event.latest_message is None or thread_id not in state.threads:
                continue
            for message_id, (owner, seq) in self.seqs.items():
                if owner != thread_id or seq > event.latest_message.seq:
                    continue
                told = event.settled_through is not None and seq <= event.settled_through.seq
                actual = settled(state, thread_id, message_id, stored_seq=seq)
                if told != actual:
                    self.violations.append(f"the latest progress event of {thread_id} says settled={told} through "
                                           f"{message_id} (seq {seq}); the record says {actual}")


def feed(sim: Sim, message: Message) -> None:
    """A message through the host, at its own time."""
    sim.run_until(max(sim.now, message.created_at_ms))
    sim.apply(record_key(sim.config.scope, message.thread_id, message.resource_id), message.resource_id,
              MessageAppended(message))


def ask(sim: Sim, thread_id: str, message_id: str | None, *, resource: str = "r1") -> ProgressEvent:
    """A progress question through the host; the answer it published (the record left as it was)."""
    key = record_key(sim.config.scope, thread_id, resource)
    before = sim.states.get(key)
    request = f"q{len(sim.events)}"
    commands = sim.apply(key, resource, ReportProgress(thread_id, request, message_id))
    answers = [c.event for c in commands if isinstance(c, EmitEvent) and isinstance(c.event, ProgressEvent)]
    assert len(commands) == 1 and len(answers) == 1, commands
    assert sim.states.get(key) is before, "a question changed the record"
    answer = answers[0]
    assert answer.request_id == request and answer.through is not None
    return answer
