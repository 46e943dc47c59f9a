"""Reference fidelity: the behaviours described in ../shared/reference/mastra-om-behavior.md, one module per section,
each behaviour with a test of its own in the project's words (the map: docs/reference-coverage.md).

Where om-stream deliberately does something else, the README's "Where om-stream differs from the reference
implementation" says what and why, and the test here checks what om-stream does instead.

The helpers below are shared by the modules: messages for the embedded ``Memory``, and a ``FunctionModel`` answer
that observes every message it is shown (so a test can tell which messages an Observer call covered).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from om_stream import Message, TextPart
from om_stream.core.commands import ContextSpec
from om_stream.ports import ChatRequest

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
_ID = re.compile(r"\[id=(\w+)\]")


def message(index: int, text: str, role: str = "user", *, thread: str = "t1", resource: str = "r1",
            minutes: float | None = None, **fields: Any) -> Message:
    """Message ``m<index>``, ``index`` minutes after START unless ``minutes`` says otherwise. Its text starts with
    ``[id=m<index>]`` so an Observer written as a function can tell which messages it was shown."""
    at = START + timedelta(minutes=index if minutes is None else minutes)
    return Message(message_id=f"m{index}", thread_id=thread, resource_id=resource, role=role,  # type: ignore[arg-type]
                   created_at=at, parts=(TextPart(text=f"[id=m{index}] {text}"),), **fields)


def shown_ids(request: ChatRequest) -> list[str]:
    """The message ids an Observer call was shown (from the ``[id=…]`` prefixes in its prompt)."""
    return _ID.findall("\n".join(m.content for m in request.messages[2:]))


def observe_all(request: ChatRequest) -> str:
    """An Observer that writes one line per message it was shown, and a Reflector that keeps the first half."""
    if request.role == "reflector":
        body = request.messages[-1].content.split("## Observations to reflect on", 1)[-1]
        lines = [line for line in body.splitlines() if line.startswith("* ")]
        kept = "\n".join(lines[: max(1, len(lines) // 2)]) or "* 🔴 (09:00) nothing"
        return f"<observations>\nDate: Mar 2, 2026\n{kept}\n</observations>"
    ids = shown_ids(request)
    lines = "\n".join(f"* 🔴 (09:00) saw {i}" for i in ids) or "* 🟡 (09:00) nothing new"
    return f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>"


def context_spec(segments: tuple[str, ...], *, task: str | None = None, suggested: str | None = None,
                 messages: tuple[str, ...] = ()) -> ContextSpec:
    """A thread's context as the engine publishes it: these log segments, hints and raw message ids."""
    return ContextSpec(record_key="t1", thread_id="t1", resource_id="r1", version=1, through_message_id=None,
                       generation=0, segment_ids=segments, segment_boundaries=(0,) * len(segments),
                       message_ids=messages, message_tokens=0, observation_tokens=0, current_task=task,
                       suggested_response=suggested, thread_title=None)
