"""Drives the cycle flows of ``core.cycles`` for the model requests ``decide`` emits, and returns each outcome as a
``ModelResultArrived`` input. Shared by the embedded runner and the Kafka model workers.

The OM rules of a cycle (a degenerate Observer answer asked for once more, the Reflector's compression ladder, an
empty reflection never a success, the structured-extraction call) are the flow's. This driver performs what the
flow asks for: content-store reads, model calls (the offline model when the request says so), the extractors'
``on_extracted`` callbacks (awaited up to ``hook_timeout_s``); and it times the cycle, counts every call in
:class:`CycleStats`, and calls the hooks.

Never raises for a model problem: a failure is a result too (``ok=False``, ``error_kind`` from the exception), so
the state machine decides what happens next.

Around each cycle:

* **hooks**: ``config.options.hooks`` (``ObserveHooks``) and the runner's ``observers`` (e.g. a metrics hook) get a
  :class:`CycleHookContext` when the cycle starts and exactly once when it ends, with the usage summed over every
  model call of the cycle (Observer retries, Reflector compression attempts and structured-extraction follow-ups:
  the reference leaves the latter out, which hides real spend), the cost (``None`` when any call's price is
  unknown: never a silent zero), the provider metadata of the last call that had some, and the error. Hook
  exceptions are logged and never fail a cycle; async hooks are awaited up to ``hook_timeout_s``.
* **the model's capabilities**, declared in ``ports``: a ``ConfigRoutedModel`` (the gateway) is bound to the
  configuration, so each role is routed as it says; an ``AttachmentAwareModel`` tells the flow whether the model
  serving a call reads attachments (``observeAttachments: 'auto'``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, assert_never

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.config import ObserveHooks, ResolvedConfig
from om_stream.core.cycles import (
    CallModel,
    CallOnExtracted,
    CycleStep,
    Flow,
    ReadExtracted,
    ReadMessages,
    ReadSegmentTexts,
    ServingModel,
    cycle_flow,
)
from om_stream.core.error_text import error_text
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.retention import cut_text
from om_stream.errors import ModelError, OMError
from om_stream.ports import (
    AttachmentAwareModel,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ConfigRoutedModel,
    ContentStore,
    Usage,
)

__all__ = ["CycleHookContext", "CycleObserver", "CycleRunner", "CycleStats", "RoleStats"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CycleHookContext:
    """What lifecycle hooks and cycle observers receive. ``usage`` is ``None`` when no model call was made."""

    phase: Literal["start", "end"]
    operation: Literal["observation", "reflection"]
    cycle_id: str
    thread_id: str | None
    resource_id: str
    trigger: str  # 'manual' | 'turn-sync' | 'async-buffer'
    kind: str  # 'buffer' | 'sync' | 'manual'
    thread_ids: tuple[str, ...] = ()
    tokens: int = 0  # message tokens to observe / observation tokens to reflect
    model: str | None = None
    usage: Usage | None = None
    cost_usd: float | None = None
    provider_metadata: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    error: str | None = None
    error_kind: str | None = None
    duration_ms: int = 0
    offline: bool = False  # served by the offline model (every configured model had failed)
    extraction_failures: tuple[tuple[str, str], ...] = ()


CycleObserver = Callable[[CycleHookContext], Awaitable[None] | None]


@dataclass
class RoleStats:
    calls: int = 0
    buffered: int = 0
    sync: int = 0
    extraction_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unknown_cost_calls: int = 0
    failures: int = 0
    offline_calls: int = 0
    model_seconds: float = 0.0

    def record(self, response: ChatResponse, kind: str, seconds: float, *, extraction: bool = False) -> None:
        if extraction:
            self.extraction_calls += 1
        else:
            self.calls += 1
            if kind == "buffer":
                self.buffered += 1
            else:
                self.sync += 1
        self.input_tokens += response.usage.input_tokens
        self.output_tokens += response.usage.output_tokens
        if response.cost_usd is None:
            self.unknown_cost_calls += 1
        else:
            self.cost_usd += response.cost_usd
        self.model_seconds += seconds


@dataclass
class CycleStats:
    observer: RoleStats = field(default_factory=RoleStats)
    reflector: RoleStats = field(default_factory=RoleStats)


@dataclass
class _Tally:
    """The model calls of one cycle."""

    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    cost_known: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    model: str | None = None

    def add(self, response: ChatResponse) -> None:
        self.calls += 1
        self.usage = self.usage + response.usage
        if response.cost_usd is None:
            self.cost_known = False
        else:
            self.cost += response.cost_usd
        if response.provider_metadata:
            self.metadata = dict(response.provider_metadata)
        self.model = response.model


@dataclass(frozen=True)
class _Cycle:
    """One cycle as it runs: the request, where its calls are counted, and the offline flag."""

    request: RequestObservation | RequestReflection
    stats: RoleStats
    tally: _Tally
    offline: bool


class CycleRunner:
    def __init__(self, *, store: ContentStore, model: ChatModel, offline: ChatModel, config: ResolvedConfig,
                 count_text: Callable[[str], int], stats: CycleStats | None = None,
                 observers: Iterable[CycleObserver] = (), hook_timeout_s: float = 5.0) -> None:
        self.store = store
        # the gateway routes each role as this configuration says
        self.model: ChatModel = model.bind_config(config) if isinstance(model, ConfigRoutedModel) else model
        self.offline = offline
        self.config = config
        self.count_text = count_text
        self.stats = stats or CycleStats()
        self.observers: list[CycleObserver] = list(observers)
        self.hook_timeout_s = hook_timeout_s
        # whether ``model`` declares attachment support, for the model it was worked out for: a check against a
        # runtime Protocol inspects the class's attributes, each time, and the model changes only when wrapped
        self._attachment_aware: tuple[ChatModel, AttachmentAwareModel | None] | None = None

    async def run(self, request: RequestObservation | RequestReflection) -> ModelResultArrived:
        operation: Literal["observation", "reflection"] = (
            "observation" if isinstance(request, RequestObservation) else "reflection")
        started = time.monotonic()
        role = self.stats.observer if operation == "observation" else self.stats.reflector
        cycle = _Cycle(request, role, _Tally(), request.use_offline_model)
        start = CycleHookContext(
            phase="start", operation=operation, cycle_id=request.cycle_id,
            thread_id=request.thread_ids[0] if request.thread_ids else None, resource_id=request.resource_id,
            trigger=request.trigger, kind=request.kind, thread_ids=request.thread_ids,
            tokens=request.message_tokens if isinstance(request, RequestObservation) else request.input_tokens,
            offline=request.use_offline_model)
        await self._notify(start)
        try:
            flow = cycle_flow(request, self.config, count_text=self.count_text, model=self._serving(request),
                              schemas=_JSON_SCHEMA)
            result = replace(await self._drive(flow, cycle), duration_ms=_ms(started))
        except (TimeoutError, OMError) as exc:
            role.failures += 1
            log.warning("%s cycle %s failed: %s", operation, request.cycle_id, exc)
            result = ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation=operation,
                                        ok=False, error=error_text(exc),
                                        error_kind=_error_kind(exc), duration_ms=_ms(started))
        tally = cycle.tally
        await self._notify(replace(
            start, phase="end", model=tally.model, usage=tally.usage if tally.calls else None,
            cost_usd=tally.cost if tally.calls and tally.cost_known else None, provider_metadata=tally.metadata,
            calls=tally.calls, error=result.error if not result.ok else None,
            error_kind=result.error_kind if not result.ok else None, duration_ms=_ms(started),
            extraction_failures=result.extraction_failures))
        return result

    def _serving(self, request: RequestObservation | RequestReflection) -> ServingModel:
        """What the flow may know of the model: read at each cycle, as ``model`` may be wrapped after
        construction (metrics)."""
        model = self.model
        known = self._attachment_aware
        if known is None or known[0] is not model:
            known = self._attachment_aware = (model, model if isinstance(model, AttachmentAwareModel) else None)
        aware = known[1]
        return ServingModel(
            accepts_attachments=aware.accepts_attachments if aware is not None else None,
            structured_output=not (request.use_offline_model or model is self.offline))

    # -- the flow's steps ----------------------------------------------------------------------------------------

    async def _drive(self, flow: Flow[ModelResultArrived], cycle: _Cycle) -> ModelResultArrived:
        """Performs each step the flow yields and sends the answer back; a failure the step says the flow handles
        is thrown into it, any other ends the cycle here."""
        try:
            step = next(flow)
            while True:
                try:
                    answer = await self._perform(step, cycle)
                except Exception as exc:
                    if not isinstance(exc, step.handled):
                        raise
                    step = flow.throw(exc)
                else:
                    step = flow.send(answer)
        except StopIteration as done:
            outcome: ModelResultArrived = done.value
            return outcome
        finally:
            flow.close()

    async def _perform(self, step: CycleStep, cycle: _Cycle) -> Any:
        if isinstance(step, CallModel):
            return await self._call(step.request, cycle, extraction=step.extraction)
        if isinstance(step, ReadMessages):
            return await self.store.get_messages(step.message_ids, resource_id=step.resource_id)
        if isinstance(step, ReadSegmentTexts):
            texts = await self.store.get_segment_texts(step.segment_ids)
            before = cycle.request.expire_before
            if before is None:
                return texts
            # stored texts may still hold entries past the retention window until the record's purge runs: they
            # are not sent to a model (an entry of a text without dates is dated by the cutoff itself: kept)
            return {i: cut_text(text, before, before).text for i, text in texts.items()}
        if isinstance(step, ReadExtracted):
            return (await self.store.get_thread_metadata(step.thread_id)).extracted
        if isinstance(step, CallOnExtracted):
            outcome = step.hook(step.context)
            if inspect.isawaitable(outcome):
                outcome = await asyncio.wait_for(_awaited(outcome), self.hook_timeout_s)
            return outcome
        assert_never(step)

    async def _call(self, request: ChatRequest, cycle: _Cycle, *, extraction: bool = False) -> ChatResponse:
        began = time.monotonic()
        response = await (self.offline if cycle.offline else self.model).complete(request)
        cycle.stats.record(response, cycle.request.kind, time.monotonic() - began, extraction=extraction)
        cycle.tally.add(response)
        if cycle.offline:
            cycle.stats.offline_calls += 1
        return response

    # -- hooks ---------------------------------------------------------------------------------------------------

    async def _notify(self, context: CycleHookContext) -> None:
        hooks: ObserveHooks | None = self.config.options.hooks
        if hooks is not None:
            hook = {("observation", "start"): hooks.on_observation_start,
                    ("observation", "end"): hooks.on_observation_end,
                    ("reflection", "start"): hooks.on_reflection_start,
                    ("reflection", "end"): hooks.on_reflection_end}[(context.operation, context.phase)]
            if hook is not None:
                await self._call_hook(hook, context)
        for observer in self.observers:
            await self._call_hook(observer, context)

    async def _call_hook(self, hook: Callable[..., Any], context: CycleHookContext) -> None:
        try:
            outcome = hook(context)
            if inspect.isawaitable(outcome):
                await asyncio.wait_for(_awaited(outcome), self.hook_timeout_s)
        except TimeoutError:
            log.warning("hook %r took longer than %.3g s on cycle %s; not waited for", hook, self.hook_timeout_s,
                        context.cycle_id)
        except Exception:  # a user's hook must never fail a cycle
            log.exception("hook %r failed on %s %s of cycle %s", hook, context.operation, context.phase,
                          context.cycle_id)


class _JsonSchema:
    """The flow's JSON Schema validator, on ``jsonschema`` (imported at first use: most configurations have no
    JSON Schema extractor)."""

    def check_schema(self, schema: Mapping[str, Any]) -> None:
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
        from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

        try:
            Draft202012Validator.check_schema(dict(schema))
        except SchemaError as exc:
            raise ValueError(exc.message) from None

    def validate(self, value: Any, schema: Mapping[str, Any]) -> None:
        from jsonschema import Draft202012Validator

        errors = sorted(Draft202012Validator(dict(schema)).iter_errors(value), key=lambda e: list(e.path))
        if errors:
            where = "/".join(str(p) for p in errors[0].path) or "(root)"
            raise ValueError(f"{where}: {errors[0].message}")


_JSON_SCHEMA = _JsonSchema()


async def _awaited(outcome: Awaitable[Any]) -> Any:
    return await outcome


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ModelError) and exc.kind:
        return exc.kind
    return type(exc).__name__


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
