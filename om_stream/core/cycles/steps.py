"""What a cycle flow asks its driver for, and what it expects back.

A flow is a generator (httpx's ``Auth.auth_flow`` is the model): it yields a step, the driver performs it and sends
the answer back with ``flow.send(answer)``; when the step fails with an exception the step lists in ``handled``,
the driver throws it into the flow (``flow.throw(exc)``), which decides what that failure means. Any other
exception stays with the driver and ends the cycle there. The flow's return value (``StopIteration.value``) is the
cycle's outcome::

    step               answer sent back                                      thrown in
    ReadMessages       list[Message], in the order asked, ids not found left out  -
    ReadSegmentTexts   Mapping[str, str]: text by segment id, missing ones absent  -
    ReadExtracted      Mapping[str, Any]: the thread's ``extracted`` metadata       -
    CallModel          ChatResponse                                          ModelError
    CallOnExtracted    what the user's ``on_extracted`` returned (awaited)    any Exception it raised

A flow never reads a clock, a store or a model itself: the driver times the cycle, counts each call, and applies
its timeouts.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, TypeVar

from om_stream.core.extractors import ExtractionContext
from om_stream.core.messages import Message
from om_stream.core.prompts.chat import ChatRequest, ChatResponse
from om_stream.errors import ModelError

__all__ = [
    "CallModel",
    "CallOnExtracted",
    "CycleStep",
    "Flow",
    "ReadExtracted",
    "ReadMessages",
    "ReadSegmentTexts",
    "ServingModel",
    "UnusableAnswer",
    "call_model",
    "call_on_extracted",
    "read_extracted",
    "read_messages",
    "read_segment_texts",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class ReadMessages:
    """The messages to observe, from the content store, restricted to one tenant."""

    handled: ClassVar[tuple[type[Exception], ...]] = ()
    message_ids: tuple[str, ...]
    resource_id: str


@dataclass(frozen=True)
class ReadSegmentTexts:
    """Observation segment texts, from the content store."""

    handled: ClassVar[tuple[type[Exception], ...]] = ()
    segment_ids: tuple[str, ...]


@dataclass(frozen=True)
class ReadExtracted:
    """The extracted values a thread's metadata holds (prior values for the extractors)."""

    handled: ClassVar[tuple[type[Exception], ...]] = ()
    thread_id: str


@dataclass(frozen=True)
class CallModel:
    """One model call. ``extraction`` marks a structured-extraction follow-up (counted apart from the cycle's
    Observer/Reflector calls)."""

    handled: ClassVar[tuple[type[Exception], ...]] = (ModelError,)
    request: ChatRequest
    extraction: bool = False


@dataclass(frozen=True)
class CallOnExtracted:
    """An extractor's ``on_extracted`` callback, which may be async: the driver awaits it (within its hook
    timeout). ``None`` back keeps the extracted value; anything else replaces it."""

    handled: ClassVar[tuple[type[Exception], ...]] = (Exception,)  # the user's code: its failure is the extractor's
    hook: Callable[[ExtractionContext], Any]
    context: ExtractionContext


CycleStep: TypeAlias = ReadMessages | ReadSegmentTexts | ReadExtracted | CallModel | CallOnExtracted
Flow: TypeAlias = Generator[CycleStep, Any, _T]


@dataclass(frozen=True)
class ServingModel:
    """What the driver knows about the model that serves a cycle.

    ``accepts_attachments`` is the model's own answer (``ports.AttachmentAwareModel``); ``None`` when the model does
    not say, and then it gets the attachments. ``structured_output`` is ``False`` for the offline model, which
    cannot answer a structured-extraction call."""

    accepts_attachments: Callable[[ChatRequest], bool] | None = None
    structured_output: bool = True


class UnusableAnswer(ModelError):
    """The model answered, but nothing usable came out (``kind``: ``degenerate`` or ``empty``)."""


# -- typed asks: ``value = yield from read_messages(...)`` -------------------------------------------------------------

def read_messages(message_ids: tuple[str, ...], resource_id: str) -> Flow[list[Message]]:
    messages: list[Message] = yield ReadMessages(message_ids, resource_id)
    return messages


def read_segment_texts(segment_ids: tuple[str, ...]) -> Flow[Mapping[str, str]]:
    texts: Mapping[str, str] = yield ReadSegmentTexts(segment_ids)
    return texts


def read_extracted(thread_id: str) -> Flow[Mapping[str, Any]]:
    extracted: Mapping[str, Any] = yield ReadExtracted(thread_id)
    return extracted


def call_model(request: ChatRequest, *, extraction: bool = False) -> Flow[ChatResponse]:
    response: ChatResponse = yield CallModel(request, extraction=extraction)
    return response


def call_on_extracted(hook: Callable[[ExtractionContext], Any], context: ExtractionContext) -> Flow[Any]:
    outcome = yield CallOnExtracted(hook, context)
    return outcome

