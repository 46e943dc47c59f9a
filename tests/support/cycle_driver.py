"""A scripted driver for the pure cycle flows (``core.cycles``): it answers each step a flow yields (reads, model
calls, extraction callbacks) from canned replies, without a store, a model or an event loop; and the requests and
model answers the flow tests build on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.config import ResolvedConfig
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
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.messages import Message, TextPart
from om_stream.core.prompts.chat import ChatRequest, ChatResponse
from om_stream.errors import ModelError
from tests.support.config_options import resolve

OBSERVED = "<observations>\nDate: Jan 5, 2026\n* 🔴 (09:00) User likes green tea.\n</observations>"
DEGENERATE = "The user said hello again. " * 200


def count_words(text: str) -> int:
    return len(text.split())


def message(message_id: str = "m1", thread_id: str = "t1", *parts: Any) -> Message:
    return Message(message_id=message_id, thread_id=thread_id, resource_id="r1", role="user",
                   created_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
                   parts=parts or (TextPart(text="I like green tea."),))


def observation(*, message_ids: tuple[str, ...] = ("m1",), thread_ids: tuple[str, ...] = ("t1",),
                offline: bool = False, previous: tuple[str, ...] = (),
                buffered: tuple[str, ...] = ()) -> RequestObservation:
    return RequestObservation(record_key="t1", request_id="obs-1#1", cycle_id="obs-1", attempt=1, kind="sync",
                              trigger="turn-sync", resource_id="r1", thread_ids=thread_ids, message_ids=message_ids,
                              message_tokens=100, previous_segment_ids=previous, buffered_segment_ids=buffered,
                              prior_current_task=None, prior_suggested_response=None, prior_thread_title=None,
                              want_hints=True, use_offline_model=offline, deadline_at=0)


def reflection(*, target: int = 10, start: int = 1, segments: tuple[str, ...] = ("s1",)) -> RequestReflection:
    return RequestReflection(record_key="t1", request_id="ref-1#1", cycle_id="ref-1", attempt=1, kind="sync",
                             trigger="turn-sync", resource_id="r1", thread_ids=("t1",), generation=1,
                             segment_ids=segments, input_tokens=500, target_tokens=target,
                             compression_start_level=start, guidance=None, use_offline_model=False, deadline_at=0)


def reflected(words: int, hint: str = "") -> str:
    """A Reflector answer of ``words`` words of observations (and a current-task hint when given)."""
    body = " ".join(f"w{i}" for i in range(words - 1))
    task = f"\n<current-task>{hint}</current-task>" if hint else ""
    return f"<observations>\n* {body}\n</observations>{task}"


class JsonSchemaStub:
    """A JSON Schema validator for the tests: a schema with ``"invalid": true`` is refused; a value must be of
    the schema's ``type`` (string or integer)."""

    def check_schema(self, schema: Mapping[str, Any]) -> None:
        if schema.get("invalid"):
            raise ValueError("not a schema")

    def validate(self, value: Any, schema: Mapping[str, Any]) -> None:
        kinds = {"string": str, "integer": int}
        expected = kinds.get(str(schema.get("type")))
        if expected is not None and not isinstance(value, expected):
            raise ValueError(f"(root): {value!r} is not of type {schema['type']!r}")


Reply = str | ModelError


@dataclass
class Driver:
    """Answers a flow's steps from memory, as the runtime's driver answers them from a store and a model."""

    replies: list[Reply] = field(default_factory=list)  # main calls, in order
    extraction_replies: list[Reply] = field(default_factory=list)
    messages: dict[str, Message] = field(default_factory=lambda: {"m1": message()})
    segments: dict[str, str] = field(default_factory=dict)
    extracted: dict[str, Any] = field(default_factory=dict)
    steps: list[CycleStep] = field(default_factory=list)

    @property
    def calls(self) -> list[ChatRequest]:
        return [s.request for s in self.steps if isinstance(s, CallModel) and not s.extraction]

    @property
    def extraction_calls(self) -> list[ChatRequest]:
        return [s.request for s in self.steps if isinstance(s, CallModel) and s.extraction]

    def answer(self, step: CycleStep) -> Any:
        self.steps.append(step)
        if isinstance(step, ReadMessages):
            return [self.messages[i] for i in step.message_ids if i in self.messages]
        if isinstance(step, ReadSegmentTexts):
            return {i: self.segments[i] for i in step.segment_ids if i in self.segments}
        if isinstance(step, ReadExtracted):
            return self.extracted
        if isinstance(step, CallOnExtracted):
            return step.hook(step.context)
        queue = self.extraction_replies if step.extraction else self.replies
        reply = queue.pop(0)
        if isinstance(reply, ModelError):
            raise reply
        return ChatResponse(text=reply, model="openai/gpt-5-mini",
                            provider_metadata={"gateway": {"route": "openai/gpt-5-mini"}})

    def run(self, flow: Flow[ModelResultArrived]) -> ModelResultArrived:
        try:
            step = next(flow)
            while True:
                try:
                    answer = self.answer(step)
                except Exception as exc:
                    if not isinstance(exc, step.handled):
                        raise
                    step = flow.throw(exc)
                else:
                    step = flow.send(answer)
        except StopIteration as done:
            result: ModelResultArrived = done.value
            return result


def run(driver: Driver, request: RequestObservation | RequestReflection, config: ResolvedConfig | None = None, *,
        model: ServingModel | None = None) -> ModelResultArrived:
    flow = cycle_flow(request, config or resolve(True), count_text=count_words, model=model or ServingModel(),
                      schemas=JsonSchemaStub())
    return driver.run(flow)


# -- Observer -------------------------------------------------------------------------------------------------------
