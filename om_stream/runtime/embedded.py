"""The embedded runner: Observational Memory in-process, for Python agents that need no Kafka.

Same core, same commit order as the Kafka sidecar, driven by asyncio::

    async with Memory({"observation": {"messageTokens": 20_000}}) as om:
        context = await om.add_message(message)       # the context to send to the model next
        ...

It drives the same ``Host`` as the Kafka worker (``runtime/host.py``: one ``decide`` and one commit order), one
input at a time per record (thread, or resource in resource scope). Its state table is a dict; its outlet hands
events to listeners and contexts to the callers waiting for them, and runs Observer and Reflector calls as
background tasks whose results come back as inputs; the records' timers (their state holds them) are fired by a
background task on the real clock, or by ``advance_to`` on a manual clock (replays). A store error reaches the
caller: the embedded runner does not retry through outages.

What it keeps in process grows with the records it holds (their states and latest contexts), never with the
messages that went through: a message's sequence is kept only until a context that includes it is published, a
record's lock only while an input of the record runs or waits, and ``rejections`` holds the latest
``REJECTIONS_KEPT`` refusals (``rejected`` counts them all). Traced, it also keeps the ingest spans of the newest
``MESSAGE_SPANS_KEPT`` messages, which a cycle links to.

**Tracing** (``Memory(tracing=Tracing.from_provider(provider))``, off by default, on the application's own
provider): each input applied (a message, a command, a model result, a timer) runs in an ``om.ingest`` span, a child
of the caller's current span, with the host's ``om.decide`` / ``om.store write`` / ``delete_memory`` spans under it.
A cycle's ``om.observe`` / ``om.reflect`` span is a child of the ingest span of the input that asked for it,
linked to the ingest spans of the messages it covers, its model calls are its children, and its result's ingest
span continues its trace. A timer fired by the real clock starts a trace of its own. The spans are the Kafka
worker's (``runtime/ingest_spans``, ``runtime/cycle_traces``, ``observability/model_spans``), under the same rules:
no content unless opted in, ids only hashed when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any, Literal

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, get_current_span, set_span_in_context

from om_stream.adapters.offline_model import OfflineModel
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.commands import (
    ActivateChunks,
    EmitEvent,
    PersistMessage,
    PublishContext,
    RejectInput,
    RequestObservation,
    RequestReflection,
)
from om_stream.core.config import OMConfig, RetrievalConfig
from om_stream.core.engine import new_record, record_config, record_key
from om_stream.core.erasure import EraseRequested, ErasureInput
from om_stream.core.error_text import cut_error, error_text
from om_stream.core.events import ErasedEvent, OMEvent, ProgressEvent
from om_stream.core.inputs import (
    ClearRecord,
    Input,
    MessageAppended,
    ModelResultArrived,
    ObserveNow,
    OverrideThresholds,
    ReflectNow,
    RestoreRecord,
)
from om_stream.core.messages import Message
from om_stream.core.model_spec import ModelSpec
from om_stream.core.progress import progress_event
from om_stream.core.recall.params import RecallArguments, RecallScope
from om_stream.core.recall.results import RecallResult
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.core.views import context_spec, narrowed
from om_stream.errors import InputRejected, OMError, RecallError, StorageError
from om_stream.observability.tracing import Tracing
from om_stream.ports import (
    ChatModel,
    Clock,
    ContentStore,
    Embedder,
    ExportSource,
    RecallIndex,
    RecallPointSource,
    RetryingModel,
)
from om_stream.runtime.clock import ManualClock, SystemClock
from om_stream.runtime.cycle_traces import CycleTraces
from om_stream.runtime.cycles import CycleRunner, CycleStats
from om_stream.runtime.effects import Effects
from om_stream.runtime.embedded_background import BackgroundWork, RecallIndexWork
from om_stream.runtime.embedded_erasure import EmbeddedErasures
from om_stream.runtime.embedded_outlet import EmbeddedOutlet
from om_stream.runtime.embedded_parts import (
    PublishedThread,
    StatesTable,
    Waiter,
    WakingTimers,
    check_id,
    cycle_models,
    recall_service_for,
)
from om_stream.runtime.exporter import ExportRetention, ExportSpec, HeldStates, export_lines
from om_stream.runtime.host import Host
from om_stream.runtime.host_ports import Arrival, Decided
from om_stream.runtime.importer import AppliedRestorer, ImportReport, RecallTarget, import_lines
from om_stream.runtime.ingest_spans import MessageSpans, describe_input
from om_stream.runtime.named_model import named_model_options
from om_stream.runtime.record_locks import RecordLocks
from om_stream.runtime.settled import StateWatch, wait_settled
from om_stream.runtime.spans import failed, traced
from om_stream.runtime.timers import TimerWheel
from om_stream.wire.context import ContextRecord

__all__ = ["ManualClock", "Memory", "SystemClock"]

log = logging.getLogger(__name__)
REJECTIONS_KEPT = 1000  # the latest refusals kept for inspection (``Memory.rejections``)
EventListener = Callable[[OMEvent, str], Awaitable[None] | None]


class Memory:
    """Observational Memory for one process. Use as an async context manager."""

    def __init__(self, config: OMConfig | Mapping[str, Any] | bool | None = None, *,
                 store: ContentStore | None = None, model: ChatModel | ModelSpec | None = None,
                 offline: ChatModel | None = None, clock: Clock | None = None,
                 limits: EngineLimits | None = None, on_event: EventListener | None = None,
                 embedder: Embedder | None = None, index: RecallIndex | None = None,
                 retention_days: int | None = None, tracing: Tracing | None = None) -> None:
        """``store``: where messages and observations live (default: SQLite in memory; give
        ``SqliteContentStore("om.db")`` to keep them). With ``retrieval`` in the options the recall tool reads that
        store (``recall()``); semantic search also needs an ``embedder`` (the index defaults to Qdrant in memory).
        ``retention_days``: messages created, and observation entries dated, longer ago are left out of every
        context, recall result and event, then purged from the store and the index (``core.expiry``; a thread may
        shorten it, ``override(retention_days=)``). ``model``: a ``ChatModel``, or a model as the options name one
        (a name, ``ModelByInputTokens``, a fallback list: then the Observer's and the Reflector's, through the model
        gateway); without it the offline model serves. ``tracing``: spans on the application's provider
        (``Tracing.from_provider``); off by default, and then no span work is done at all."""
        self.options = named_model_options(OMConfig.parse(config), model)
        self.config = self.options.resolve().with_retention(retention_days)
        self.counter = TiktokenCounter(self.config.token_encoding)
        self.accountant = TokenAccountant(self.counter.count)
        self.store: ContentStore = store or SqliteContentStore(":memory:")
        self._owns_store = store is None  # a store the caller gave stays open for the caller
        self.clock: Clock = clock or SystemClock()
        self.recall_service = recall_service_for(self.store, self.config, self.counter, embedder, index, self.clock)
        self.tracing = tracing or Tracing.off()
        self.message_spans = MessageSpans()  # the ingest spans a cycle links to (filled only when tracing)
        self.cycle_traces = CycleTraces(self.tracing, SpanKind.INTERNAL)
        self.offline, self.model = cycle_models(model, offline or OfflineModel(self.counter.count), self.config,
                                                self.tracing)
        self.limits = limits or EngineLimits()
        self.stats = CycleStats()
        self.effects = Effects(self.store, self.config, count_text=self.counter.count,
                               search_available=self._indexing)
        self.runner = CycleRunner(store=self.store, model=self.model, offline=self.offline, config=self.config,
                                  count_text=self.counter.count, stats=self.stats)
        self.listeners: list[EventListener] = [on_event] if on_event else []
        self.events_by_type: dict[str, int] = {}
        self.rejections: deque[RejectInput] = deque(maxlen=REJECTIONS_KEPT)  # the latest; ``rejected``: how many
        self.rejected = 0
        self.engine_seconds = 0.0  # time spent in decide() and executing its commands (model calls excluded)
        self._states: dict[str, RecordState] = {}
        self._locks = RecordLocks()
        self._threads: dict[str, PublishedThread] = {}
        self.background = BackgroundWork()  # cycles and recall-index work, by record
        self.index_work = RecallIndexWork(self.recall_service) if self.recall_service is not None else None
        self._receipts: dict[str, ErasedEvent] = {}  # erase id -> its receipt, until ``erase`` returns it
        self.timers = TimerWheel()
        self._timer_wakeup = asyncio.Event()
        self._timer_task: asyncio.Task[None] | None = None
        self._closed = False
        self._cycle_retries = 0
        self._failures: list[tuple[Arrival[None], BaseException]] = []
        self._watched: dict[int, list[Decided[None]]] = {}  # id(arrival) -> where its decision goes (manual commands)
        self._refusals: dict[int, list[RejectInput]] = {}  # id(arrival) -> its refusals, while it is applied
        self.erasures = EmbeddedErasures(self)
        self._writes = StateWatch()  # wakes settled() once an input's state is written and published
        self.host: Host[None] = Host(config=self.config, accountant=self.accountant, effects=self.effects,
                         table=StatesTable(self._states), outlets=lambda: EmbeddedOutlet(self),
                         timers=WakingTimers(self.timers, self._timer_wakeup), clock=self.clock,
                         limits=self.limits, on_decided=self._decided, erasures=self.erasures,
                         tracing=self.tracing)

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Memory:
        if isinstance(self.clock, SystemClock):
            self._timer_task = asyncio.create_task(self._timer_loop(), name="om-timers")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        if self._timer_task:
            self._timer_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer_task
        await self.background.close()
        if self._owns_store:
            await self.store.close()

    # -- the public API ------------------------------------------------------------------------------------------

    async def add_message(self, message: Message | Mapping[str, Any], *, wait: bool = True,
                          timeout: float | None = None) -> ContextRecord | None:
        """Record a message; returns the context that includes it (after any blocking observation). Raises
        ``InputRejected`` when the memory refuses it (a thread belongs to one resource)."""
        msg = message if isinstance(message, Message) else Message.model_validate(message)
        key = record_key(self.config.scope, msg.thread_id, msg.resource_id)
        thread = self._threads.setdefault(msg.thread_id, PublishedThread())
        future: asyncio.Future[ContextRecord] = asyncio.get_running_loop().create_future()
        refused = await self._apply(key, msg.resource_id, MessageAppended(msg))
        if refused:
            raise InputRejected(refused[0].reason, refused[0].detail)
        # no longer unpublished (-1): the context published while it was applied includes it already
        seq = thread.unpublished.get(msg.message_id, -1)
        if not wait or (thread.published_seq >= seq and thread.spec is not None):
            return await self.context(msg.thread_id)
        thread.waiters.append(Waiter(seq, future))
        return await asyncio.wait_for(future, timeout)

    async def context(self, thread_id: str) -> ContextRecord | None:
        """The latest context of a thread (rendered on first read after each change). With a retention window it
        is rendered as it reads now: nothing that passed the window since it was published is in it."""
        thread = self._threads.get(thread_id)
        if thread is None or thread.spec is None:
            return None
        state = self._states.get(thread.spec.record_key)
        own = record_config(self.config, state) if state is not None else self.config
        if own.retention_ms is not None:
            now = self.clock.now_ms()
            if state is not None and thread_id in state.threads and state.blocking_cycle() is None:
                spec = context_spec(state, thread_id, own, thread.spec.version, now)
            else:  # contexts are held back for a blocking cycle: the one published, at today's cutoff
                spec = narrowed(thread.spec, now - own.retention_ms)
            return await self.effects.context(spec, now_ms=now)
        if thread.rendered is None or thread.rendered.version != thread.spec.version:
            thread.rendered = await self.effects.context(thread.spec, now_ms=self.clock.now_ms())
        return thread.rendered

    async def observe(self, thread_id: str, resource_id: str | None = None, *, force: bool = False) -> bool:
        """Observe the thread's unobserved messages once they reach the message threshold (``messageTokens``, or
        the thread's override): what is buffered is activated and the rest goes to the Observer. Below the
        threshold nothing happens and no model is called, so calling it after every turn costs nothing until
        there is something to observe. ``force=True`` observes now whatever the threshold.

        Returns whether it observed: buffered observations were activated, or an Observer call started (or will,
        once the one running ends). The call runs in the background: ``settle()`` waits for it."""
        decided = await self._command(thread_id, resource_id, ObserveNow(thread_id, force=force))
        return decided is not None and (decided.after.manual_observe_pending or any(
            isinstance(c, ActivateChunks | RequestObservation) for c in decided.commands))

    async def reflect(self, thread_id: str, resource_id: str | None = None, guidance: str | None = None) -> None:
        await self._command(thread_id, resource_id, ReflectNow(guidance, thread_id))

    async def clear(self, thread_id: str, resource_id: str | None = None) -> None:
        """Forget the thread's observations, reflections and overrides, not its conversation: its messages are
        unobserved again (back in its context) and the thresholds apply to them as to new messages; the next
        observation, or ``observe()``, rebuilds the log from them (after changing ``observation.instruction``, for
        example)."""
        await self._command(thread_id, resource_id, ClearRecord(thread_id))

    async def erase(self, *, thread_id: str | None = None, resource_id: str | None = None,
                    erase_id: str | None = None) -> ErasedEvent:
        """Forget for good: a thread (``thread_id``; ``resource_id`` names its resource if the thread is unknown
        here) or a whole resource, every thread of it (``resource_id`` alone). Its messages, observations,
        reflections, buffered work, cached results, recall points, thread records and context go from the store,
        the recall index and this process; a model call or indexing still running for it is cancelled first, so
        nothing it does lands afterwards. Messages added after ``erase`` returns start a fresh memory. Erasing
        something unknown succeeds: the receipt says ``found: false``. Returns the receipt (``data-om-erased``,
        also given to the event listeners)."""
        if thread_id is None and resource_id is None:
            raise InputRejected("invalid_fields", "erase needs thread_id, or resource_id for a whole resource")
        for name, value in (("thread_id", thread_id), ("resource_id", resource_id)):
            if value is not None:
                check_id(name, value)
        scope: Literal["thread", "resource"] = "thread" if thread_id is not None else "resource"
        if scope == "thread" and resource_id is None:
            resource_id = next((s.resource_id for s in self._states.values() if thread_id in s.threads), None)
        erase = EraseRequested(erase_id or uuid.uuid4().hex, scope, resource_id, thread_id, self.clock.now_ms())
        keys = self._erased_keys(erase)
        async with contextlib.AsyncExitStack() as held:  # every record it covers, in key order: no other input
            for key in keys:                                # of them runs meanwhile
                await held.enter_async_context(self._locks.hold(key))
            with self._ingest(keys[0] if keys else thread_id or resource_id or "", resource_id or "",
                              erase) as arrival:
                await self.host.apply([arrival])
        for key in keys:
            self._writes.changed(key)  # a settled() waiting on an erased record wakes (and finds nothing)
        return self._receipts.pop(erase.erase_id)

    def _erased_keys(self, erase: EraseRequested) -> list[str]:
        """The records an erase removes (or changes: a thread of a resource-scope record), in a fixed order."""
        if erase.scope == "thread" and erase.thread_id is not None:
            return [record_key(self.config.scope, erase.thread_id, erase.resource_id or erase.thread_id)]
        return sorted(key for key, state in self._states.items() if state.resource_id == erase.resource_id)

    async def override(self, thread_id: str, *, message_tokens: int | None = None,
                       observation_tokens: int | None = None, resource_id: str | None = None,
                       replace: bool = False, retention_days: int | None = None) -> None:
        """Per-thread thresholds and retention window (per resource in resource scope). Overrides merge: one not
        given keeps its current override; ``replace=True`` makes the overrides exactly these
        (``override(t, replace=True)`` removes them all). A retention window may only be shorter than the
        memory's. Raises ``InputRejected``: ``unknown_thread`` when no message reached the thread yet,
        ``invalid_override`` for a threshold the options would refuse or a window longer than the memory's."""
        await self._command(thread_id, resource_id,
                            OverrideThresholds(message_tokens, observation_tokens, thread_id, replace=replace,
                                               retention_days=retention_days),
                            raise_refusal=True)

    async def recall(self, resource_id: str, arguments: RecallArguments | Mapping[str, Any], *,
                     thread_id: str | None = None) -> RecallResult:
        """The recall tool, as the agent's model calls it (``{"mode": "search", "query": ...}``). ``resource_id``
        is the tenant; ``thread_id`` the agent's current thread. Raises ``RecallError`` for a call that cannot be
        answered as asked (the message says how to fix it)."""
        if self.recall_service is None:
            raise RecallError("recall reads the content store; this memory's store cannot be browsed")
        scope = RecallScope(resource_id=resource_id, current_thread_id=thread_id,
                            retrieval=self.config.retrieval or RetrievalConfig())
        return await self.recall_service.recall(scope, arguments)

    async def export_resource(self, resource_id: str) -> AsyncIterator[bytes]:
        """Everything this memory holds for ``resource_id`` (messages, observations, reflections, thread metadata,
        record states, recall payloads) as ``om.export/v1`` lines, each ending with a newline, read from the store
        a page at a time: write them where they go. The export is the resource's personal data. Raises
        ``StorageError`` when the store cannot export (a store that is no ``ports.ExportSource``)."""
        if not isinstance(self.store, ExportSource):
            raise StorageError(f"{self.store!r} cannot export (it is no ports.ExportSource)", transient=False)
        index = self.recall_service.index if self.recall_service is not None else None
        spec = ExportSpec(resource_id, self.store, HeldStates(self._states), self.config.scope,
                          self.config.token_encoding, index if isinstance(index, RecallPointSource) else None,
                          ExportRetention(self.store, self.config, self.accountant, self.clock.now_ms, self.limits))
        async for line in export_lines(spec):
            yield line

    async def import_resource(self, lines: AsyncIterable[bytes] | Iterable[bytes], *,
                              force: bool = False) -> ImportReport:
        """Rebuild the memory of one resource from an export (``export_resource`` here or elsewhere, ``om-stream
        export``): its rows are written to the store, then each record takes its state, and its threads' contexts
        are as they were. Refused (``InputRejected``) when this memory already holds the resource or one of its
        records (``force``: run an import that failed part-way again), or has another scope; a file that is not a
        complete export raises ``WireDecodeError``."""
        service = self.recall_service
        recall = (RecallTarget(service.index, service.embedder) if service is not None and service.index is not None
                  and service.embedder is not None else None)

        async def holds(keys: Collection[str]) -> list[str]:
            return [key for key in keys if key in self._states]

        async def restore(state: RecordState) -> list[RejectInput]:
            return await self._apply(state.key, state.resource_id, RestoreRecord(state))

        return await import_lines(lines, store=self.store, restorer=AppliedRestorer(restore),
                                  scope=self.config.scope, recall=recall, force=force, holds=holds)

    @property
    def _indexing(self) -> bool:
        return self.recall_service is not None and self.recall_service.search_available

    def state(self, thread_id: str, resource_id: str | None = None) -> RecordState | None:
        return self._states.get(record_key(self.config.scope, thread_id, resource_id or thread_id))

    @property
    def retries(self) -> int:
        """Model calls asked again: after a missed deadline here, plus the gateway's own retries."""
        return self._cycle_retries + (self.model.retry_count if isinstance(self.model, RetryingModel) else 0)

    async def observation_lines(self, thread_id: str, resource_id: str | None = None) -> int:
        """Lines in the active observation log of a thread's record."""
        state = self.state(thread_id, resource_id)
        if state is None:
            return 0
        texts = await self.store.get_segment_texts([s.id for s in state.log])
        return sum(1 for text in texts.values() for line in text.splitlines() if line.strip())

    def progress(self, thread_id: str, resource_id: str | None = None) -> ProgressEvent:
        """How far the thread's memory has caught up (its ``data-om-progress`` payload, as it stands now)."""
        key, resource = self._record_of(thread_id, resource_id)
        return progress_event(self._states.get(key) or new_record(key, self.config.scope, resource), thread_id)

    async def settled(self, thread_id: str, through: str | None = None, *, timeout: float | None = None,
                      resource_id: str | None = None) -> ProgressEvent:
        """Wait until memory has settled through message ``through`` (the thread's newest message now, when None):
        the observation covering it has landed in the active log, or nothing in flight or scheduled would observe
        it without new input (it stays under the message threshold, or in a buffered chunk waiting for it). Returns
        the thread's progress (``through`` says where the message stands); raises ``TimeoutError`` after
        ``timeout`` seconds. A message not added yet is waited for. Unlike :meth:`settle`, it waits for this thread
        only, and for what observes it (a reflection may still run). See ``core/progress.py``."""
        key, resource = self._record_of(thread_id, resource_id)
        progress = await wait_settled(lambda: self._states.get(key) or new_record(key, self.config.scope, resource),
                                      self._writes, key=key, thread_id=thread_id, through=through, timeout=timeout,
                                      store=self.store)
        if progress is None or progress.through is None or not progress.through.settled:
            raise TimeoutError(f"memory of thread {thread_id!r} has not settled through "
                               f"{through or 'its newest message'!r} after {timeout}s")
        return progress

    def _record_of(self, thread_id: str, resource_id: str | None) -> tuple[str, str]:
        """The key and resource of the thread's record (in resource scope, the resource it belongs to when none is
        given)."""
        check_id("thread_id", thread_id)
        resource = resource_id or next((s.resource_id for s in self._states.values() if thread_id in s.threads),
                                       thread_id)
        return record_key(self.config.scope, thread_id, resource), resource

    async def settle(self) -> None:
        """Wait until no Observer/Reflector call is running (their results applied)."""
        await self.background.settle()

    async def advance_to(self, now_ms: int) -> None:
        """Manual clock: move time forward, firing every timer that comes due on the way."""
        if isinstance(self.clock, ManualClock):
            while (due := self.timers.next_due()) is not None and due <= now_ms:
                self.clock.now = max(self.clock.now, due)
                await self._fire_due(due)
                await self.settle()
            self.clock.now = max(self.clock.now, now_ms)

    # -- applying inputs -----------------------------------------------------------------------------------------

    async def _command(self, thread_id: str, resource_id: str | None, event: Input, *,
                       raise_refusal: bool = False) -> Decided[None] | None:
        """A manual command for a thread's record; what was decided (None: nothing, the record does not exist)."""
        check_id("thread_id", thread_id)
        if resource_id is not None:
            check_id("resource_id", resource_id)
        resource = resource_id or next((s.resource_id for s in self._states.values() if thread_id in s.threads),
                                       thread_id)
        decisions: list[Decided[None]] = []
        refused = await self._apply(record_key(self.config.scope, thread_id, resource), resource, event,
                                    decisions=decisions)
        if refused and raise_refusal:
            raise InputRejected(refused[0].reason, refused[0].detail)
        return decisions[0] if decisions else None

    @contextlib.contextmanager
    def _ingest(self, key: str, resource_id: str, event: Input | ErasureInput,
                parent: Context | None = None) -> Iterator[Arrival[None]]:
        """The arrival of one input, in its ``om.ingest`` span when tracing: a child of ``parent`` (the current
        context when None: the caller's span), told what came in; the host's spans hang off it."""
        if not self.tracing.enabled:
            yield Arrival(key, resource_id, event, None)
            return
        with traced(self.tracing.tracer, "om.ingest", context=parent) as span:
            arrival = Arrival(key, resource_id, event, None, set_span_in_context(span))
            describe_input(self.tracing, span, arrival, self.message_spans)
            yield arrival

    async def _apply(self, key: str, resource_id: str, event: Input, *,
                     decisions: list[Decided[None]] | None = None, parent: Context | None = None) -> list[RejectInput]:
        """One input through the host; returns the refusals (the input was not recorded), and adds what was
        decided to ``decisions``. A failure to handle it is raised here, to the caller. ``parent``: the trace the
        input continues (the caller's current span when None)."""
        with self._ingest(key, resource_id, event, parent) as arrival:
            refused = await self._applied(arrival, decisions)
            if refused and arrival.trace is not None:  # (no trace: the current span is the caller's, not ours)
                failed(get_current_span(arrival.trace), refused[0].reason)
            return refused

    async def _applied(self, arrival: Arrival[None], decisions: list[Decided[None]] | None) -> list[RejectInput]:
        key = arrival.key
        async with self._locks.hold(key):
            began = time.perf_counter()
            # its own refusals: inputs of other records may be refused meanwhile (their locks are others)
            refused = self._refusals[id(arrival)] = []
            if decisions is not None:
                self._watched[id(arrival)] = decisions
            try:
                await self.host.apply([arrival])
            finally:
                self._watched.pop(id(arrival), None)
                self._refusals.pop(id(arrival), None)
                # the record's state is written and what it published delivered (its context among them): a
                # settled() woken now reads a context that holds what the state says
                self._writes.changed(key)
            self.engine_seconds += time.perf_counter() - began
            failure = next((error for failed, error in self._failures if failed is arrival), None)
            self._failures = [(a, e) for a, e in self._failures if a is not arrival]
            if failure is not None:
                raise failure
            return refused

    def _decided(self, decided: Decided[None]) -> None:
        watching = self._watched.get(id(decided.arrival))
        if watching is not None:
            watching.append(decided)
        for command in decided.commands:
            if isinstance(command, PersistMessage):
                thread = self._threads.setdefault(command.message.thread_id, PublishedThread())
                thread.unpublished[command.message.message_id] = command.seq

    async def _emit(self, event: OMEvent, command: EmitEvent) -> None:
        self.events_by_type[event.event_type] = self.events_by_type.get(event.event_type, 0) + 1
        for listener in self.listeners:
            try:
                outcome = listener(event, command.event_id)
                if outcome is not None:
                    await outcome
            except Exception:  # a listener's failure must never break the memory
                log.exception("event listener failed on %s", event.event_type)

    async def _publish(self, command: PublishContext) -> None:
        spec = command.spec
        thread = self._threads.setdefault(spec.thread_id, PublishedThread())
        thread.spec = spec
        thread.published_seq = max(thread.published_seq, thread.unpublished.get(spec.through_message_id or "", -1))
        if any(seq <= thread.published_seq for seq in thread.unpublished.values()):
            thread.unpublished = {m: seq for m, seq in thread.unpublished.items() if seq > thread.published_seq}
        ready = [w for w in thread.waiters if w.seq <= thread.published_seq]
        # a caller that stopped waiting (its timeout) leaves a done future behind: dropped with the ready ones
        thread.waiters = [w for w in thread.waiters if w.seq > thread.published_seq and not w.future.done()]
        if not ready:
            return
        record = await self.context(spec.thread_id)
        for waiter in ready:
            if not waiter.future.done() and record is not None:
                waiter.future.set_result(record)

    def _forget_thread(self, thread_id: str) -> None:
        """An erased thread: its context, and the callers still waiting for one (they are told it was erased)."""
        thread = self._threads.pop(thread_id, None)
        if thread is not None:
            for waiter in thread.waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(InputRejected("erased", f"thread {thread_id!r} was erased "
                                                                        "before its context was published"))

    # -- background work -----------------------------------------------------------------------------------------

    def _spawn(self, key: str, resource_id: str, request: RequestObservation | RequestReflection,
               asker: Context | None) -> None:
        self.background.start(self._run_cycle(key, resource_id, request, asker), f"om-{request.request_id}", key)

    async def _run_cycle(self, key: str, resource_id: str, request: RequestObservation | RequestReflection,
                         asker: Context | None) -> None:
        """One cycle, in the trace of the input that asked for it (``asker``: its ingest span), its result applied
        in the cycle's trace."""
        covered = self.message_spans.covering(key, request.message_ids) \
            if self.tracing.enabled and isinstance(request, RequestObservation) else []
        with self.cycle_traces.cycle(request, asker, covered, published_at=0.0) as cycle:
            try:
                result = await self.runner.run(request)
            except Exception as exc:  # a bug in a cycle must not leave an agent waiting: it becomes a failure
                log.exception("cycle %s crashed", request.request_id)
                result = ModelResultArrived(
                    cycle_id=request.cycle_id, attempt=request.attempt, ok=False, error_kind="internal",
                    operation="observation" if isinstance(request, RequestObservation) else "reflection",
                    error=cut_error(f"internal error: {error_text(exc)}"))
            cycle.ended(result)
        try:
            await self._apply(key, resource_id, result, parent=cycle.context())
        except OMError:
            log.exception("applying the result of %s failed", request.request_id)

    async def _fire_due(self, now_ms: int, parent: Context | None = None) -> None:
        """Every timer due at ``now_ms`` or before, in due order (each wanted by its record at that time), in the
        trace of ``parent`` (the caller's, of ``advance_to``, when None)."""
        for key, timer in self.timers.due(now_ms):
            state = self._states.get(key)
            if state is not None:
                await self._apply(key, state.resource_id, timer, parent=parent)

    async def _timer_loop(self) -> None:
        while not self._closed:
            self._timer_wakeup.clear()
            now = self.clock.now_ms()
            await self._fire_due(now, Context())  # the clock asked, no caller: each a trace of its own
            due = self.timers.next_due()
            delay = (due - now) / 1000 if due is not None else 3600.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._timer_wakeup.wait(), timeout=max(0.01, delay))

