"""The Reflector cycle, as a flow (see ``steps``): from a ``RequestReflection`` to its ``ModelResultArrived``.

Rules kept here (each has a unit test):

* every segment of the log to reflect must be in the content store, or the cycle fails before any call;
* the compression ladder (``core.prompts.ladder``): from ``compression_start_level``, an attempt that is not a
  usable answer under the target is asked for again one level firmer, up to the ladder's top; the first usable
  attempt under target stops the climb;
* the attempt kept is the first under target, else the smallest usable one; its own answer gives the hints and
  the extractors' values; the result names each attempt the climb went on from (``attempts``), so the engine can
  announce every retry;
* an empty or degenerate reflection is never a success: when every attempt is unusable the cycle fails
  (``degenerate``);
* the bound does not depend on the model: when the attempt kept is still not under target, the engine condenses
  it itself (``core.condensation``, to ``CONDENSED_SHARE`` of the target); the offline model's cycle, the last
  resort, condenses the log it was given when its answers are unusable or the call fails, so it always ends under
  target.

The result's ``duration_ms`` is left at 0: the driver times the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from om_stream.core.commands import RequestReflection
from om_stream.core.condensation import condense
from om_stream.core.config import ResolvedConfig
from om_stream.core.cycles.extraction import JsonSchemaValidator, MainExchange, extraction_flow
from om_stream.core.cycles.steps import (
    Flow,
    ServingModel,
    UnusableAnswer,
    call_model,
    read_extracted,
    read_segment_texts,
)
from om_stream.core.extractors import Extractor, prior_values
from om_stream.core.inputs import AttemptOutcome, ModelResultArrived
from om_stream.core.prompts.chat import ChatRequest, ChatResponse
from om_stream.core.prompts.ladder import Attempt, choose, max_level, next_level
from om_stream.core.prompts.parsing import ParsedOutput, parse_reflector_output
from om_stream.core.prompts.reflector import build_reflector_messages
from om_stream.core.prompts.tasks import ReflectorTask
from om_stream.errors import ModelError

__all__ = ["CONDENSED_SHARE", "LadderClimb", "climb_ladder", "reflection_flow", "reflector_request"]

# a condensed reflection aims below its target, so the log has room to grow before the next reflection is due
CONDENSED_SHARE = 0.8


@dataclass(frozen=True)
class LadderClimb:
    """Every attempt of one climb, in order, with each level's exchange and parsed answer."""

    attempts: tuple[Attempt, ...]
    exchanges: Mapping[int, MainExchange]
    parsed: Mapping[int, ParsedOutput]

    @property
    def last(self) -> ChatResponse:
        return self.exchanges[self.attempts[-1].level].answer

    def retried(self) -> tuple[AttemptOutcome, ...]:
        """Each attempt the climb went on from, with the level it went on to."""
        return tuple(AttemptOutcome(level=a.level, tokens=a.tokens if a.valid else 0, next_level=b.level)
                     for a, b in zip(self.attempts, self.attempts[1:], strict=False))


def reflection_flow(request: RequestReflection, config: ResolvedConfig, *, count_text: Callable[[str], int],
                    model: ServingModel, schemas: JsonSchemaValidator) -> Flow[ModelResultArrived]:
    """Load the log, climb the ladder, keep the best attempt, extract."""
    texts = yield from read_segment_texts(request.segment_ids)
    missing = [i for i in request.segment_ids if i not in texts]
    if missing:
        raise ModelError(f"{len(missing)} observation segments to reflect are missing from the content store")
    observations = "\n\n".join(texts[i] for i in request.segment_ids)
    inline = tuple(e for e in config.reflection_extractors if e.inline)
    primary = request.thread_ids[0] if request.thread_ids else None
    extracted: Mapping[str, Any] = (yield from read_extracted(primary)) if primary else {}
    try:
        climb = yield from climb_ladder(request, config, observations, inline, extracted, count_text=count_text)
    except ModelError:
        if not request.use_offline_model:
            raise
        return _condensed_input(request, observations, "failed", count_text)
    chosen = choose(climb.attempts, request.target_tokens)
    if chosen is None:
        if request.use_offline_model:
            return _condensed_input(request, observations, "unusable", count_text)
        raise UnusableAnswer(f"every reflection attempt was empty or degenerate (levels "
                             f"{climb.attempts[0].level}-{climb.attempts[-1].level})", kind="degenerate")
    parsed = climb.parsed[chosen.level]
    outcome = yield from extraction_flow(
        "reflection", config.reflection_extractors, parsed, climb.exchanges[chosen.level],
        resource_id=request.resource_id, thread_id=primary, prior=extracted, model=model, schemas=schemas,
        active_observations=observations)
    last = climb.last
    result = ModelResultArrived(
        cycle_id=request.cycle_id, attempt=request.attempt, operation="reflection", ok=True,
        observations=chosen.text, suggested_response=parsed.suggested_response,
        current_task=parsed.current_task, extracted_values=outcome.values, extraction_failures=outcome.failures,
        working_memory=outcome.working_memory, attempts=climb.retried(),
        model=last.model, fallback_model=last.model if request.use_offline_model else None)
    if chosen.tokens < request.target_tokens:
        return result
    folded = condense(chosen.text, _budget(request), count_text)
    return replace(result, observations=folded.text, condensed="over_target", folded_observations=folded.folded,
                   condensed_from_tokens=chosen.tokens)


