"""Observer and Reflector calls on threads without authors, and what was sent for them before authors existed.

``tests/fixtures/prompts_without_authors.json`` holds the prompts (every chat message, its role and attachments)
and the offline Observer's answers that the code of main built for :func:`cases` before ``om.message/v1`` had an
``author``: a thread without authors must read exactly as it did (``tests/unit/test_authors.py`` compares).
The cases cover what the transcript and the prompts render: every part type, several days, a temporal reminder,
tool calls and results, media, extractors, hints, a title, previous and buffered observations, an application
instruction, resource scope with several threads, and the Reflector at every compression level.

Write the file again only for a change that is meant to alter those prompts:
``PYTHONPATH=$PWD .venv/bin/python -m tests.support.prompt_goldens --write``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from om_stream.adapters.offline_observer import observe
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.extractors import Extractor
from om_stream.core.messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from om_stream.core.prompts.chat import ChatMessage
from om_stream.core.prompts.observer import build_observer_messages
from om_stream.core.prompts.reflector import build_reflector_messages
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask, ThreadBatch

__all__ = ["GOLDEN", "build_all", "cases"]

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "prompts_without_authors.json"
START = datetime(2026, 6, 6, 9, 14, tzinfo=UTC)
MOOD = Extractor(name="Mood", instructions="How the user feels, in one word.")
PROFILE = Extractor(name="Profile", instructions="Profile facts.", schema={"type": "object"})


def _msg(n: int, role: str, *parts: Part, minutes: float = 0, thread: str = "t-1") -> Message:
    return Message(message_id=f"m-{n}", thread_id=thread, resource_id="r-1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=minutes), parts=parts)


def _conversation(thread: str = "t-1", offset: int = 0) -> tuple[Message, ...]:
    n = offset
    return (
        _msg(n + 1, "user", TextPart(text="I am moving to Lyon next month. My budget is 3000 EUR."), thread=thread),
        _msg(n + 2, "assistant", ReasoningPart(text="Compare movers first."),
             TextPart(text="Congratulations! Shall I compare movers?"), minutes=0.5, thread=thread),
        _msg(n + 3, "user", TextPart(text="Yes please, and remember that I own a piano."),
             ImagePart(url="https://example.com/piano.jpg", filename="piano.jpg", mime_type="image/jpeg"),
             minutes=3, thread=thread),
        _msg(n + 4, "assistant", ToolCallPart(tool_call_id=f"c-{n}", tool_name="search_movers",
                                              args={"city": "Lyon", "items": ["piano", "boxes"], "insured": True}),
             minutes=4, thread=thread),
        _msg(n + 5, "tool", ToolResultPart(tool_call_id=f"c-{n}", tool_name="search_movers",
                                           result=[{"name": "Lyon Express", "price": 2400},
                                                   {"name": "Rhône Moves", "price": 2900}]),
             minutes=4, thread=thread),
        _msg(n + 6, "assistant", TextPart(text="Lyon Express costs 2400 EUR and insures pianos."),
             FilePart(url="https://example.com/quote.pdf", mime_type="application/pdf"), minutes=5, thread=thread),
        _msg(n + 7, "system", TextPart(text="<system-reminder>2 days passed since the last message"
                                            "</system-reminder>"), minutes=60 * 48, thread=thread),
        _msg(n + 8, "user", TextPart(text="We booked Lyon Express for September 3. It worked, thanks!"),
             minutes=60 * 48 + 1, thread=thread),
        _msg(n + 9, "assistant", TextPart(text="Great, I noted September 3."), minutes=60 * 48 + 1.5,
             thread=thread),
        _msg(n + 10, "tool", ToolResultPart(tool_call_id=f"c-late-{n}", tool_name="calendar", is_error=True,
                                            result="quota exceeded"), minutes=60 * 48 + 2, thread=thread),
    )


def cases() -> dict[str, tuple[str, ObserverTask | ReflectorTask]]:
    """Every case by name: ("observer" | "reflector", its task)."""
    chat = _conversation()
    out: dict[str, tuple[str, ObserverTask | ReflectorTask]] = {
        "observer-plain": ("observer", ObserverTask(messages=chat)),
        "observer-everything": ("observer", ObserverTask(
            messages=chat, previous_observations="Date: Jun 5, 2026\n* 🔴 (10:00) User stated they live in Paris.",
            buffered_observations="* 🟡 (09:00) Buffered line.", prior_current_task="Plan the move",
            prior_suggested_response="Ask about dates", prior_thread_title="Moving to Lyon",
            prior_extracted={"mood": "hopeful"}, want_thread_title=True, inline_extractors=(MOOD, PROFILE),
            instruction="Focus on travel plans.", timezone="Europe/Paris")),
        "observer-no-hints": ("observer", ObserverTask(messages=chat[:3], want_hints=False)),
        "observer-resource-scope": ("observer", ObserverTask(
            messages=(), threads=(
                ThreadBatch("a1", _conversation("t-1")[:4], prior_current_task="Compare movers"),
                ThreadBatch("b2", _conversation("t-2", offset=20)[:3], prior_thread_title="Phrase book",
                            prior_extracted={"mood": "curious"})),
            inline_extractors=(MOOD,), want_thread_title=True)),
    }
    log = ("Date: Jun 6, 2026\n* 🔴 (09:14) User stated they are moving to Lyon.\n"
           "* 🟡 (09:20) Assistant compared movers.\n  * -> Lyon Express 2400 EUR.")
    for level in range(5):
        out[f"reflector-level-{level}"] = ("reflector", ReflectorTask(
            observations=log, level=level, target_tokens=400, input_tokens=900,
            guidance="Keep the move." if level == 2 else None, want_hints=level % 2 == 1,
            prior_extracted={"mood": "hopeful"}, inline_extractors=(MOOD,) if level == 3 else (),
            instruction="Be brief." if level == 4 else None, multi_thread=level == 4))
    return out


def _chat(message: ChatMessage) -> dict[str, Any]:
    return {"role": message.role, "content": message.content,
            "attachments": [{"kind": a.kind, "mime_type": a.mime_type, "url": a.url, "data": a.data,
                             "filename": a.filename} for a in message.attachments]}


def build_all() -> dict[str, Any]:
    """What the code builds now for every case: the prompt, and the offline Observer's answer."""
    count = TiktokenCounter()
    built: dict[str, Any] = {}
    for name, (kind, task) in cases().items():
        if isinstance(task, ObserverTask):
            built[name] = {"prompt": [_chat(m) for m in build_observer_messages(task, count)],
                           "offline": observe(task)}
        else:
            built[name] = {"prompt": [_chat(m) for m in build_reflector_messages(task, count)]}
        assert kind in ("observer", "reflector")
    return built


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python -m tests.support.prompt_goldens --write")
    GOLDEN.write_text(json.dumps(build_all(), ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                      encoding="utf-8")
    print(f"wrote {GOLDEN}")
