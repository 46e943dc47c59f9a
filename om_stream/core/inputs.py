"""Everything that can change a record's OM state arrives as one of these values (ARCHITECTURE §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from om_stream.core.messages import Message

__all__ = [
    "ClearRecord",
    "CommandReceived",
    "Input",
    "MessageAppended",
    "ModelResultArrived",
    "ObserveNow",
    "OverrideThresholds",
    "ReflectNow",
    "TimerFired",
]


@dataclass(frozen=True)
class MessageAppended:
    message: Message


@dataclass(frozen=True)
class ModelResultArrived:
    """The outcome of an Observer or Reflector call requested by a ``RequestObservation``/``RequestReflection``.

    ``observations`` is the parsed log text (already cleaned by the prompt parser). ``per_thread`` carries the
    per-thread sections of a multi-thread (resource scope) observation. On failure ``error`` says why and
    ``observations`` holds any partial output.
    """

    cycle_id: str
    attempt: int
    operation: Literal["observation", "reflection"]
    ok: bool
    observations: str = ""
    per_thread: dict[str, str] | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted_values: dict[str, Any] = field(default_factory=dict)
    extraction_failures: tuple[tuple[str, str], ...] = ()
    error: str | None = None
    error_kind: str | None = None  # e.g. "rate_limited", "timeout", "degenerate", "budget_exceeded"
    duration_ms: int = 0
    model: str | None = None
    fallback_model: str | None = None  # set when the offline model answered instead of the configured ones


@dataclass(frozen=True)
class TimerFired:
    """A timer came due: ``idle:<operation>`` (activateAfterIdle), ``retry:<what>``, ``deadline:<cycle>``; or
    ``resend:<cycle>``, sent by the runtime when it takes over a record whose calls may have been lost."""

    timer: str


@dataclass(frozen=True)
class ObserveNow:
    """Manual ``observe()``: activate what is buffered and observe the rest, whatever the thresholds."""

    thread_id: str | None = None


@dataclass(frozen=True)
class ReflectNow:
    """Manual ``reflect()``: condense the whole log now, optionally with specific guidance."""

    guidance: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True)
class OverrideThresholds:
    """Per-record threshold overrides (``None`` removes an override)."""

    message_tokens: int | None = None
    observation_tokens: int | None = None
    thread_id: str | None = None


@dataclass(frozen=True)
class ClearRecord:
    """Forget everything OM knows about the record (its messages stay in the store unless purged there)."""

    thread_id: str | None = None


CommandReceived = ObserveNow | ReflectNow | OverrideThresholds | ClearRecord
Input = MessageAppended | ModelResultArrived | TimerFired | CommandReceived
