"""Per-record control state: small, serialisable, and everything ``decide`` needs to apply OM's rules.

A record is a thread (scope ``thread``) or a resource (scope ``resource``). Content (message bodies, observation
text) lives in the content store and is referenced by id; this state holds ids, token counts and times, so the
Faust table and its changelog stay cheap (a few KB per thread).

Vocabulary:
* ``unobserved`` - messages after the observation cursor, in arrival order (``seq``).
* ``buffered`` - observation chunks computed in the background, each covering a contiguous run of the oldest
  unobserved messages, waiting for activation.
* ``log`` - the active observation log of the current generation, as ordered segments (activated chunks, sync
  observations, and at most one leading reflection).
* ``cycles`` - Observer/Reflector calls in flight.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Literal

from om_stream.core.messages import PromptCacheRetention

__all__ = [
    "BufferedReflection",
    "ChunkRef",
    "Cycle",
    "MessageRef",
    "RecordState",
    "SegmentRef",
    "ThreadState",
]

CycleKind = Literal["buffer", "sync", "manual"]
Operation = Literal["observation", "reflection"]
Trigger = Literal["turn-sync", "async-buffer", "manual"]


@dataclass(frozen=True, slots=True)
class MessageRef:
    id: str
    thread_id: str
    seq: int
    created_at: int
    tokens: int
    role: str
    safe_cut: bool  # no tool call is left without its result after this message: a boundary may fall here


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """A buffered observation chunk: its text is stored under ``id``; it covers messages first_seq..last_seq."""

    id: str
    cycle_id: str
    first_seq: int
    last_seq: int
    first_message_id: str
    last_message_id: str
    message_count: int
    message_tokens: int
    tokens: int
    last_message_at: int
    buffered_at: int
    thread_ids: tuple[str, ...]
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    dated_from: int = 0  # when its oldest entry starts (``core.retention``); 0: not known yet (the next purge reads it)


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """One piece of the active observation log (text stored under ``id``)."""

    id: str
    tokens: int
    kind: Literal["observation", "reflection"]
    boundary_at: int  # time of the newest message it covers: the "message boundary" of the context
    first_message_id: str
    last_message_id: str
    message_count: int
    thread_ids: tuple[str, ...]
    dated_from: int = 0  # when its oldest entry starts (``core.retention``); 0: not known yet (the next purge reads it)


@dataclass(frozen=True, slots=True)
class Cycle:
    id: str
    kind: CycleKind
    operation: Operation
    trigger: Trigger
    attempt: int
    started_at: int
    deadline_at: int
    tokens: int  # tokens handed to the model: message tokens (observation) or observation tokens (reflection)
    message_ids: tuple[str, ...] = ()
    last_seq: int = -1  # observation: newest message covered
    thread_ids: tuple[str, ...] = ()
    generation: int = 0  # reflection: generation it was computed from
    covers: int = 0  # reflection: number of leading log segments it replaces
    blocking: bool = False  # the context waits for this cycle
    fallback: bool = False  # served by the offline model because every configured model failed
    guidance: str | None = None


@dataclass(frozen=True, slots=True)
class BufferedReflection:
    id: str
    cycle_id: str
    generation: int
    covers: int
    input_tokens: int
    tokens: int
    buffered_at: int
    dated_from: int = 0  # when its oldest entry starts (``core.retention``)


@dataclass(slots=True)
class ThreadState:
    """What a record knows per thread: hints, title, the current turn."""

    thread_id: str
    title: str | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    # the current turn's user message: raw in the context while the turn is open, even once observed (the agent's
    # model is answering it); once the agent's reply ends the turn (``turn_answered``), an observed one is not
    turn_message: MessageRef | None = None
    turn_answered: bool = False
    observed_through_seq: int = -1  # the observation cursor of this thread (never moves backwards)
    open_tool_calls: list[str] = field(default_factory=list)  # tool calls still waiting for their result
    step_number: int = 0
    last_message_id: str | None = None
    last_message_at: int | None = None
    # retention: the oldest message the thread's derived metadata (title, hints, extracted values, working memory)
    # was written from; when it passes the window all of it goes, and the next observation writes it afresh
    derived_from: int | None = None


def _shallow(obj: Any) -> Any:
    """A shallow copy of a slots dataclass, several times faster than ``copy.copy`` (which pickles)."""
    cls = type(obj)
    new = object.__new__(cls)
    for name in cls.__slots__:
        object.__setattr__(new, name, getattr(obj, name))
    return new


def _plain(value: Any) -> dict[str, Any]:
    """A flat slots dataclass as a dict (tuples become lists in JSON anyway)."""
    return {name: getattr(value, name) for name in type(value).__slots__}


# a message reference is written to the table as a positional list (the fields of MessageRef, in order): the
# unobserved list is the one part of the state that grows, and a list is half the bytes of an object and much
# faster to encode; references written as objects (older changelogs) are still read
_MESSAGE_ROW = attrgetter(*MessageRef.__slots__)


def _message_ref(raw: list[Any] | tuple[Any, ...] | dict[str, Any]) -> MessageRef:
    return MessageRef(**raw) if isinstance(raw, dict) else MessageRef(*raw)


def _copy_thread(thread: ThreadState) -> ThreadState:
    new: ThreadState = _shallow(thread)
    new.open_tool_calls = list(thread.open_tool_calls)
    return new


@dataclass(slots=True)
class RecordState:
    key: str
    scope: Literal["thread", "resource"]
    resource_id: str
    epoch: int = 0  # bumped by clear: ids of a cleared record are never reused
    id_seq: int = 0
    msg_seq: int = 0
    unobserved: list[MessageRef] = field(default_factory=list)
    unobserved_tokens: int = 0
    buffered: list[ChunkRef] = field(default_factory=list)
    log: list[SegmentRef] = field(default_factory=list)
    log_tokens: int = 0
    generation: int = 0
    buffered_reflection: BufferedReflection | None = None
    cycles: list[Cycle] = field(default_factory=list)
    last_buffered_at_tokens: int = 0
    buffer_failures: int = 0
    buffer_retry_at: int | None = None
    reflection_hold_tokens: int | None = None  # no automatic reflection until the log grows past this
    reflection_failures: int = 0
    unproductive_reflections: int = 0  # configured-Reflector cycles in a row that failed or had to be condensed
    offline_reflection_failed: bool = False  # the last reflection that failed was the offline one (the last resort)
    last_assistant_at: int | None = None
    last_actor_model: str | None = None
    last_actor_cache_retention: PromptCacheRetention | None = None  # the actor's OpenAI prompt-cache retention
    threads: dict[str, ThreadState] = field(default_factory=dict)
    recent_ids: list[str] = field(default_factory=list)  # recently appended message ids (duplicate detection)
    context_version: int = 0
    owed_threads: list[str] = field(default_factory=list)  # contexts owed to agents once nothing blocks them
    manual_observe_pending: bool = False
    observe_failures: int = 0
    override_message_tokens: int | None = None
    override_observation_tokens: int | None = None
    override_retention_days: int | None = None  # a shorter retention window than the deployment's (``core.expiry``)
    timers: dict[str, int] = field(default_factory=dict)  # "kind:ref" -> due time (ms)
    total_observed_messages: int = 0

    @property
    def record_id(self) -> str:
        return f"{self.scope}:{self.key}"

    @property
    def holds_conversation(self) -> bool:
        """A message reached this record. A record only commands touched holds none: it is no thread's memory."""
        return bool(self.threads)

    def clone(self) -> RecordState:
        """A copy ``decide`` may change freely: the caller's state is never mutated.

        Containers are copied; the frozen values inside them are shared (they are replaced, never changed).
        """
        new: RecordState = _shallow(self)
        new.unobserved = list(self.unobserved)
        new.buffered = list(self.buffered)
        new.log = list(self.log)
        new.cycles = list(self.cycles)
        new.recent_ids = list(self.recent_ids)
        new.timers = dict(self.timers)
        new.owed_threads = list(self.owed_threads)
        new.threads = {tid: _copy_thread(thread) for tid, thread in self.threads.items()}
        return new

    def cycle(self, cycle_id: str) -> Cycle | None:
        return next((c for c in self.cycles if c.id == cycle_id), None)

    def in_flight(self, operation: Operation, kind: CycleKind | None = None) -> list[Cycle]:
        return [c for c in self.cycles if c.operation == operation and (kind is None or c.kind == kind)]

    def blocking_cycle(self) -> Cycle | None:
        return next((c for c in self.cycles if c.blocking), None)

    # -- serialisation for the table store: plain JSON-compatible dicts ---------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible. Written by hand: ``dataclasses.asdict`` deep-copies every value and costs ~2 ms on a
        busy record, once per input."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _SCALARS}
        out["unobserved"] = [_MESSAGE_ROW(m) for m in self.unobserved]
        out["buffered"] = [_plain(c) for c in self.buffered]
        out["log"] = [_plain(s) for s in self.log]
        out["cycles"] = [_plain(c) for c in self.cycles]
        out["buffered_reflection"] = _plain(self.buffered_reflection) if self.buffered_reflection else None
        out["threads"] = {tid: {**_plain(t), "turn_message": _plain(t.turn_message) if t.turn_message else None,
                                "open_tool_calls": list(t.open_tool_calls)} for tid, t in self.threads.items()}
        out["recent_ids"] = list(self.recent_ids)
        out["timers"] = dict(self.timers)
        out["owed_threads"] = list(self.owed_threads)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordState:
        values = dict(data)
        values["unobserved"] = [_message_ref(m) for m in values.get("unobserved", [])]
        values["buffered"] = [ChunkRef(**{**c, "thread_ids": tuple(c["thread_ids"])})
                              for c in values.get("buffered", [])]
        values["log"] = [SegmentRef(**{**s, "thread_ids": tuple(s["thread_ids"])}) for s in values.get("log", [])]
        values["cycles"] = [Cycle(**{**c, "message_ids": tuple(c["message_ids"]), "thread_ids": tuple(c["thread_ids"])})
                            for c in values.get("cycles", [])]
        if values.get("buffered_reflection"):
            values["buffered_reflection"] = BufferedReflection(**values["buffered_reflection"])
        threads = {}
        for tid, raw in values.get("threads", {}).items():
            thread = dict(raw)
            if thread.get("turn_message"):
                thread["turn_message"] = _message_ref(thread["turn_message"])
            threads[tid] = ThreadState(**{k: v for k, v in thread.items() if k in _THREAD_FIELDS})
        values["threads"] = threads
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


_CONTAINERS = {"unobserved", "buffered", "log", "cycles", "buffered_reflection", "threads", "recent_ids", "timers",
               "owed_threads"}
_SCALARS = tuple(f.name for f in fields(RecordState) if f.name not in _CONTAINERS)
_THREAD_FIELDS = frozenset(ThreadState.__slots__)  # a state written by a newer version may hold fields not known here
