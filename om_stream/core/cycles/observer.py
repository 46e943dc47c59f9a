"""The Observer cycle, as a flow (see ``steps``): from a ``RequestObservation`` to its ``ModelResultArrived``.

Rules kept here (each has a unit test):

* the messages to observe must be in the content store; an observation of none of them fails;
* in resource scope the messages are grouped by thread, each thread shown under its label (``obscureThreadIds``)
  with its own prior metadata (hints, title, extracted values), and the per-thread answers (observations, hints,
  title, extracted values) are given back under the real thread ids;
* ``observeAttachments: 'auto'``: images and files are forwarded only when the model serving the call takes them
  (the offline model reads the task, not the prompt); their placeholders always stay;
* a degenerate (repetitive) answer is discarded and asked for once more; twice is a failure (``degenerate``), and
  so is an answer with no observations (``empty``): an unusable answer is never a success;
* the extractors' values follow a usable answer (``extraction``).

The result's ``duration_ms`` is left at 0: the driver times the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from om_stream.core.commands import RequestObservation
from om_stream.core.config import ResolvedConfig
from om_stream.core.cycles.extraction import (
    JsonSchemaValidator,
    MainExchange,
    ThreadExtraction,
    extraction_flow,
    threads_extraction_flow,
)
from om_stream.core.cycles.steps import (
    Flow,
    ServingModel,
    UnusableAnswer,
    call_model,
    read_extracted,
    read_messages,
    read_segment_texts,
)
from om_stream.core.extractors import prior_values
from om_stream.core.inputs import ModelResultArrived, ThreadMetadataUpdate
from om_stream.core.labels import thread_label
from om_stream.core.prompts.chat import ChatRequest
from om_stream.core.prompts.observer import build_observer_messages
from om_stream.core.prompts.parsing import ParsedOutput, parse_observer_output
from om_stream.core.prompts.tasks import ObserverTask, ThreadBatch
from om_stream.errors import ModelError

__all__ = ["OBSERVER_ASKS", "observation_flow", "without_unreadable_attachments"]

OBSERVER_ASKS = 2  # a degenerate answer is asked for once more


def observation_flow(request: RequestObservation, config: ResolvedConfig, *, count_text: Callable[[str], int],
                     model: ServingModel, schemas: JsonSchemaValidator) -> Flow[ModelResultArrived]:
    """Load what the Observer reads, call it (again once on a degenerate answer), parse, extract."""
    messages = yield from read_messages(request.message_ids, request.resource_id)
    if not messages:
        raise ModelError("none of the messages to observe are in the content store")
    texts = yield from read_segment_texts(request.previous_segment_ids + request.buffered_segment_ids)
    previous = "\n\n".join(texts[i] for i in request.previous_segment_ids if i in texts)
    buffered = "\n\n".join(texts[i] for i in request.buffered_segment_ids if i in texts)
    primary = request.thread_ids[0] if request.thread_ids else messages[0].thread_id
    extracted = yield from read_extracted(primary)
    inline = tuple(e for e in config.observation_extractors if e.inline)
    labels = {thread_label(t, config.obscure_thread_ids): t for t in request.thread_ids}
    threads: tuple[ThreadBatch, ...] = ()
    thread_extracted: dict[str, Mapping[str, Any]] = {primary: extracted}
    if config.scope == "resource":
        priors = {p.thread_id: p for p in request.thread_priors}
        batches = []
        for label, real in labels.items():
            if real not in thread_extracted:
                thread_extracted[real] = yield from read_extracted(real)
            prior = priors.get(real)
            batches.append(ThreadBatch(
                thread_id=label, messages=tuple(m for m in messages if m.thread_id == real),
                prior_current_task=prior.current_task if prior else None,
                prior_suggested_response=prior.suggested_response if prior else None,
                prior_thread_title=prior.title if prior else None,
                prior_extracted=prior_values(inline, thread_extracted[real])))
        threads = tuple(batches)
    task = ObserverTask(
        messages=tuple(messages), previous_observations=previous, buffered_observations=buffered,
        prior_current_task=request.prior_current_task, prior_suggested_response=request.prior_suggested_response,
        prior_thread_title=request.prior_thread_title,
        prior_extracted=prior_values(inline, extracted) if not threads else {},
        want_hints=request.want_hints, want_thread_title=config.thread_title, inline_extractors=inline,
        instruction=config.observation_instruction, threads=threads)
    chat = ChatRequest(role="observer", model="" if not request.use_offline_model else "offline",
                       messages=build_observer_messages(task, count_text,
                                                        attachments_policy=config.observe_attachments,
                                                        previous_budget=config.previous_observer_tokens),
                       task=task, temperature=config.observer_settings.temperature,
                       max_output_tokens=config.observer_settings.max_output_tokens,
                       provider_options=config.observer_provider_options, thread_id=primary,
                       resource_id=request.resource_id)
    if not request.use_offline_model:
        chat = without_unreadable_attachments(chat, config, model)
    parsed: ParsedOutput | None = None
    response = None
    for _ in range(OBSERVER_ASKS):
        response = yield from call_model(chat)
        parsed = parse_observer_output(response.text, extractors=inline, multi_thread=bool(threads))
        if not parsed.degenerate:
            break
    assert parsed is not None  # OBSERVER_ASKS >= 1
    assert response is not None
    if parsed.degenerate:
        raise UnusableAnswer("the Observer produced degenerate (repetitive) output twice", kind="degenerate")
    if parsed.empty:
        raise UnusableAnswer("the Observer returned no observations", kind="empty")
    exchange = MainExchange(chat, response)
    result = ModelResultArrived(
        cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
        observations=parsed.observations, current_task=parsed.current_task,
        suggested_response=parsed.suggested_response, thread_title=parsed.thread_title, model=response.model,
        fallback_model=response.model if request.use_offline_model else None)
    if threads:
        return (yield from _per_thread_result(result, parsed, exchange, labels, threads, thread_extracted, config,
                                              previous=previous, resource_id=request.resource_id, model=model,
                                              schemas=schemas))
    outcome = yield from extraction_flow(
        "observation", config.observation_extractors, parsed, exchange, resource_id=request.resource_id,
        thread_id=primary, prior=extracted, model=model, schemas=schemas, observed_messages=messages,
        active_observations=previous)
    return replace(result, extracted_values=outcome.values, extraction_failures=outcome.failures,
                   working_memory=outcome.working_memory)


def _per_thread_result(result: ModelResultArrived, parsed: ParsedOutput, exchange: MainExchange,
                       labels: Mapping[str, str], threads: tuple[ThreadBatch, ...],
                       thread_extracted: Mapping[str, Mapping[str, Any]], config: ResolvedConfig, *, previous: str,
                       resource_id: str, model: ServingModel,
                       schemas: JsonSchemaValidator) -> Flow[ModelResultArrived]:
    """A multi-thread answer given back by real thread id: each thread's observations, hints, title and values.
    Hints and a title written outside every thread section belong to the thread only when there is one."""
    sections = parsed.per_thread or {}
    alone = len(threads) == 1
    wanted: list[ThreadExtraction] = []
    for batch in threads:
        real = labels.get(batch.thread_id, batch.thread_id)
        part = sections.get(batch.thread_id)
        wanted.append(ThreadExtraction(thread_id=real, prior=thread_extracted.get(real, {}),
                                       values=part.extracted if part else {},
                                       observations=part.observations if part else "",
                                       messages=tuple(batch.messages)))
    outcomes, failures = yield from threads_extraction_flow(
        config.observation_extractors, parsed, exchange, wanted, resource_id=resource_id, model=model,
        schemas=schemas, active_observations=previous)
    metadata: dict[str, ThreadMetadataUpdate] = {}
    for batch, thread in zip(threads, wanted, strict=True):
        part = sections.get(batch.thread_id)
        outcome = outcomes.get(thread.thread_id)
        metadata[thread.thread_id] = ThreadMetadataUpdate(
            current_task=_own(part, "current_task", parsed, alone),
            suggested_response=_own(part, "suggested_response", parsed, alone),
            thread_title=_own(part, "thread_title", parsed, alone),
            extracted_values=outcome.values if outcome else {},
            working_memory=outcome.working_memory if outcome else None)
    first = metadata[wanted[0].thread_id]
    per_thread = {labels.get(label, label): part.observations for label, part in sections.items()}
    return replace(result, per_thread=per_thread, current_task=first.current_task,
                   suggested_response=first.suggested_response, thread_title=first.thread_title,
                   extracted_values=first.extracted_values, working_memory=first.working_memory,
                   extraction_failures=failures, thread_metadata=metadata)


def _own(part: ParsedOutput | None, name: str, whole: ParsedOutput, alone: bool) -> str | None:
    value: str | None = getattr(part, name) if part is not None else None
    return value or (getattr(whole, name) if alone else None)


def without_unreadable_attachments(chat: ChatRequest, config: ResolvedConfig, model: ServingModel) -> ChatRequest:
    """``observeAttachments: 'auto'``: the binaries dropped (never their placeholders, which are in the text)
    when the serving model says it cannot read them. A model that does not say gets them."""
    if config.observe_attachments != "auto" or not any(m.attachments for m in chat.messages):
        return chat
    if model.accepts_attachments is None or model.accepts_attachments(chat):
        return chat
    return replace(chat, messages=tuple(replace(m, attachments=()) for m in chat.messages))
