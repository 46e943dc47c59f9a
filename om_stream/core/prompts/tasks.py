"""What an Observer or Reflector call is about, as plain values.

A real model reads the prompt built from a task; the offline deterministic model reads the task itself. Both
answer in the same text format, which the same parser reads (``core.prompts.parsing``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from om_stream.core.extractors import Extractor
from om_stream.core.messages import Message

__all__ = ["ObserverTask", "ReflectorTask", "ThreadBatch"]


@dataclass(frozen=True)
class ThreadBatch:
    """One thread's messages in a multi-thread (resource scope) observation, with its prior metadata."""

    thread_id: str  # as shown to the model (obscured when obscureThreadIds)
    messages: tuple[Message, ...]
    prior_current_task: str | None = None
    prior_suggested_response: str | None = None
    prior_thread_title: str | None = None
    prior_extracted: dict[str, Any] = field(default_factory=dict)  # by slug, as ``ObserverTask.prior_extracted``


@dataclass(frozen=True)
class ObserverTask:
    messages: tuple[Message, ...]
    previous_observations: str = ""
    buffered_observations: str = ""  # chunks computed in the background, not yet active
    prior_current_task: str | None = None
    prior_suggested_response: str | None = None
    prior_thread_title: str | None = None
    prior_extracted: dict[str, Any] = field(default_factory=dict)  # multi-thread: each ``ThreadBatch`` has its own
    want_hints: bool = True
    want_thread_title: bool = False
    inline_extractors: tuple[Extractor, ...] = ()
    instruction: str | None = None
    threads: tuple[ThreadBatch, ...] = ()  # non-empty: a multi-thread observation (resource scope)
    previous_truncated: int = 0  # lines of previous observations left out to fit previousObserverTokens
    timezone: str = "UTC"


@dataclass(frozen=True)
class ReflectorTask:
    observations: str
    level: int
    target_tokens: int
    input_tokens: int
    guidance: str | None = None
    want_hints: bool = False
    prior_extracted: dict[str, Any] = field(default_factory=dict)
    inline_extractors: tuple[Extractor, ...] = ()
    instruction: str | None = None
    multi_thread: bool = False
