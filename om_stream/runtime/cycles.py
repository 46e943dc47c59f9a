"""Executes the model requests ``decide`` emits: loads content, builds the prompt, calls the model, parses, and
returns the outcome as a ``ModelResultArrived`` input. Shared by the embedded runner and the Kafka model workers.

Never raises for a model problem: a failure is a result too (``ok=False``), so the state machine decides what
happens next. Degenerate Observer output is retried once; the Reflector climbs the compression ladder and the
smallest valid attempt wins; an empty reflection is never returned as a success.

Around each cycle:

* **hooks**: ``config.options.hooks`` (``ObserveHooks``) and the runner's ``observers`` (e.g. a metrics hook) get a
  :class:`CycleHookContext` when the cycle starts and exactly once when it ends, with the usage summed over every
  model call of the cycle (Observer retries, Reflector compression attempts and structured-extraction follow-ups:
  the reference leaves the latter out, which hides real spend), the cost (``None`` when any call's price is
  unknown: never a silent zero), the provider metadata of the last call that had some, and the error. Hook
  exceptions are logged and never fail a cycle; async hooks are awaited up to ``hook_timeout_s``.
* **attachments**: with ``observeAttachments: 'auto'`` images and files are forwarded only when the model that
  serves the call takes them (the gateway's ``accepts_attachments``); their placeholders always stay.
* **structured extractors** (an ``Extractor`` with a ``schema``): after a successful main call, one follow-up call
  asks the same model for a JSON object whose properties are the extractors' slugs (all optional), showing the
  exchange it just had and the prior values; a malformed answer is asked for once more; each value is validated
  against its schema (JSON Schema or a pydantic model), then ``on_extracted`` may replace it. A failure is reported
  per slug (``extraction_failures``) and never drops the other values.
* **metadataKeyPath**: values are persisted under the thread's ``extracted`` metadata at the key the path names
  (``extracted.<slug>`` by default → ``<slug>``); ``false`` keeps a value out of the metadata (``on_extracted``
  still sees it, as the working-memory extractor needs).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.config import ObserveHooks, ResolvedConfig
from om_stream.core.extractors import ExtractionContext, Extractor
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.labels import thread_label
from om_stream.core.prompts.chat import ChatMessage
from om_stream.core.prompts.ladder import Attempt, choose, max_level, next_level
from om_stream.core.prompts.observer import build_observer_messages
from om_stream.core.prompts.parsing import ParsedOutput, parse_observer_output, parse_reflector_output
from om_stream.core.prompts.reflector import build_reflector_messages
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask, ThreadBatch
from om_stream.errors import ModelError, OMError
from om_stream.ports import ChatModel, ChatRequest, ChatResponse, ContentStore, Usage

__all__ = ["CycleHookContext", "CycleObserver", "CycleRunner", "CycleStats", "RoleStats"]

log = logging.getLogger(__name__)

EXTRACTION_SYSTEM = (
    "You extract structured values from a memory-keeping exchange. Answer with one JSON object and nothing else: "
    "no prose, no code fence. Its properties are the value names asked for; every property is optional. Omit a "
    "property when the conversation gives nothing for it; carry forward a prior value that is still valid.")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


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
        bind = getattr(model, "bind_config", None)  # the gateway routes each role as this configuration says
        self.model: ChatModel = bind(config) if callable(bind) else model
        self.offline = offline
        self.config = config
        self.count_text = count_text
        self.stats = stats or CycleStats()
        self.observers: list[CycleObserver] = list(observers)
        self.hook_timeout_s = hook_timeout_s

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
            if isinstance(request, RequestObservation):
                result = await self._observe(request, cycle, started)
            else:
                result = await self._reflect(request, cycle, started)
        except (TimeoutError, OMError) as exc:
            role.failures += 1
            log.warning("%s cycle %s failed: %s", operation, request.cycle_id, exc)
            result = ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation=operation,
                                        ok=False, error=f"{type(exc).__name__}: {exc}"[:2000],
                                        error_kind=_error_kind(exc), duration_ms=_ms(started))
        tally = cycle.tally
        await self._notify(replace(
            start, phase="end", model=tally.model, usage=tally.usage if tally.calls else None,
            cost_usd=tally.cost if tally.calls and tally.cost_known else None, provider_metadata=tally.metadata,
            calls=tally.calls, error=result.error if not result.ok else None,
            error_kind=result.error_kind if not result.ok else None, duration_ms=_ms(started),
            extraction_failures=result.extraction_failures))
        return result

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

    # -- model calls ---------------------------------------------------------------------------------------------

    async def _call(self, request: ChatRequest, cycle: _Cycle, *, extraction: bool = False) -> ChatResponse:
        began = time.monotonic()
        response = await (self.offline if cycle.offline else self.model).complete(request)
        cycle.stats.record(response, cycle.request.kind, time.monotonic() - began, extraction=extraction)
        cycle.tally.add(response)
        if cycle.offline:
            cycle.stats.offline_calls += 1
        return response

    def _without_unsupported_attachments(self, chat: ChatRequest, offline: bool) -> ChatRequest:
        """``observeAttachments: 'auto'``: drop the binaries (never the placeholders) when the serving model
        cannot read them."""
        if offline or self.config.observe_attachments != "auto" or not any(m.attachments for m in chat.messages):
            return chat
        accepts = getattr(self.model, "accepts_attachments", None)
        if not callable(accepts) or accepts(chat):
            return chat
        return replace(chat, messages=tuple(replace(m, attachments=()) for m in chat.messages))

    # -- Observer ------------------------------------------------------------------------------------------------

    async def _observe(self, request: RequestObservation, cycle: _Cycle, started: float) -> ModelResultArrived:
        config = self.config
        messages = await self.store.get_messages(request.message_ids, resource_id=request.resource_id)
        if not messages:
            raise ModelError("none of the messages to observe are in the content store")
        texts = await self.store.get_segment_texts(request.previous_segment_ids + request.buffered_segment_ids)
        previous = "\n\n".join(texts[i] for i in request.previous_segment_ids if i in texts)
        buffered = "\n\n".join(texts[i] for i in request.buffered_segment_ids if i in texts)
        primary = request.thread_ids[0] if request.thread_ids else messages[0].thread_id
        metadata = await self.store.get_thread_metadata(primary)
        inline = tuple(e for e in config.observation_extractors if e.inline)
        labels = {thread_label(t, config.obscure_thread_ids): t for t in request.thread_ids}
        threads: tuple[ThreadBatch, ...] = ()
        if config.scope == "resource":
            threads = tuple(ThreadBatch(thread_id=label, messages=tuple(m for m in messages if m.thread_id == real))
                            for label, real in labels.items())
        task = ObserverTask(
            messages=tuple(messages), previous_observations=previous, buffered_observations=buffered,
            prior_current_task=request.prior_current_task, prior_suggested_response=request.prior_suggested_response,
            prior_thread_title=request.prior_thread_title,
            prior_extracted=_prior(inline, metadata.extracted),
            want_hints=request.want_hints, want_thread_title=config.thread_title, inline_extractors=inline,
            instruction=config.observation_instruction, threads=threads)
        chat = ChatRequest(role="observer", model="" if not request.use_offline_model else "offline",
                           messages=build_observer_messages(task, self.count_text,
                                                            attachments_policy=config.observe_attachments,
                                                            previous_budget=config.previous_observer_tokens),
                           task=task, temperature=config.observer_settings.temperature,
                           max_output_tokens=config.observer_settings.max_output_tokens,
                           provider_options=config.observer_provider_options, thread_id=primary,
                           resource_id=request.resource_id)
        chat = self._without_unsupported_attachments(chat, request.use_offline_model)
        parsed: ParsedOutput | None = None
        response: ChatResponse | None = None
        for _ in range(2):  # degenerate output is discarded and asked for once more
            response = await self._call(chat, cycle)
            parsed = parse_observer_output(response.text, extractors=inline, multi_thread=bool(threads))
            if not parsed.degenerate:
                break
        assert parsed is not None
        assert response is not None
        if parsed.degenerate:
            raise _Unusable("the Observer produced degenerate (repetitive) output twice", kind="degenerate")
        if parsed.empty:
            raise _Unusable("the Observer returned no observations", kind="empty")
        per_thread = None
        if parsed.per_thread is not None:
            per_thread = {labels.get(label, label): part.observations for label, part in parsed.per_thread.items()}
        values, failures = await self._extracted(
            "observation", config.observation_extractors, parsed, chat, response, cycle,
            thread_id=primary, prior=metadata.extracted)
        return ModelResultArrived(
            cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
            observations=parsed.observations, per_thread=per_thread, current_task=parsed.current_task,
            suggested_response=parsed.suggested_response, thread_title=parsed.thread_title,
            extracted_values=values, extraction_failures=failures,
            duration_ms=_ms(started), model=response.model,
            fallback_model=response.model if request.use_offline_model else None)

    # -- Reflector -----------------------------------------------------------------------------------------------

    async def _reflect(self, request: RequestReflection, cycle: _Cycle, started: float) -> ModelResultArrived:
        config = self.config
        texts = await self.store.get_segment_texts(request.segment_ids)
        missing = [i for i in request.segment_ids if i not in texts]
        if missing:
            raise ModelError(f"{len(missing)} observation segments to reflect are missing from the content store")
        observations = "\n\n".join(texts[i] for i in request.segment_ids)
        inline = tuple(e for e in config.reflection_extractors if e.inline)
        primary = request.thread_ids[0] if request.thread_ids else None
        extracted = (await self.store.get_thread_metadata(primary)).extracted if primary else {}
        level = request.compression_start_level
        top = max_level(level)
        attempts: list[Attempt] = []
        last: ChatResponse | None = None
        chats: dict[int, tuple[ChatRequest, ChatResponse]] = {}
        parsed_by_level: dict[int, ParsedOutput] = {}
        while True:
            task = ReflectorTask(observations=observations, level=level, target_tokens=request.target_tokens,
                                 input_tokens=request.input_tokens, guidance=request.guidance,
                                 want_hints=config.reflection_hints and request.kind != "buffer",
                                 prior_extracted=_prior(inline, extracted),
                                 inline_extractors=inline, instruction=config.reflection_instruction,
                                 multi_thread=config.scope == "resource")
            chat = ChatRequest(role="reflector", model="" if not request.use_offline_model else "offline",
                               messages=build_reflector_messages(task, self.count_text), task=task,
                               temperature=config.reflector_settings.temperature,
                               max_output_tokens=config.reflector_settings.max_output_tokens,
                               provider_options=config.reflector_provider_options,
                               thread_id=primary, resource_id=request.resource_id)
            last = await self._call(chat, cycle)
            chats[level] = (chat, last)
            parsed = parse_reflector_output(last.text, extractors=inline)
            parsed_by_level[level] = parsed
            tokens = self.count_text(parsed.observations) if not parsed.empty else 0
            attempt = Attempt(level=level, text=parsed.observations, tokens=tokens,
                              valid=not parsed.empty and not parsed.degenerate)
            attempts.append(attempt)
            if attempt.valid and tokens < request.target_tokens:
                break
            following = next_level(level, top)
            if following is None:
                break
            level = following
        chosen = choose(attempts, request.target_tokens)
        if chosen is None:
            raise _Unusable(f"every reflection attempt was empty or degenerate (levels "
                            f"{attempts[0].level}-{attempts[-1].level})", kind="degenerate")
        parsed = parsed_by_level[chosen.level]
        assert last is not None
        chosen_chat, chosen_response = chats[chosen.level]
        values, failures = await self._extracted(
            "reflection", config.reflection_extractors, parsed, chosen_chat, chosen_response, cycle,
            thread_id=primary, prior=extracted)
        return ModelResultArrived(
            cycle_id=request.cycle_id, attempt=request.attempt, operation="reflection", ok=True,
            observations=chosen.text, suggested_response=parsed.suggested_response,
            current_task=parsed.current_task, extracted_values=values,
            extraction_failures=failures, duration_ms=_ms(started), model=last.model,
            fallback_model=last.model if request.use_offline_model else None)

    # -- extractors ----------------------------------------------------------------------------------------------

    async def _extracted(self, source: Literal["observation", "reflection"], extractors: Sequence[Extractor],
                         parsed: ParsedOutput, chat: ChatRequest, answer: ChatResponse, cycle: _Cycle, *,
                         thread_id: str | None, prior: Mapping[str, Any]
                         ) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
        """Every custom extractor's value of this cycle: inline ones from the parsed answer, structured ones from a
        follow-up call; then ``on_extracted``; keyed for persistence by ``metadataKeyPath``."""
        context = ExtractionContext(source=source, thread_id=thread_id, resource_id=cycle.request.resource_id,
                                    raw_observations=parsed.observations)
        values: dict[str, Any] = dict(parsed.extracted)
        failures: list[tuple[str, str]] = list(parsed.extraction_failures)
        structured = [e for e in extractors if not e.inline]
        if structured:
            found, failed = await self._structured(structured, context, chat, answer, cycle, prior)
            values.update(found)
            failures.extend(failed)
        by_slug = {e.slug: e for e in extractors}
        persisted: dict[str, Any] = {}
        for slug, value in values.items():
            extractor = by_slug.get(slug)
            if extractor is None:  # a built-in value the parser also reports
                persisted[slug] = value
                continue
            key = _storage_key(extractor)
            final = value
            if extractor.on_extracted is not None:
                try:
                    outcome = extractor.on_extracted(replace(context, previous=prior.get(key or slug),
                                                             current=value))
                    if inspect.isawaitable(outcome):
                        outcome = await asyncio.wait_for(_awaited(outcome), self.hook_timeout_s)
                except Exception as exc:  # noqa: BLE001 - the user's callback: its failure is the extractor's
                    failures.append((slug, f"onExtracted failed: {type(exc).__name__}: {exc}"[:2000]))
                    continue
                if outcome is not None:
                    final = outcome
            if key is not None:
                persisted[key] = final
        return persisted, tuple(failures)

    async def _structured(self, extractors: Sequence[Extractor], context: ExtractionContext, chat: ChatRequest,
                          answer: ChatResponse, cycle: _Cycle, prior: Mapping[str, Any]
                          ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        failures: list[tuple[str, str]] = []
        schemas: dict[str, tuple[Extractor, Any, dict[str, Any]]] = {}
        for extractor in extractors:
            try:
                declared, json_schema = _schema(extractor, context)
            except (TypeError, ValueError) as exc:
                failures.append((extractor.slug, f"invalid schema: {exc}"[:2000]))
                continue
            if json_schema is not None:
                schemas[extractor.slug] = (extractor, declared, json_schema)
        if not schemas:
            return {}, failures
        if cycle.offline or self.model is self.offline:
            return {}, failures + [(slug, "the offline model does not extract structured values")
                                   for slug in schemas]
        properties: dict[str, Any] = {}
        definitions: dict[str, Any] = {}
        for slug, (_, _, json_schema) in schemas.items():
            own = dict(json_schema)
            definitions.update(own.pop("$defs", {}))  # pydantic's refs point at the root: hoist them there
            properties[slug] = own
        combined: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if definitions:
            combined["$defs"] = definitions
        lines = ["Return the following values as one JSON object (each property optional):"]
        for slug, (extractor, _, _) in schemas.items():
            lines.append(f"- {slug}: {extractor.instructions_for(context).strip()}")
            key = _storage_key(extractor) or slug
            if extractor.include_previous_extraction and prior.get(key) is not None:
                lines.append(f"  Prior value: {json.dumps(prior[key], ensure_ascii=False, default=str)}")
        history = tuple(m for m in chat.messages if m.role != "system")
        messages = (ChatMessage(role="system", content=EXTRACTION_SYSTEM), *history,
                    ChatMessage(role="assistant", content=answer.text),
                    ChatMessage(role="user", content="\n".join(lines)))
        route = answer.provider_metadata.get("gateway", {}).get("route", "") if isinstance(
            answer.provider_metadata.get("gateway"), dict) else ""
        request = ChatRequest(role="extractor", model=str(route), messages=messages, response_schema=combined,
                              temperature=0.0, provider_options=chat.provider_options, thread_id=chat.thread_id,
                              resource_id=chat.resource_id)
        document: dict[str, Any] | None = None
        problem = ""
        for _ in range(2):  # a malformed answer is asked for once more, with the demand made explicit
            try:
                response = await self._call(request, cycle, extraction=True)
            except ModelError as exc:
                problem = f"the extraction call failed: {exc}"
                break
            document, problem = _json_object(response.text)
            if document is not None:
                break
            again = ChatMessage(role="user", content=f"That was not a valid JSON object ({problem}). Answer again "
                                                     "with only the JSON object.")
            request = replace(request, messages=(*request.messages,
                                                 ChatMessage(role="assistant", content=response.text), again))
        if document is None:
            return {}, failures + [(slug, problem[:2000]) for slug in schemas]
        values: dict[str, Any] = {}
        for slug, (_, declared, json_schema) in schemas.items():
            if document.get(slug) is None:
                continue
            try:
                values[slug] = _validated(document[slug], declared, json_schema)
            except (ValueError, ValidationError) as exc:
                failures.append((slug, f"the value does not match the schema: {exc}"[:2000]))
        return values, failures


class _Unusable(ModelError):
    """The model answered, but nothing usable came out (degenerate or empty)."""


async def _awaited(outcome: Awaitable[Any]) -> Any:
    return await outcome


def _prior(extractors: Iterable[Extractor], extracted: Mapping[str, Any]) -> dict[str, Any]:
    """Prior values of the extractors that show them, by slug (the tag the model reads), from their storage key."""
    prior: dict[str, Any] = {}
    for extractor in extractors:
        key = _storage_key(extractor)
        if extractor.include_previous_extraction and key is not None and extracted.get(key) is not None:
            prior[extractor.slug] = extracted[key]
    return prior


def _storage_key(extractor: Extractor) -> str | None:
    """The key under the thread's ``extracted`` metadata: the ``metadataKeyPath`` without its ``extracted.``
    namespace; ``None`` when the value is not persisted."""
    path = extractor.metadata_path()
    return None if path is None else path.removeprefix("extracted.")


def _schema(extractor: Extractor, context: ExtractionContext) -> tuple[Any, dict[str, Any] | None]:
    """(the schema as declared, its JSON Schema); a dynamic schema may return None (no value this cycle)."""
    declared: Any = extractor.schema
    if callable(declared) and not isinstance(declared, type):
        declared = declared(context)
    if declared is None:
        return None, None
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return declared, declared.model_json_schema()
    if isinstance(declared, Mapping):
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
        from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

        try:
            Draft202012Validator.check_schema(dict(declared))
        except SchemaError as exc:
            raise ValueError(exc.message) from None
        return declared, dict(declared)
    raise TypeError(f"extractor {extractor.name!r}: schema must be a JSON Schema dict or a pydantic model class")


def _validated(value: Any, declared: Any, json_schema: dict[str, Any]) -> Any:
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return declared.model_validate(value).model_dump(mode="json", exclude_none=True)
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(json_schema).iter_errors(value), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(root)"
        raise ValueError(f"{where}: {errors[0].message}")
    return value


def _json_object(text: str) -> tuple[dict[str, Any] | None, str]:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body:
        return None, "empty answer"
    try:
        value = json.loads(body)
    except ValueError as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    return value, ""


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ModelError) and exc.kind:
        return exc.kind
    return type(exc).__name__


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
