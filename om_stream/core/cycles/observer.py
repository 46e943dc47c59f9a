"""The Observer cycle, as a flow (see ``steps``): from a ``RequestObservation`` to its ``ModelResultArrived``.

Rules kept here (each has a unit test):

* the messages to observe must be in the content store; an observation of none of them fails;
* in resource scope the messages are grouped by thread, each thread shown under its label (``obscureThreadIds``),
  and the per-thread answers are given back under the real thread ids;
* ``observeAttachments: 'auto'``: images and files are forwarded only when the model serving the call takes them
  (the offline model reads the task, not the prompt); their placeholders always stay;
* a degenerate (repetitive) answer is discarded and asked for once more; twice is a failure (``degenerate``), and
  so is an answer with no observations (``empty``): an unusable answer is never a success;
* the extractors' values follow a usable answer (``extraction``).

The result's ``duration_ms`` is left at 0: the driver times the cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from om_stream.core.commands import RequestObservation
from om_stream.core.config import ResolvedConfig
from om_stream.core.cycles.extraction import JsonSchemaValidator, MainExchange, extraction_flow
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
from om_stream.core.inputs import ModelResultArrived
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
    if config.scope == "resource":
        threads = tuple(ThreadBatch(thread_id=label, messages=tuple(m for m in messages if m.thread_id == real))
                        for label, real in labels.items())
    task = ObserverTask(
        messages=tuple(messages), previous_observations=previous, buffered_observations=buffered,
        prior_current_task=request.prior_current_task, prior_suggested_response=request.prior_suggested_response,
        prior_thread_title=request.prior_thread_title, prior_extracted=prior_values(inline, extracted),
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
    per_thread = None
    if parsed.per_thread is not None:
        per_thread = {labels.get(label, label): part.observations for label, part in parsed.per_thread.items()}
    values, failures = yield from extraction_flow(
        "observation", config.observation_extractors, parsed, MainExchange(chat, response),
        resource_id=request.resource_id, thread_id=primary, prior=extracted, model=model, schemas=schemas)
    return ModelResultArrived(
        cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
        observations=parsed.observations, per_thread=per_thread, current_task=parsed.current_task,
        suggested_response=parsed.suggested_response, thread_title=parsed.thread_title,
        extracted_values=values, extraction_failures=failures, model=response.model,
        fallback_model=response.model if request.use_offline_model else None)


def without_unreadable_attachments(chat: ChatRequest, config: ResolvedConfig, model: ServingModel) -> ChatRequest:
    """``observeAttachments: 'auto'``: the binaries dropped (never their placeholders, which are in the text)
    when the serving model says it cannot read them. A model that does not say gets them."""
    if config.observe_attachments != "auto" or not any(m.attachments for m in chat.messages):
        return chat
    if model.accepts_attachments is None or model.accepts_attachments(chat):
        return chat
    return replace(chat, messages=tuple(replace(m, attachments=()) for m in chat.messages))
