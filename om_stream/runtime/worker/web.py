"""The worker's HTTP API: ``/v1/*`` only, on Faust's web server (``worker.web_host``:``worker.web_port``, 6066).

When ``OM_WORKER_API_TOKEN`` is set, every request needs ``Authorization: Bearer <token>`` (checked in constant
time by ``auth.BearerToken``); otherwise it is answered 401 with ``WWW-Authenticate: Bearer`` and a JSON error, and
the view never runs. Any other path on this port, Faust's own pages included, is 404 — token or not. The worker
does not start on a non-loopback ``web_host`` without a token (see ``auth.exposure_refusal``). ``/metrics`` and
the probes are on the other listener (``probes``), without auth.

GET  /v1/threads/{id}/context   the latest context of a thread owned by this worker
GET  /v1/threads/{id}/messages?from=<message id>&through=<message id>
                                the thread's messages from one through the other, in position order
                                (om.http.thread-messages/v1): the run of an om.context/v2 cursor, for a reader
                                that does not hold it; 404 when not held here, or no such run
GET  /v1/threads/{id}/status    its ``data-om-status`` payload, with its ``data-om-progress`` as ``progress``
GET  /v1/threads/{id}/settled?through=<message id>&timeout_s=<seconds>
                                wait (at most ``timeout_s``, default 30, at most 300) until memory has settled
                                through the message (default: the thread's newest when the call came): 200 with
                                the thread's ``data-om-progress``, ``through.settled`` true; still 200 when the time
                                ran out, ``through.settled`` false. 404: the thread is not held here (any more)
POST /v1/threads/{id}/observe   queue a manual observation (``om.commands``): it observes once the thread's
                                unobserved messages reach the message threshold; body: {"force"?, "resource_id"?}
POST /v1/threads/{id}/reflect   queue a manual reflection; body: {"guidance"?, "resource_id"?}
POST /v1/threads/{id}/override  queue overrides, merged into the thread's (404: no memory of the thread here); body:
                                {"message_tokens"?, "observation_tokens"?, "retention_days"?, "replace"?,
                                "resource_id"?}
POST /v1/recall                 the recall tool; body: om.recall.request/v1, answer: om.recall.response/v1
                                (200 with ``result``; 400 invalid request; 503 store, index or embedder failing)
DELETE /v1/threads/{id}         erase a thread for good (``?resource_id=`` its resource: needed in resource
                                scope; ``?wait_s=N`` waits up to N s for the erase to finish): 202 with the erase
                                id (om.http.erase-accepted/v1), or 200 with its status once done
DELETE /v1/resources/{id}       erase a resource and every thread of it, the same way
GET  /v1/erasures/{id}          an erase's status (om.http.erasure-status/v1): done (with what it removed) or
                                running; 404 for an id the ledger does not know (never queued, or past its window)
GET  /v1/resources/{id}/export  everything held for a resource, as om.export/v1 JSON Lines, streamed
                                (``export_view``; 404: no thread of it here)
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from aiohttp import web as aiohttp_web
from faust import web
from pydantic import ValidationError

from om_stream.core.engine import record_config, record_key
from om_stream.core.messages import Message
from om_stream.core.progress import place, progress_event
from om_stream.core.state import RecordState
from om_stream.core.views import context_spec, message_run, status_event
from om_stream.errors import WireDecodeError
from om_stream.ports import Clock
from om_stream.runtime.effects import Effects
from om_stream.runtime.recall import RecallEndpoint, decode_recall_request
from om_stream.runtime.settled import MAX_WAIT_S, StateWatch, Unavailable, wait_settled
from om_stream.runtime.worker.auth import BearerToken
from om_stream.runtime.worker.deps import WorkerDeps
from om_stream.runtime.worker.export_view import export_response
from om_stream.runtime.worker.faust_internals import aiohttp_application, aiohttp_request
from om_stream.runtime.worker.kafka_records import Publication, Publisher
from om_stream.runtime.worker.state_table import RecordTable
from om_stream.trace_headers import extract
from om_stream.wire.codec import decode_json, encode
from om_stream.wire.commands import CommandRecord, record_key_of
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_v2 import ThreadMessages
from om_stream.wire.schemas import EraseAccepted, ErasureStatus

__all__ = ["Served", "api_guard", "register_views"]

log = logging.getLogger(__name__)

# the fields of an HTTP command body (om.http.command-request/v1) that go into the om.command/v1 record
_COMMAND_FIELDS = ("resource_id", "guidance", "force", "message_tokens", "observation_tokens", "retention_days",
                   "replace")
COMPLETED_PART = -1  # the ledger row of a finished erase (runtime/worker/erasure.py)


class Served(Protocol):
    """What the HTTP API reads and uses of the worker (which has all of it; this module never imports it)."""

    @property
    def app(self) -> Any: ...  # the Faust app: its web server and its pages

    @property
    def deps(self) -> WorkerDeps: ...

    @property
    def contexts(self) -> dict[str, ContextRecord]: ...

    @property
    def effects(self) -> Effects: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def table(self) -> RecordTable: ...

    @property
    def publisher(self) -> Publisher: ...

    @property
    def recall(self) -> RecallEndpoint: ...

    @property
    def watch(self) -> StateWatch: ...

    @property
    def recovered(self) -> bool: ...

    def state(self, key: str) -> RecordState | None: ...


def api_guard(token: BearerToken) -> Any:
    """The aiohttp middleware in front of every view of the API port: ``/v1/*`` with the bearer token (when one
    is configured), nothing else."""

    @aiohttp_web.middleware
    async def guard(request: aiohttp_web.Request, handler: Any) -> aiohttp_web.StreamResponse:
        if not request.path.startswith("/v1/"):
            return aiohttp_web.json_response({"error": "not_found", "detail": "this port serves /v1/* only; "
                                              "/metrics and the probes are on OM_WORKER_METRICS_PORT"}, status=404)
        authorization = request.headers.get("Authorization")
        if not token.admits(authorization):
            wrong = authorization is not None
            log.warning("HTTP API: %s request refused (%s) from %s", request.method,
                        "wrong bearer token" if wrong else "no bearer token", request.remote)
            challenge = 'Bearer realm="om-stream"' + (', error="invalid_token"' if wrong else "")
            return aiohttp_web.json_response(
                {"error": "unauthorized", "detail": "this API needs 'Authorization: Bearer <token>' with the "
                                                    "worker's OM_WORKER_API_TOKEN"},
                status=401, headers={"WWW-Authenticate": challenge})
        response: aiohttp_web.StreamResponse = await handler(request)
        return response

    return guard


async def thread_messages(effects: Effects, state: RecordState, thread_id: str, first: str,
                          through: str) -> list[Message] | None:
    """The thread's messages ``first`` through ``through`` in position order (``/messages``): from the record's
    state when it still holds them (a context's run or pin), else from the content store's conversation of the
    record; None when either id is not a message of the thread, or ``through`` comes before ``first``."""
    ids = message_run(state, thread_id, first, through)
    if ids is not None:
        return await effects.messages(ids, state.resource_id)
    stored = [m.message for m in await effects.conversation(state) if m.message.thread_id == thread_id]
    positions = {m.message_id: i for i, m in enumerate(stored)}
    start, end = positions.get(first), positions.get(through)
    if start is None or end is None or end < start:
        return None
    return stored[start:end + 1]


def register_views(worker: Served) -> None:
    app = worker.app
    config = worker.deps.config
    kafka = worker.deps.settings.kafka
    # before the server starts (aiohttp freezes its middlewares then)
    aiohttp_application(app).middlewares.append(api_guard(BearerToken(worker.deps.settings.worker.api_token)))

    def not_owned(view: web.View, thread_id: str) -> web.Response:
        return view.json({"error": "not_found", "detail": f"thread {thread_id!r} is not held by this worker; "
                                                          f"its context is also on the {kafka.topic_context} topic"},
                         status=404)

    @app.page("/v1/threads/{thread_id}/context")
    class ContextView(web.View):
        async def get(self, request: web.Request, thread_id: str) -> web.Response:
            state = worker.state(record_key(config.scope, thread_id, request.query.get("resource_id", thread_id)))
            if state is None or thread_id not in state.threads:
                return not_owned(self, thread_id)
            context = worker.contexts.get(thread_id)
            own = record_config(config, state)
            if context is None or context.version != state.context_version or own.retention_ms is not None:
                # with a retention window the context is rendered as it reads now: what expired since the last
                # one was published is left out before the record's purge publishes it again
                now = worker.clock.now_ms()
                spec = context_spec(state, thread_id, own, state.context_version, now)
                context = await worker.effects.context(spec, now_ms=now)
                worker.contexts[thread_id] = context
            return self.bytes(encode(context), content_type="application/json")

    @app.page("/v1/threads/{thread_id}/messages")
    class MessagesView(web.View):
        async def get(self, request: web.Request, thread_id: str) -> web.Response:
            first, through = request.query.get("from", ""), request.query.get("through", "")
            problems = [{"loc": [name], "msg": "a message id, 1 to 256 characters"}
                        for name, value in (("from", first), ("through", through)) if not 0 < len(value) <= 256]
            if problems:
                return self.json({"error": "invalid_fields", "detail": problems}, status=400)
            state = worker.state(record_key(config.scope, thread_id, request.query.get("resource_id", thread_id)))
            if state is None or thread_id not in state.threads:
                return not_owned(self, thread_id)
            found = await thread_messages(worker.effects, state, thread_id, first, through)
            if found is None:
                return self.json({"error": "not_found", "detail": "the thread holds no such run of messages"},
                                 status=404)
            return self.bytes(encode(ThreadMessages(thread_id=thread_id, messages=found)),
                              content_type="application/json")

    @app.page("/v1/threads/{thread_id}/status")
    class StatusView(web.View):
        async def get(self, request: web.Request, thread_id: str) -> web.Response:
            state = worker.state(record_key(config.scope, thread_id, request.query.get("resource_id", thread_id)))
            if state is None or thread_id not in state.threads:
                return not_owned(self, thread_id)
            status = status_event(state, thread_id, record_config(config, state),  # the thread's overrides apply
                                  worker.deps.accountant.conversation_overhead)
            status = status.model_copy(update={"progress": progress_event(state, thread_id,
                                                                          through=place(state, thread_id))})
            return self.bytes(status.model_dump_json(by_alias=True).encode(), content_type="application/json")

    @app.page("/v1/threads/{thread_id}/settled")
    class SettledView(web.View):
        async def get(self, request: web.Request, thread_id: str) -> web.Response:
            through = request.query.get("through") or None
            try:
                timeout = float(request.query.get("timeout_s", "30"))
            except ValueError:
                timeout = -1.0
            problems = []
            if not 0 <= timeout <= MAX_WAIT_S:  # NaN included
                problems.append({"loc": ["timeout_s"], "msg": f"seconds, from 0 to {MAX_WAIT_S:g}"})
            if through is not None and len(through) > 256:
                problems.append({"loc": ["through"], "msg": "a message id, at most 256 characters"})
            if problems:
                return self.json({"error": "invalid_fields", "detail": problems}, status=400)
            key = record_key(config.scope, thread_id, request.query.get("resource_id", thread_id))

            def read() -> RecordState | Unavailable:
                if not worker.recovered:  # a state read now may be behind its changelog: wait for the recovery
                    return Unavailable.RECOVERING
                state = worker.state(key)
                return state if state is not None and thread_id in state.threads else Unavailable.NOT_HELD

            if read() is not Unavailable.NOT_HELD:
                progress = await wait_settled(read, worker.watch, key=key, thread_id=thread_id, through=through,
                                              timeout=timeout, store=worker.effects.store)
                if progress is not None:
                    return self.bytes(progress.model_dump_json(by_alias=True, exclude_none=True).encode(),
                                      content_type="application/json")
            return not_owned(self, thread_id)

    async def command(view: web.View, request: web.Request, thread_id: str, kind: str) -> web.Response:
        try:
            body: dict[str, Any] = decode_json(await request.read() or b"{}", kafka.max_message_bytes)
        except WireDecodeError as exc:
            return view.json({"error": exc.reason, "detail": exc.detail}, status=400)
        try:
            record = CommandRecord.model_validate({"command_id": str(uuid.uuid4()), "thread_id": thread_id,
                                                   "command": kind, **{f: body.get(f) for f in _COMMAND_FIELDS}})
        except ValidationError as exc:
            problems = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
            return view.json({"error": "invalid_fields", "detail": problems}, status=400)
        key = record_key(config.scope, thread_id, record.resource_id or thread_id)
        if kind == "override":
            state = worker.state(key)
            if state is None or thread_id not in state.threads:
                # an override makes no memory: it needs a thread that has one (the memory agent refuses it too)
                return view.json({"error": "not_found", "detail": f"no memory of thread {thread_id!r} on this "
                                                                  f"worker (no message reached it, or another worker "
                                                                  f"holds it): nothing to override"}, status=404)
        # to the record's home partition when this worker holds it (else the producer's partitioner, as a client's)
        home = worker.table.home(key)
        await worker.publisher.send(Publication(kafka.topic_commands, thread_id.encode(), encode(record),
                                                partition=home))
        return view.json({"accepted": True, "command_id": record.command_id}, status=202)

    @app.page("/v1/threads/{thread_id}/observe")
    class ObserveView(web.View):
        async def post(self, request: web.Request, thread_id: str) -> web.Response:
            return await command(self, request, thread_id, "observe")

    @app.page("/v1/threads/{thread_id}/reflect")
    class ReflectView(web.View):
        async def post(self, request: web.Request, thread_id: str) -> web.Response:
            return await command(self, request, thread_id, "reflect")

    @app.page("/v1/threads/{thread_id}/override")
    class OverrideView(web.View):
        async def post(self, request: web.Request, thread_id: str) -> web.Response:
            return await command(self, request, thread_id, "override")

    register_erasure_views(worker)
    @app.page("/v1/resources/{resource_id}/export")
    class ExportView(web.View):
        async def get(self, request: web.Request, resource_id: str) -> Any:
            return await export_response(aiohttp_request(request), worker.deps, worker.table, resource_id)

    @app.page("/v1/recall")
    class RecallView(web.View):
        async def post(self, request: web.Request) -> web.Response:
            try:
                call = decode_recall_request(await request.read(), kafka.max_message_bytes)
            except WireDecodeError as exc:
                worker.deps.metrics.recall_requests.labels("http", "unknown", "invalid_request").inc()
                return self.json({"error": exc.reason, "detail": exc.detail}, status=400)
            # an agent's HTTP call may carry its trace (W3C traceparent/tracestate headers): its span continues it
            trace = (extract([(name.lower(), value.encode()) for name, value in request.headers.items()])
                     if worker.recall.tracing.enabled else None)
            response = await worker.recall.answer(call, "http", trace=trace)
            status = 200 if response.error is None else 400 if response.error.code == "invalid_request" else 503
            return self.bytes(encode(response), content_type="application/json", status=status)


async def erasure_status(worker: Served, erase_id: str) -> ErasureStatus | None:
    """What the ledger says of an erase: done (with its counts), running (a part started), or None (unknown)."""
    store = worker.deps.store
    done = await store.erasure_part(erase_id, COMPLETED_PART)
    if done is not None:
        completed = (datetime.fromtimestamp((done.completed_at or 0) / 1000, UTC).isoformat(timespec="milliseconds")
                     .replace("+00:00", "Z"))
        return ErasureStatus(erase_id=erase_id, state="done", found=done.found,
                             removed=done.counts.as_dict() if done.counts else {}, completed_at=completed)
    parts = await asyncio.gather(*(store.erasure_part(erase_id, p)
                                   for p in range(worker.deps.settings.kafka.partitions)))
    return ErasureStatus(erase_id=erase_id, state="running") if any(parts) else None


def register_erasure_views(worker: Served) -> None:
    """``DELETE /v1/threads/{id}``, ``DELETE /v1/resources/{id}``, ``GET /v1/erasures/{id}``."""
    app = worker.app
    kafka = worker.deps.settings.kafka
    config = worker.deps.config

    async def erase(view: web.View, request: web.Request, scope: Literal["thread", "resource"],
                    subject: str) -> web.Response:
        try:
            wait_s = float(request.query.get("wait_s", "0"))
            if not 0 <= wait_s <= MAX_WAIT_S:
                raise ValueError(f"wait_s must be between 0 and {MAX_WAIT_S:.0f}")
        except ValueError as exc:
            return view.json({"error": "invalid_fields", "detail": str(exc)}, status=400)
        resource_id = request.query.get("resource_id") if scope == "thread" else subject
        if scope == "thread" and config.scope == "resource" and not resource_id:
            return view.json({"error": "invalid_fields", "detail": "resource scope: erasing a thread needs "
                                                                   "?resource_id= (its resource)"}, status=400)
        try:
            record = CommandRecord.model_validate({
                "command_id": str(uuid.uuid4()), "command": "erase", "scope": scope, "resource_id": resource_id,
                "thread_id": subject if scope == "thread" else None, "requested_at": datetime.now(UTC)})
        except ValidationError as exc:
            problems = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
            return view.json({"error": "invalid_fields", "detail": problems}, status=400)
        key = record_key_of(record)
        home = worker.table.home(record_key(config.scope, subject, resource_id or subject)) \
            if scope == "thread" else None
        await worker.publisher.send(Publication(kafka.topic_commands, key.encode(), encode(record), partition=home))
        erase_id = record.command_id
        deadline = time.monotonic() + wait_s
        delay = 0.05
        while wait_s and time.monotonic() < deadline:
            status = await erasure_status(worker, erase_id)
            if status is not None and status.state == "done":
                return view.bytes(encode(status), content_type="application/json")
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)
        accepted = EraseAccepted(accepted=True, erase_id=erase_id, status=f"/v1/erasures/{erase_id}")
        return view.bytes(encode(accepted), content_type="application/json", status=202)

    @app.page("/v1/threads/{thread_id}")
    class ThreadView(web.View):
        async def delete(self, request: web.Request, thread_id: str) -> web.Response:
            return await erase(self, request, "thread", thread_id)

    @app.page("/v1/resources/{resource_id}")
    class ResourceView(web.View):
        async def delete(self, request: web.Request, resource_id: str) -> web.Response:
            return await erase(self, request, "resource", resource_id)

    @app.page("/v1/erasures/{erase_id}")
    class ErasureView(web.View):
        async def get(self, request: web.Request, erase_id: str) -> web.Response:
            status = await erasure_status(worker, erase_id)
            if status is None:
                return self.json({"error": "not_found", "detail": f"no erase {erase_id!r} in the ledger (never "
                                                                  f"queued, or past its window)"}, status=404)
            return self.bytes(encode(status), content_type="application/json")
