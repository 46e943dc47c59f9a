"""Executes the model requests ``decide`` emits: loads content, builds the prompt, calls the model, parses, and
returns the outcome as a ``ModelResultArrived`` input. Shared by the embedded runner and the Kafka model workers.

Never raises for a model problem: a failure is a result too (``ok=False``), so the state machine decides what
happens next. Degenerate Observer output is retried once; the Reflector climbs the compression ladder and the
smallest valid attempt wins; an empty reflection is never returned as a success.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.config import ResolvedConfig
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.labels import thread_label
from om_stream.core.prompts.ladder import Attempt, choose, max_level, next_level
from om_stream.core.prompts.observer import build_observer_messages
from om_stream.core.prompts.parsing import ParsedOutput, parse_observer_output, parse_reflector_output
from om_stream.core.prompts.reflector import build_reflector_messages
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask, ThreadBatch
from om_stream.errors import ModelError, OMError
from om_stream.ports import ChatModel, ChatRequest, ChatResponse, ContentStore

__all__ = ["CycleRunner", "RoleStats"]

log = logging.getLogger(__name__)


@dataclass
class RoleStats:
    calls: int = 0
    buffered: int = 0
    sync: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    unknown_cost_calls: int = 0
    failures: int = 0
    offline_calls: int = 0
    model_seconds: float = 0.0

    def record(self, response: ChatResponse, kind: str, seconds: float) -> None:
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


class CycleRunner:
    def __init__(self, *, store: ContentStore, model: ChatModel, offline: ChatModel, config: ResolvedConfig,
                 count_text: Callable[[str], int], stats: CycleStats | None = None) -> None:
        self.store = store
        self.model = model
        self.offline = offline
        self.config = config
        self.count_text = count_text
        self.stats = stats or CycleStats()

    async def run(self, request: RequestObservation | RequestReflection) -> ModelResultArrived:
        operation: Literal["observation", "reflection"] = (
            "observation" if isinstance(request, RequestObservation) else "reflection")
        started = time.monotonic()
        try:
            if isinstance(request, RequestObservation):
                return await self._observe(request, started)
            return await self._reflect(request, started)
        except (TimeoutError, OMError) as exc:
            role = self.stats.observer if operation == "observation" else self.stats.reflector
            role.failures += 1
            kind = type(exc).__name__
            log.warning("%s cycle %s failed: %s", operation, request.cycle_id, exc)
            return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation=operation,
                                      ok=False, error=f"{kind}: {exc}"[:2000], error_kind=_error_kind(exc),
                                      duration_ms=_ms(started))

    async def _call(self, request: ChatRequest, *, offline: bool, kind: str, stats: RoleStats) -> ChatResponse:
        began = time.monotonic()
        response = await (self.offline if offline else self.model).complete(request)
        stats.record(response, kind, time.monotonic() - began)
        if offline:
            stats.offline_calls += 1
        return response

    # -- Observer ------------------------------------------------------------------------------------------------

    async def _observe(self, request: RequestObservation, started: float) -> ModelResultArrived:
        config = self.config
        messages = await self.store.get_messages(request.message_ids)
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
            prior_extracted={e.slug: metadata.extracted.get(e.slug) for e in inline
                             if e.include_previous_extraction and e.slug in metadata.extracted},
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
        parsed: ParsedOutput | None = None
        response: ChatResponse | None = None
        for _ in range(2):  # degenerate output is discarded and asked for once more
            response = await self._call(chat, offline=request.use_offline_model, kind=request.kind,
                                        stats=self.stats.observer)
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
        return ModelResultArrived(
            cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
            observations=parsed.observations, per_thread=per_thread, current_task=parsed.current_task,
            suggested_response=parsed.suggested_response, thread_title=parsed.thread_title,
            extracted_values=dict(parsed.extracted), extraction_failures=parsed.extraction_failures,
            duration_ms=_ms(started), model=response.model,
            fallback_model=response.model if request.use_offline_model else None)

    # -- Reflector -----------------------------------------------------------------------------------------------

    async def _reflect(self, request: RequestReflection, started: float) -> ModelResultArrived:
        config = self.config
        texts = await self.store.get_segment_texts(request.segment_ids)
        missing = [i for i in request.segment_ids if i not in texts]
        if missing:
            raise ModelError(f"{len(missing)} observation segments to reflect are missing from the content store")
        observations = "\n\n".join(texts[i] for i in request.segment_ids)
        inline = tuple(e for e in config.reflection_extractors if e.inline)
        level = request.compression_start_level
        top = max_level(level)
        attempts: list[Attempt] = []
        last: ChatResponse | None = None
        parsed_by_level: dict[int, ParsedOutput] = {}
        while True:
            task = ReflectorTask(observations=observations, level=level, target_tokens=request.target_tokens,
                                 input_tokens=request.input_tokens, guidance=request.guidance,
                                 want_hints=config.reflection_hints and request.kind != "buffer",
                                 inline_extractors=inline, instruction=config.reflection_instruction,
                                 multi_thread=config.scope == "resource")
            chat = ChatRequest(role="reflector", model="" if not request.use_offline_model else "offline",
                               messages=build_reflector_messages(task, self.count_text), task=task,
                               temperature=config.reflector_settings.temperature,
                               max_output_tokens=config.reflector_settings.max_output_tokens,
                               provider_options=config.reflector_provider_options,
                               thread_id=request.thread_ids[0] if request.thread_ids else None,
                               resource_id=request.resource_id)
            last = await self._call(chat, offline=request.use_offline_model, kind=request.kind,
                                    stats=self.stats.reflector)
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
        return ModelResultArrived(
            cycle_id=request.cycle_id, attempt=request.attempt, operation="reflection", ok=True,
            observations=chosen.text, suggested_response=parsed.suggested_response,
            current_task=parsed.current_task, extracted_values=dict(parsed.extracted),
            extraction_failures=parsed.extraction_failures, duration_ms=_ms(started), model=last.model,
            fallback_model=last.model if request.use_offline_model else None)


class _Unusable(ModelError):
    """The model answered, but nothing usable came out (degenerate or empty)."""


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ModelError) and exc.kind:
        return exc.kind
    return type(exc).__name__


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)

