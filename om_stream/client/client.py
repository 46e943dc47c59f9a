"""``OMClient``: what an agent does with om-stream over Kafka.

* ``publish(message)``: an ``om.message/v1`` record, key = thread id, partitioned by murmur2 like Java and Faust.
* ``await_context(thread, message_id)``: read-your-writes over the compacted context topic: the first context of the
  thread that includes the message (``through_message_id`` is it, or a message this client published after it).
* ``events(thread)``: the thread's ``data-om-*`` events, typed, with their CloudEvents attributes.
* ``settled(thread, message_id)``: wait until the thread's memory has caught up through the message (a ``progress``
  command on ``om.commands``, answered on ``om.events``: see ``client/settled.py``).
* ``recall(...)``: the recall tool over the ``om.recall.requests`` → ``om.recall.responses`` topic pair (key =
  resource id), matched by ``correlation_id``.
* ``erase(thread_id=... | resource_id=...)``: forget a thread, or a resource and every thread of it, for good: an
  ``erase`` command on ``om.commands``, and its receipt (``data-om-erased``) waited for on ``om.events``.
* tracing (OpenTelemetry, W3C trace context): every record the client publishes carries the caller's current span
  in its ``traceparent``/``tracestate`` headers, then what the application's globally registered propagator writes
  (none of it when no span is active), so the worker's handling of it continues the agent's trace;
  ``context_trace(thread)`` is the trace context of the thread's latest context record, for the agent's consumer
  span (``tracer.start_as_current_span("...", context=om.context_trace(t))``).
  The client needs only the OpenTelemetry API: the agent's own SDK (or none) decides what is recorded.

Contexts come whole (``om.context/v1``) or by reference (``om.context/v2``: a cursor on the context topic, its
system blocks on ``om.context.index`` and ``om.context.blocks``, which the client reads from their beginning); either
way ``await_context`` and ``latest_context`` return the same ``ContextRecord`` (``client/assembly.py``); the two
topics are read from the first v2 context on. A v2
context whose raw messages the client does not hold (it started after they were published) is completed through
the worker's HTTP API when ``messages_api`` is given (``client/messages_api.py``), else it waits for the next one.

The context and recall-response topics are followed from the moment the client starts (or its first recall), so
nothing the worker publishes in answer to this client is missed. Timeouts raise the built-in ``TimeoutError``.

The context topic carries every thread's contexts, not only this client's: the client keeps the latest context of
the ``CONTEXTS_KEPT`` threads whose contexts came last, and the message ids it published (for read-your-writes) of the
``THREADS_KEPT`` threads it published to last, so that a long-running agent does not grow with the traffic.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Annotated, Any

from aiokafka import AIOKafkaProducer, ConsumerRecord
from opentelemetry.context import Context
from pydantic import Field, TypeAdapter, ValidationError

from om_stream.client.assembly import ContextAssembly, RunWanted
from om_stream.client.events import EventStream
from om_stream.client.messages_api import MessagesApi
from om_stream.client.security import start_checked
from om_stream.client.settled import settle
from om_stream.client.tail import TopicTail
from om_stream.core.config import RetrievalConfig
from om_stream.core.events import ErasedEvent, ProgressEvent
from om_stream.core.messages import Message
from om_stream.core.recall.params import RecallArguments
from om_stream.trace_headers import client_headers, extract
from om_stream.wire.codec import encode
from om_stream.wire.commands import CommandRecord, record_key_of
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_v2 import ContextCursor, block_update, index_update
from om_stream.wire.messages import MessageRecord
from om_stream.wire.recall import RecallRequest, RecallResponse

__all__ = ["CONTEXTS_KEPT", "THREADS_KEPT", "ClientTopics", "OMClient", "Published"]

log = logging.getLogger(__name__)
_REMEMBERED_PER_THREAD = 4096  # message ids per thread kept for read-your-writes
THREADS_KEPT = 1024  # threads whose published message ids are kept (the ones published to last)
CONTEXTS_KEPT = 2048  # threads whose latest context is kept (the ones whose contexts came last)


def _headers() -> list[tuple[str, bytes]]:
    """Every record's headers: its content type, and the caller's current span if any (W3C trace context, then
    what the application's registered propagator writes: ``client_headers``)."""
    return [("content-type", b"application/json"), *client_headers()]


# a record of the context topic: a whole context (v1) or a cursor (v2), told apart by its schema tag
_CONTEXTS: TypeAdapter[ContextRecord | ContextCursor] = TypeAdapter(
    Annotated[ContextRecord | ContextCursor, Field(discriminator="schema_")])


def _keep_recent(remembered: dict[str, Any], limit: int) -> None:
    while len(remembered) > limit:
        del remembered[next(iter(remembered))]


@dataclass(frozen=True)
class ClientTopics:
    """The topic names an agent uses; the defaults are the worker's (``OM_KAFKA_TOPIC_*`` renames them there).

    The client's own options, not the server's settings: an agent process never reads ``OM_*`` variables."""

    messages: str = "om.messages"
    commands: str = "om.commands"
    events: str = "om.events"
    context: str = "om.context"
    context_index: str = "om.context.index"  # om.context/v2's topics, read once a v2 context comes
    context_blocks: str = "om.context.blocks"
    recall_requests: str = "om.recall.requests"
    recall_responses: str = "om.recall.responses"


@dataclass(frozen=True)
class Published:
    message_id: str
    topic: str
    partition: int
    offset: int


class OMClient:
    """``async with OMClient("localhost:9092") as om: ...``. ``kafka_options`` go to every aiokafka client
    (``security_protocol``, ``sasl_*``, ``ssl_context``, ...)."""

    def __init__(self, bootstrap: str, *, topics: ClientTopics | None = None,
                 kafka_options: Mapping[str, Any] | None = None, topic_timeout: float = 30.0,
                 messages_api: MessagesApi | None = None) -> None:
        self.bootstrap = bootstrap
        self.topics = topics or ClientTopics()
        self._options = dict(kafka_options or {})
        self._topic_timeout = topic_timeout
        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, **self._options)
        self._contexts = TopicTail(bootstrap, self.topics.context, self._on_context, kafka_options=self._options,
                                   topic_timeout=topic_timeout)
        # om.context/v2: the index and the blocks are compacted topics, followed from their beginning (so that a
        # cursor can name blocks published before the client started) once the first cursor comes
        self._assembly = ContextAssembly()
        self._messages_api = messages_api
        self._references: list[TopicTail] = []
        self._references_ready = asyncio.Lock()
        self._responses: TopicTail | None = None
        self._responses_ready = asyncio.Lock()
        self._latest: dict[str, ContextRecord] = {}
        self._traces: dict[str, Context] = {}  # the trace context of each kept latest context (its record's headers)
        # a v2 cursor's trace context (its record's headers), until the context it names is assembled
        self._cursor_traces: dict[str, tuple[int, Context]] = {}
        self._erasing: list[set[str]] = []  # erases in flight: the threads whose tombstone each has seen
        self._awaiting_tombstone: set[str] = set()  # erased threads whose tombstone is still to be read
        self._context_changed = asyncio.Condition()
        self._sent: dict[str, OrderedDict[str, int]] = {}
        self._sequence = 0
        self._pending: dict[str, asyncio.Future[RecallResponse]] = {}

    # -- lifecycle ------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect; a broker that refuses the credentials or the TLS handshake raises
        :class:`~om_stream.client.security.KafkaConnectError` at once."""
        try:
            await start_checked(self._producer, self.bootstrap, self._options, close=self._producer.stop)
        except BaseException:
            await self._contexts.stop()  # never started: released, so it is not reported unclosed
            raise
        try:
            await self._contexts.start()
        except BaseException:
            await self._producer.stop()
            raise

    async def stop(self) -> None:
        for future in self._pending.values():
            future.cancel()
        if self._responses is not None:
            await self._responses.stop()
        await self._contexts.stop()
        for tail in self._references:
            await tail.stop()
        await self._producer.stop()

    async def __aenter__(self) -> OMClient:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    # -- messages and read-your-writes ------------------------------------------------------------------------------

    async def publish(self, message: MessageRecord | Message) -> Published:
        """Publish one message (key = thread id) and wait for the broker's acknowledgement."""
        record = message if isinstance(message, MessageRecord) else MessageRecord.from_message(message)
        sent = self._sent.pop(record.thread_id, None) or OrderedDict()
        self._sent[record.thread_id] = sent  # to the end: the threads published to last are kept
        _keep_recent(self._sent, THREADS_KEPT)
        self._sequence += 1
        sent[record.message_id] = self._sequence
        sent.move_to_end(record.message_id)
        while len(sent) > _REMEMBERED_PER_THREAD:
            sent.popitem(last=False)
        meta = await self._producer.send_and_wait(self.topics.messages, encode(record),
                                                  key=record.thread_id.encode(), headers=_headers())
        return Published(record.message_id, meta.topic, meta.partition, meta.offset)

    def includes(self, context: ContextRecord, message_id: str) -> bool:
        """Whether ``context`` reflects ``message_id``: it is the context's last message, or this client published
        the context's last message after it, or it is among the context's raw messages."""
        through = context.through_message_id
        if through == message_id:
            return True
        sent: Mapping[str, int] = self._sent.get(context.thread_id, {})
        if through is not None and message_id in sent and through in sent and sent[through] > sent[message_id]:
            return True
        return any(m.message_id == message_id for m in context.messages)

    def context_trace(self, thread_id: str) -> Context | None:
        """The trace context the thread's latest context record carries (the worker's span that published it), for
        the span of whatever the agent does with that context: a child of it (``context=``), or linked to it
        (``trace.get_current_span(ctx).get_span_context()``). None when the record carried none (the worker does
        not trace) or no context of the thread is kept; it describes the context ``latest_context`` returns, and
        the one ``await_context`` returned until a newer one comes."""
        return self._traces.get(thread_id)

    def latest_context(self, thread_id: str) -> ContextRecord | None:
        """The newest context of the thread seen since the client started (None too for a thread whose last context
        is older than those of ``CONTEXTS_KEPT`` other threads)."""
        return self._latest.get(thread_id)

    async def await_context(self, thread_id: str, message_id: str, *, timeout: float = 30.0) -> ContextRecord:
        """The first context of ``thread_id`` that includes ``message_id``; ``TimeoutError`` after ``timeout``."""

        def ready() -> bool:
            latest = self._latest.get(thread_id)
            return latest is not None and self.includes(latest, message_id)

        async with self._context_changed:
            try:
                await asyncio.wait_for(self._context_changed.wait_for(ready), timeout)
            except TimeoutError:
                raise TimeoutError(f"no context of thread {thread_id!r} includes message {message_id!r} after "
                                   f"{timeout}s") from None
        return self._latest[thread_id]

    async def wait_context(self, thread_id: str, ready: Callable[[ContextRecord], bool], *,
                           timeout: float) -> ContextRecord:
        """The thread's newest context, once ``ready`` holds for it (asked again at each context received);
        ``TimeoutError`` after ``timeout``."""

        def met() -> bool:
            latest = self._latest.get(thread_id)
            return latest is not None and ready(latest)

        async with self._context_changed:
            await asyncio.wait_for(self._context_changed.wait_for(met), timeout)
        return self._latest[thread_id]

    # -- has memory caught up? ----------------------------------------------------------------------------------------

    async def ask_progress(self, thread_id: str, through_message_id: str | None = None, *,
                           resource_id: str | None = None) -> str:
        """Publish a ``progress`` command (``resource_id`` is required in resource scope); returns its id, which
        the answering ``data-om-progress`` event carries as ``request_id``."""
        record = CommandRecord(command_id=str(uuid.uuid4()), thread_id=thread_id, resource_id=resource_id,
                               command="progress", through_message_id=through_message_id)
        await self._producer.send_and_wait(self.topics.commands, encode(record), key=thread_id.encode(),
                                           headers=_headers())
        return record.command_id

    async def settled(self, thread_id: str, through_message_id: str | None = None, *, timeout: float = 30.0,
                      resource_id: str | None = None) -> ProgressEvent:
        """Wait until the thread's memory has settled through ``through_message_id`` (its newest message when the
        worker answers, when None): the observation covering it has landed in the active log, or nothing in flight
        or scheduled would observe it without new input (it stays under the message threshold, or buffered until
        it is reached). Returns the thread's progress; ``TimeoutError`` after ``timeout`` (a worker that is down
        answers nothing). Needs only Kafka."""
        return await settle(self, thread_id, through_message_id, timeout=timeout, resource_id=resource_id)

    async def _on_context(self, record: ConsumerRecord[bytes, bytes]) -> None:
        if record.value is None:  # a tombstone: the thread was erased, its context is gone
            if record.key is not None:
                thread = record.key.decode("utf-8", "replace")
                self._forget(thread)
                self._awaiting_tombstone.discard(thread)  # what comes after it is a fresh conversation's
                for seen in self._erasing:
                    seen.add(thread)
            return
        try:
            read = _CONTEXTS.validate_json(record.value)
        except ValidationError as exc:
            log.warning("context at %s[%d]@%d matches neither om.context/v1 nor om.context/v2: %s", record.topic,
                        record.partition, record.offset, exc.errors()[:3])
            return
        if read.thread_id in self._awaiting_tombstone:
            return  # published before the erase whose tombstone is still to come on this topic
        trace = extract(record.headers)
        if isinstance(read, ContextCursor):
            self._cursor_traces.pop(read.thread_id, None)
            self._cursor_traces[read.thread_id] = (read.version, trace)
            _keep_recent(self._cursor_traces, CONTEXTS_KEPT)
            await self._follow_references()
            await self._assembled(self._assembly.on_cursor(read))
            return
        await self._deliver(read, trace)

    async def _follow_references(self) -> None:
        """Start reading the index and blocks topics (once: at the first v2 cursor)."""
        async with self._references_ready:
            if self._references:
                return
            for topic, on_record in ((self.topics.context_index, self._on_index),
                                     (self.topics.context_blocks, self._on_block)):
                tail = TopicTail(self.bootstrap, topic, on_record, from_beginning=True, kafka_options=self._options,
                                 topic_timeout=self._topic_timeout)
                await tail.start()
                self._references.append(tail)

    async def _on_index(self, record: ConsumerRecord[bytes, bytes]) -> None:
        try:
            update = index_update(record.key, record.value)
        except ValidationError as exc:
            log.warning("index at %s[%d]@%d does not match om.context-index/v1: %s", record.topic,
                        record.partition, record.offset, exc.errors()[:3])
            return
        if update is not None:
            await self._assembled(self._assembly.on_index(*update))

    async def _on_block(self, record: ConsumerRecord[bytes, bytes]) -> None:
        try:
            update = block_update(record.key, record.value)
        except ValidationError as exc:
            log.warning("block at %s[%d]@%d does not match om.context-block/v1: %s", record.topic,
                        record.partition, record.offset, exc.errors()[:3])
            return
        if update is not None:
            await self._assembled(self._assembly.on_block(*update))

    async def _assembled(self, outcome: ContextRecord | RunWanted | None) -> None:
        """A context assembled is delivered; a run that does not check out is fetched, when the client can."""
        if isinstance(outcome, RunWanted):
            if self._messages_api is None:
                log.warning("the context of thread %r names messages this client does not hold, and it has no "
                            "messages_api to fetch them: it waits for a context it can assemble",
                            outcome.cursor.thread_id)
                return
            outcome = self._assembly.with_run(outcome.cursor, await self._messages_api.run(outcome.cursor))
        if isinstance(outcome, ContextRecord) and outcome.thread_id not in self._awaiting_tombstone:
            version, trace = self._cursor_traces.get(outcome.thread_id, (None, Context()))
            await self._deliver(outcome, trace if version == outcome.version else Context())

    async def _deliver(self, context: ContextRecord, trace: Context) -> None:
        """``context`` becomes the thread's latest, with the trace context its record (or cursor) carried."""
        current = self._latest.get(context.thread_id)
        if current is not None and current.version > context.version:
            return  # an older context replayed (at-least-once)
        async with self._context_changed:
            self._latest.pop(context.thread_id, None)
            self._latest[context.thread_id] = context  # to the end: the threads heard from last are kept
            _keep_recent(self._latest, CONTEXTS_KEPT)
            self._traces.pop(context.thread_id, None)
            if trace:
                self._traces[context.thread_id] = trace
                _keep_recent(self._traces, CONTEXTS_KEPT)
            self._context_changed.notify_all()

    def _forget(self, thread_id: str) -> None:
        self._latest.pop(thread_id, None)
        self._traces.pop(thread_id, None)
        self._cursor_traces.pop(thread_id, None)
        self._sent.pop(thread_id, None)
        self._assembly.forget(thread_id)

    # -- erasure ----------------------------------------------------------------------------------------------------

    async def erase(self, *, thread_id: str | None = None, resource_id: str | None = None,
                    timeout: float = 60.0) -> ErasedEvent:
        """Erase a thread (``thread_id``; give its ``resource_id`` in resource scope) or a whole resource
        (``resource_id`` alone) from every store, and wait for the receipt (``TimeoutError`` after ``timeout``;
        the erase goes on). Messages published after this returns start a fresh memory. Erasing something unknown
        succeeds: the receipt says ``found`` false."""
        record = CommandRecord.model_validate({
            "command_id": str(uuid.uuid4()), "command": "erase",
            "scope": "thread" if thread_id is not None else "resource", "thread_id": thread_id,
            "resource_id": resource_id, "requested_at": datetime.now(UTC)})
        key = record_key_of(record)
        tombstoned: set[str] = set()  # the threads whose tombstone the context topic showed during the erase
        self._erasing.append(tombstoned)
        try:
            receipt = await self._erased(record, key, timeout)
        finally:
            self._erasing.remove(tombstoned)
        # The context topic and the events topic are read apart: the receipt may come before a thread's tombstone.
        # Until that tombstone is read, a context of the thread read from the topic is the erased conversation's.
        erased = ([thread_id] if thread_id is not None else
                  [t for t, c in self._latest.items() if c.resource_id == resource_id])
        for thread in erased:
            self._forget(thread)
            if receipt.removed.contexts and thread not in tombstoned:
                self._awaiting_tombstone.add(thread)
        return receipt

    async def _erased(self, record: CommandRecord, key: str, timeout: float) -> ErasedEvent:
        """Publish the erase command and wait for its receipt."""
        async with self.events(key) as events:  # positioned before the command goes: the receipt is not missed
            await self._producer.send_and_wait(self.topics.commands, encode(record), key=key.encode(),
                                               headers=_headers())
            deadline = asyncio.get_running_loop().time() + timeout
            while True:
                remaining = deadline - asyncio.get_running_loop().time()
                try:
                    event = await events.next(timeout=max(0.0, remaining))
                except TimeoutError:
                    raise TimeoutError(f"no receipt for erase {record.command_id} after {timeout}s (it goes on; "
                                       f"its receipt will be a data-om-erased event keyed {key!r})") from None
                if isinstance(event.data, ErasedEvent) and event.data.erase_id == record.command_id:
                    return event.data

    # -- events -----------------------------------------------------------------------------------------------------

    def events(self, thread_id: str, *, from_beginning: bool = False) -> EventStream:
        """``async with om.events(thread) as events``: see :class:`~om_stream.client.events.EventStream`."""
        return EventStream(self.bootstrap, self.topics.events, thread_id, from_beginning=from_beginning,
                           kafka_options=self._options)

    # -- recall -----------------------------------------------------------------------------------------------------

    async def recall(self, resource_id: str, arguments: RecallArguments | Mapping[str, Any] | None = None, *,
                     thread_id: str | None = None, retrieval: RetrievalConfig | None = None,
                     timeout: float = 30.0) -> RecallResponse:
        """One recall tool call (``arguments`` as the model wrote them: ``{"mode": "threads"}``, ...). The answer
        carries either ``result`` or ``error`` (``invalid_request``: the call can be fixed; ``unavailable``)."""
        request = RecallRequest(
            correlation_id=str(uuid.uuid4()), resource_id=resource_id, thread_id=thread_id,
            retrieval=retrieval or RetrievalConfig(),
            arguments=arguments if isinstance(arguments, RecallArguments)
            else RecallArguments.model_validate(dict(arguments or {})))
        return await self.send_recall(request, timeout=timeout)

    async def send_recall(self, request: RecallRequest, *, timeout: float = 30.0) -> RecallResponse:
        await self._follow_responses()
        future: asyncio.Future[RecallResponse] = asyncio.get_running_loop().create_future()
        self._pending[request.correlation_id] = future
        try:
            await self._producer.send_and_wait(self.topics.recall_requests, encode(request),
                                               key=request.resource_id.encode(), headers=_headers())
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise TimeoutError(f"no recall response for {request.correlation_id} after {timeout}s (does a "
                               f"worker serve {self.topics.recall_requests}?)") from None
        finally:
            self._pending.pop(request.correlation_id, None)

    async def _follow_responses(self) -> None:
        async with self._responses_ready:
            if self._responses is None:
                tail = TopicTail(self.bootstrap, self.topics.recall_responses, self._on_response,
                                 kafka_options=self._options, topic_timeout=self._topic_timeout)
                await tail.start()
                self._responses = tail

    async def _on_response(self, record: ConsumerRecord[bytes, bytes]) -> None:
        if record.value is None:
            return
        try:
            response = RecallResponse.model_validate_json(record.value)
        except ValidationError as exc:
            log.warning("recall response at %s[%d]@%d does not match om.recall.response/v1: %s", record.topic,
                        record.partition, record.offset, exc.errors()[:3])
            return
        future = self._pending.get(response.correlation_id)
        if future is not None and not future.done():
            future.set_result(response)
