"""The small pieces ``Memory`` is assembled from: what it knows of each thread's contexts and their waiters, its
state table (the states in a dict), its timers (a wheel that
wakes the timer loop), the check of an id the wire contract would refuse, the recall service its options ask
for, and the models its cycles call."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from om_stream.adapters.qdrant_index import QdrantRecallIndex
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.commands import ContextSpec
from om_stream.core.config import ResolvedConfig
from om_stream.core.state import RecordState
from om_stream.errors import InputRejected
from om_stream.observability.model_metrics import MeteredModel
from om_stream.observability.model_spans import ModelCallSpans
from om_stream.observability.tracing import Tracing
from om_stream.ports import ChatModel, Clock, ContentStore, Embedder, RecallIndex, RecallStore
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.named_model import serving_model
from om_stream.runtime.recall_retention import RecallRetention
from om_stream.runtime.recall_service import RecallService
from om_stream.runtime.timers import TimerWheel
from om_stream.wire.context import ContextRecord

__all__ = ["MAX_ID_LENGTH", "PublishedThread", "StatesTable", "Waiter", "WakingTimers", "check_id", "cycle_models",
           "recall_service_for"]

MAX_ID_LENGTH = 256  # thread and resource ids, as in messages and om.command/v1


@dataclass
class Waiter:
    """A caller of ``add_message`` waiting for the context that includes its message (``seq``)."""

    seq: int
    future: asyncio.Future[ContextRecord]


@dataclass
class PublishedThread:
    """What the embedded runner knows of one thread's contexts: the latest published, and who waits for one."""

    published_seq: int = -1
    spec: ContextSpec | None = None  # the latest published context, rendered only when someone reads it
    rendered: ContextRecord | None = None
    waiters: list[Waiter] = field(default_factory=list)
    # message id -> seq of the thread's messages no published context includes yet (a caller may wait for them)
    unpublished: dict[str, int] = field(default_factory=dict)


class StatesTable:
    """The embedded state table: the states in memory."""

    def __init__(self, states: dict[str, RecordState]) -> None:
        self.states = states

    def get(self, arrival: Arrival[None]) -> RecordState | None:
        return self.states.get(arrival.key)

    def set(self, arrival: Arrival[None], state: RecordState) -> None:
        self.states[arrival.key] = state


class WakingTimers:
    """The records' timers in a wheel; a new one wakes the timer loop (it may be due before the one it sleeps to)."""

    def __init__(self, wheel: TimerWheel, wakeup: asyncio.Event) -> None:
        self.wheel = wheel
        self.wakeup = wakeup

    def track(self, key: str, timers: Mapping[str, int]) -> None:
        self.wheel.track(key, timers)
        self.wakeup.set()


def check_id(name: str, value: object) -> None:
    """Refuse what the wire contract refuses (``om.command/v1``): an empty or overlong thread or resource id."""
    if not isinstance(value, str) or not value:
        raise InputRejected("invalid_fields", f"{name} must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID_LENGTH:
        raise InputRejected("invalid_fields", f"{name} is {len(value)} characters long; at most {MAX_ID_LENGTH}")


def recall_service_for(store: ContentStore, config: ResolvedConfig, counter: TiktokenCounter,
                       embedder: Embedder | None, index: RecallIndex | None, clock: Clock) -> RecallService | None:
    """The recall service the options ask for: none on a store recall cannot read, search only with an embedder and
    ``retrieval.vector``."""
    if not isinstance(store, RecallStore):
        return None
    retention = RecallRetention(config.retention_ms, config.scope, clock.now_ms)
    if embedder is None or config.retrieval is None or not config.retrieval.vector:
        return RecallService(store, counter.count, retention=retention)
    return RecallService(store, counter.count, embedder=embedder, retention=retention,
                         index=index or QdrantRecallIndex(embedder.model_id, embedder.dimension))


def cycle_models(model: object, offline: ChatModel, config: ResolvedConfig,
                 tracing: Tracing) -> tuple[ChatModel, ChatModel]:
    """The offline model and the model the cycles call (the offline one when none is given or named). Traced, each
    model call is a span in its cycle's trace: the gateway reports its attempts to its observers, any other model
    is wrapped (as the worker's models are)."""
    calls = ModelCallSpans(tracing) if tracing.enabled else None
    metered: ChatModel = MeteredModel(offline, calls) if calls is not None else offline
    served = serving_model(model, config, observers=[calls] if calls is not None else [])
    if served is None:
        return metered, metered
    if calls is not None and served is model:  # the application's own ChatModel: no gateway reports it
        return metered, MeteredModel(served, calls)
    return metered, served