def _budget(request: RequestReflection) -> int:
    return max(1, min(request.target_tokens - 1, round(request.target_tokens * CONDENSED_SHARE)))


def _condensed_input(request: RequestReflection, observations: str, reason: Literal["unusable", "failed"],
                     count_text: Callable[[str], int]) -> ModelResultArrived:
    """The offline cycle's last word: the log itself, condensed under target, when no answer could be used."""
    folded = condense(observations, _budget(request), count_text)
    return ModelResultArrived(
        cycle_id=request.cycle_id, attempt=request.attempt, operation="reflection", ok=True,
        observations=folded.text, model="offline", fallback_model="offline", condensed=reason,
        folded_observations=folded.folded, condensed_from_tokens=count_text(observations))


def climb_ladder(request: RequestReflection, config: ResolvedConfig, observations: str,
                 inline: tuple[Extractor, ...], extracted: Mapping[str, Any], *,
                 count_text: Callable[[str], int]) -> Flow[LadderClimb]:
    """One Reflector call per level from the request's start level, until an attempt is usable and under target
    or the ladder's top was tried."""
    level = request.compression_start_level
    top = max_level(level)
    attempts: list[Attempt] = []
    exchanges: dict[int, MainExchange] = {}
    parsed_by_level: dict[int, ParsedOutput] = {}
    while True:
        chat = reflector_request(request, config, observations, level, inline, extracted, count_text=count_text)
        response = yield from call_model(chat)
        exchanges[level] = MainExchange(chat, response)
        parsed = parse_reflector_output(response.text, extractors=inline)
        parsed_by_level[level] = parsed
        tokens = count_text(parsed.observations) if not parsed.empty else 0
        attempt = Attempt(level=level, text=parsed.observations, tokens=tokens,
                          valid=not parsed.empty and not parsed.degenerate)
        attempts.append(attempt)
        following = next_level(level, top, attempt_tokens=tokens if attempt.valid else None,
                               target_tokens=request.target_tokens)
        if following is None:
            return LadderClimb(tuple(attempts), exchanges, parsed_by_level)
        level = following


def reflector_request(request: RequestReflection, config: ResolvedConfig, observations: str, level: int,
                      inline: tuple[Extractor, ...], extracted: Mapping[str, Any], *,
                      count_text: Callable[[str], int]) -> ChatRequest:
    """The Reflector call at one ladder level. Hints are asked for on a synchronous reflection only."""
    task = ReflectorTask(observations=observations, level=level, target_tokens=request.target_tokens,
                         input_tokens=request.input_tokens, guidance=request.guidance,
                         want_hints=config.reflection_hints and request.kind != "buffer",
                         prior_extracted=prior_values(inline, extracted), inline_extractors=inline,
                         instruction=config.reflection_instruction, multi_thread=config.scope == "resource")
    return ChatRequest(role="reflector", model="" if not request.use_offline_model else "offline",
                       messages=build_reflector_messages(task, count_text), task=task,
                       temperature=config.reflector_settings.temperature,
                       max_output_tokens=config.reflector_settings.max_output_tokens,
                       provider_options=config.reflector_provider_options,
                       thread_id=request.thread_ids[0] if request.thread_ids else None,
                       resource_id=request.resource_id)
