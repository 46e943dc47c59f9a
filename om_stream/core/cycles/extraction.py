"""The custom extractors' values of one cycle, as a flow (see ``steps``).

Inline extractors' values come from the parsed Observer/Reflector answer. Structured ones (with a ``schema``) come
from one follow-up call (``core.prompts.extraction``) after the main call succeeded: a malformed answer is asked
for once more; each value is validated against its schema (a pydantic model, or a JSON Schema checked by the
driver's validator); the offline model cannot extract them. Then each extractor's ``on_extracted`` may replace its
value. A failure is reported per slug and never drops the other values; nothing here fails the cycle.

Values are keyed for persistence by ``metadataKeyPath`` (``extracted.<slug>`` → ``<slug>``); ``false`` keeps a
value out of the metadata, though ``on_extracted`` still sees it (the working-memory extractor needs that).

The working-memory extractor's value (``observation.manageWorkingMemory``) is the thread's updated working memory:
it is given back apart (``ExtractionOutcome.working_memory``), not under the ``extracted`` metadata; an empty
value (``null``, blank, ``{}``) means no change.

A value arrives as the model wrote it: a string that reads as JSON (``"7"``, ``"[1, 2]"``) is taken as that JSON
when its schema accepts it, else as the string.

A multi-thread observation (resource scope) gives each thread its values (``threads_extraction_flow``): the ones
written in the thread's own section, over the ones written for the whole answer and the structured ones, each
through ``on_extracted`` with that thread's previous value and messages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from om_stream.core.cycles.steps import Flow, ServingModel, call_model, call_on_extracted
from om_stream.core.error_text import cut_error, error_text
from om_stream.core.extractors import WORKING_MEMORY_SLUG, ExtractionContext, Extractor
from om_stream.core.messages import Message
from om_stream.core.prompts.chat import ChatRequest, ChatResponse
from om_stream.core.prompts.extraction import ask_again, build_extraction_request, parse_json_object
from om_stream.core.prompts.parsing import ParsedOutput
from om_stream.errors import ModelError

__all__ = ["ExtractionOutcome", "JsonSchemaValidator", "MainExchange", "ThreadExtraction", "extraction_flow",
           "structured_flow", "threads_extraction_flow"]

_ASKS = 2  # a malformed answer is asked for once more, with the demand made explicit


class JsonSchemaValidator(Protocol):
    """Checks JSON Schema documents and values. The core imports no JSON Schema library: the driver gives one."""

    def check_schema(self, schema: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` saying what is wrong with ``schema``."""
        ...

    def validate(self, value: Any, schema: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming where ``value`` first breaks ``schema`` (``path: message``)."""
        ...


@dataclass(frozen=True)
class ExtractionOutcome:
    """The extractors' values of one cycle (or of one thread of a multi-thread observation)."""

    values: dict[str, Any]  # by storage key: what goes under the thread's ``extracted`` metadata
    failures: tuple[tuple[str, str], ...] = ()  # (slug, why)
    working_memory: Any = None  # the updated working memory; None when the cycle leaves it as it is


@dataclass(frozen=True)
class MainExchange:
    """The Observer/Reflector call the extraction follows, and its answer."""

    request: ChatRequest
    answer: ChatResponse


@dataclass(frozen=True)
class ThreadExtraction:
    """One thread of a multi-thread observation, as its extractors see it."""

    thread_id: str
    prior: Mapping[str, Any]  # the thread's ``extracted`` metadata
    values: Mapping[str, Any]  # the inline values written in the thread's own section, by slug
    observations: str  # what the cycle wrote for the thread
    messages: tuple[Message, ...]  # the thread's messages the cycle read


def extraction_flow(source: Literal["observation", "reflection"], extractors: Sequence[Extractor],
                    parsed: ParsedOutput, exchange: MainExchange, *, resource_id: str, thread_id: str | None,
                    prior: Mapping[str, Any], model: ServingModel, schemas: JsonSchemaValidator,
                    observed_messages: Sequence[Message] = (),
                    active_observations: str = "") -> Flow[ExtractionOutcome]:
    """Every custom extractor's value of this cycle (inline, then structured), after ``on_extracted``, keyed for
    persistence; with the failures by slug and the updated working memory. ``prior`` is the thread's ``extracted``
    metadata; ``observed_messages`` and ``active_observations`` are handed to ``on_extracted``
    (``ExtractionContext``)."""
    context = ExtractionContext(source=source, thread_id=thread_id, resource_id=resource_id,
                                raw_observations=parsed.observations, observed_messages=tuple(observed_messages),
                                active_observations=active_observations)
    values: dict[str, Any] = dict(parsed.extracted)
    failures: list[tuple[str, str]] = list(parsed.extraction_failures)
    structured = [e for e in extractors if not e.inline]
    if structured:
        found, failed = yield from structured_flow(structured, context, exchange, prior, model=model,
                                                   schemas=schemas)
        values.update(found)
        failures.extend(failed)
    after = yield from _after_hooks(extractors, values, context, prior)
    return replace(after, failures=tuple(failures) + after.failures)


def threads_extraction_flow(extractors: Sequence[Extractor], parsed: ParsedOutput, exchange: MainExchange,
                            threads: Sequence[ThreadExtraction], *, resource_id: str, model: ServingModel,
                            schemas: JsonSchemaValidator, active_observations: str = ""
                            ) -> Flow[tuple[dict[str, ExtractionOutcome], tuple[tuple[str, str], ...]]]:
    """Each thread's outcome of a multi-thread observation (by thread id), and every failure by slug. The
    structured call is made once, for the whole answer, with the first thread's priors."""
    if not threads:
        return {}, tuple(parsed.extraction_failures)
    shared: dict[str, Any] = dict(parsed.extracted)
    failures: list[tuple[str, str]] = list(parsed.extraction_failures)
    first = threads[0]
    structured = [e for e in extractors if not e.inline]
    if structured:
        context = ExtractionContext(source="observation", thread_id=first.thread_id, resource_id=resource_id,
                                    raw_observations=parsed.observations, active_observations=active_observations)
        found, failed = yield from structured_flow(structured, context, exchange, first.prior, model=model,
                                                   schemas=schemas)
        shared.update(found)
        failures.extend(failed)
    by_thread: dict[str, ExtractionOutcome] = {}
    for thread in threads:
        context = ExtractionContext(source="observation", thread_id=thread.thread_id, resource_id=resource_id,
                                    raw_observations=thread.observations, observed_messages=thread.messages,
                                    active_observations=active_observations)
        after = yield from _after_hooks(extractors, {**shared, **thread.values}, context, thread.prior)
        by_thread[thread.thread_id] = after
        failures.extend((slug, cut_error(f"thread {thread.thread_id}: {error}")) for slug, error in after.failures)
    return by_thread, tuple(failures)


def _after_hooks(extractors: Sequence[Extractor], values: Mapping[str, Any], context: ExtractionContext,
                 prior: Mapping[str, Any]) -> Flow[ExtractionOutcome]:
    """``values`` (by slug) through each extractor's ``on_extracted``, keyed for persistence; the hooks'
    failures by slug; the working-memory extractor's value when it changes the working memory."""
    by_slug = {e.slug: e for e in extractors}
    persisted: dict[str, Any] = {}
    failures: list[tuple[str, str]] = []
    working_memory: Any = None
    for slug, value in values.items():
        extractor = by_slug.get(slug)
        if extractor is None:  # a built-in value the parser also reports
            persisted[slug] = value
            continue
        key = extractor.storage_key()
        final = value
        if extractor.on_extracted is not None:
            try:
                outcome = yield from call_on_extracted(
                    extractor.on_extracted, replace(context, previous=prior.get(key or slug), current=value))
            except Exception as exc:  # noqa: BLE001 - the user's callback: its failure is the extractor's
                failures.append((slug, cut_error(f"onExtracted failed: {error_text(exc)}")))
                continue
            if outcome is not None:
                final = outcome
        if key is not None:
            persisted[key] = final
        if slug == WORKING_MEMORY_SLUG and _updates(final):
            working_memory = final
    return ExtractionOutcome(persisted, tuple(failures), working_memory)


def _updates(value: Any) -> bool:
    """A working-memory value that changes it: ``null``, a blank string or an empty object leave it as it is."""
    if isinstance(value, str):
        return bool(value.strip())
    return value is not None and value not in ({}, [])


def structured_flow(extractors: Sequence[Extractor], context: ExtractionContext, exchange: MainExchange,
                    prior: Mapping[str, Any], *, model: ServingModel, schemas: JsonSchemaValidator
                    ) -> Flow[tuple[dict[str, Any], list[tuple[str, str]]]]:
    """The structured extractors' values by slug, validated, and their failures by slug."""
    failures: list[tuple[str, str]] = []
    wanted: dict[str, tuple[Extractor, Any, dict[str, Any]]] = {}
    for extractor in extractors:
        try:
            declared, json_schema = declared_schema(extractor, context, schemas)
        except (TypeError, ValueError) as exc:
            failures.append((extractor.slug, cut_error(f"invalid schema: {exc}")))
            continue
        if json_schema is not None:
            wanted[extractor.slug] = (extractor, declared, json_schema)
    if not wanted:
        return {}, failures
    if not model.structured_output:
        return {}, failures + [(slug, "the offline model does not extract structured values") for slug in wanted]
    request = build_extraction_request([(e, s) for e, _, s in wanted.values()], context, exchange.request,
                                       exchange.answer, prior)
    document: dict[str, Any] | None = None
    problem = ""
    for _ in range(_ASKS):
        try:
            response = yield from call_model(request, extraction=True)
        except ModelError as exc:
            problem = f"the extraction call failed: {exc}"
            break
        document, problem = parse_json_object(response.text)
        if document is not None:
            break
        request = ask_again(request, response.text, problem)
    if document is None:
        return {}, failures + [(slug, cut_error(problem)) for slug in wanted]
    values: dict[str, Any] = {}
    for slug, (_, declared, json_schema) in wanted.items():
        if document.get(slug) is None:
            continue
        try:
            values[slug] = validated_value(document[slug], declared, json_schema, schemas)
        except (ValueError, ValidationError) as exc:
            failures.append((slug, cut_error(f"the value does not match the schema: {exc}")))
    return values, failures


def declared_schema(extractor: Extractor, context: ExtractionContext,
                    schemas: JsonSchemaValidator) -> tuple[Any, dict[str, Any] | None]:
    """(the schema as declared, its JSON Schema); a dynamic schema may return None (no value this cycle).
    Raises ``ValueError`` for an invalid JSON Schema, ``TypeError`` for something that is no schema."""
    declared: Any = extractor.schema
    if callable(declared) and not isinstance(declared, type):
        declared = declared(context)
    if declared is None:
        return None, None
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return declared, declared.model_json_schema()
    if isinstance(declared, Mapping):
        schemas.check_schema(dict(declared))
        return declared, dict(declared)
    raise TypeError(f"extractor {extractor.name!r}: schema must be a JSON Schema dict or a pydantic model class")


def validated_value(value: Any, declared: Any, json_schema: dict[str, Any], schemas: JsonSchemaValidator) -> Any:
    """``value`` as stored: a pydantic model's JSON dump (unset fields left out), or the value a JSON Schema
    accepts as it is. A string that reads as JSON is tried as that JSON first (a model writes ``"7"`` for a
    number), then as the string. Raises ``ValueError`` (or pydantic's ``ValidationError``) when neither matches:
    the error is the one the value as written met."""
    decoded = _as_json(value)
    if decoded is not _NOT_JSON:
        try:
            return _validated(decoded, declared, json_schema, schemas)
        except (ValueError, ValidationError):
            pass  # the string itself may be what the schema wants
    return _validated(value, declared, json_schema, schemas)


def _validated(value: Any, declared: Any, json_schema: dict[str, Any], schemas: JsonSchemaValidator) -> Any:
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return declared.model_validate(value).model_dump(mode="json", exclude_none=True)
    schemas.validate(value, json_schema)
    return value


_NOT_JSON = object()


def _as_json(value: Any) -> Any:
    """The JSON ``value`` holds when it is a string of JSON, else ``_NOT_JSON``."""
    if not isinstance(value, str) or not value.strip():
        return _NOT_JSON
    try:
        return json.loads(value)
    except ValueError:
        return _NOT_JSON
