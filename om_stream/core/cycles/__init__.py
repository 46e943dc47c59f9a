"""The Observer, Reflector and extraction cycles as pure flows: what a model request turns into.

``decide()`` emits a ``RequestObservation`` or ``RequestReflection``; a driver (``runtime.cycles.CycleRunner``) runs
:func:`cycle_flow` for it: a generator that yields each step it needs (a store read, a model call, a user's
``on_extracted``), receives the answer, and returns the ``ModelResultArrived`` the state machine takes back. The
OM rules of a cycle (retrying a degenerate Observer answer once, the Reflector's compression ladder, never calling
an empty answer a success, the structured-extraction call and its validation) live here, so each is a unit test;
the driver owns the I/O, the clocks, the timeouts, the hooks and the counting.

    steps        the steps a flow yields and what is sent back (``Flow``, ``ServingModel``, ``UnusableAnswer``)
    observer     observation_flow
    reflector    reflection_flow (and the ladder's climb)
    extraction   extraction_flow: inline and structured extractor values, ``on_extracted``, persistence keys

A flow raises ``ModelError`` (``UnusableAnswer`` for a degenerate or empty answer) when the cycle fails; the
driver turns that into a failed result.
"""

from __future__ import annotations

from collections.abc import Callable

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.config import ResolvedConfig
from om_stream.core.cycles.extraction import JsonSchemaValidator
from om_stream.core.cycles.observer import observation_flow
from om_stream.core.cycles.reflector import reflection_flow
from om_stream.core.cycles.steps import (
    CallModel,
    CallOnExtracted,
    CycleStep,
    Flow,
    ReadExtracted,
    ReadMessages,
    ReadSegmentTexts,
    ServingModel,
    UnusableAnswer,
)
from om_stream.core.inputs import ModelResultArrived

__all__ = [
    "CallModel",
    "CallOnExtracted",
    "CycleStep",
    "Flow",
    "JsonSchemaValidator",
    "ReadExtracted",
    "ReadMessages",
    "ReadSegmentTexts",
    "ServingModel",
    "UnusableAnswer",
    "cycle_flow",
    "observation_flow",
    "reflection_flow",
]


def cycle_flow(request: RequestObservation | RequestReflection, config: ResolvedConfig, *,
               count_text: Callable[[str], int], model: ServingModel,
               schemas: JsonSchemaValidator) -> Flow[ModelResultArrived]:
    """The flow of ``request``: an observation or a reflection."""
    if isinstance(request, RequestObservation):
        return observation_flow(request, config, count_text=count_text, model=model, schemas=schemas)
    return reflection_flow(request, config, count_text=count_text, model=model, schemas=schemas)
