"""The offline deterministic model: an Observer and a Reflector that need no network and no key.

It backs ``om-stream demo``, tests and benchmarks, and is the last-resort fallback that keeps a context bounded when
every configured model fails. It answers from the structured task (``ChatRequest.task``), in exactly the text
format real models are asked for, so its answers go through the same parser.

Observer: one dated, prioritised line per user message (🔴 when it states a personal fact, a preference, a date
or a deadline, 🟡 otherwise) with the assistant's reply as a sub-line, one 🟢 line per tool call with what it
returned, grouped under ``Date:`` headers; current task and suggested response when asked.
Reflector: keeps every 🔴 and ✅ line and the date headers, and condenses the rest more at each compression level.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from om_stream.core.messages import Message, ToolCallPart, ToolResultPart
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask, ThreadBatch
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse, Usage

__all__ = ["OFFLINE_MODEL_NAME", "OfflineModel", "states_personal_fact"]

OFFLINE_MODEL_NAME = "offline"

_PERSONAL = re.compile(
    r"\b(i am|i'm|im|my|mine|i have|i've|i live|i work|i like|i love|i prefer|i hate|i dislike|i want|i need|"
    r"i'd rather|i usually|i always|i never|favou?rite|prefer|allergic|birthday|anniversary|deadline|due|"
    r"remind me|call me|my name)\b")
_DATE = re.compile(
    r"\b(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(/\d{2,4})?|today|tomorrow|tonight|yesterday|next (week|month|year)|"
    r"this (week|weekend|month)|on (monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}|"
    r"by (monday|tuesday|wednesday|thursday|friday|saturday|sunday|end of))\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def states_personal_fact(text: str) -> bool:
    """High priority: the user states something about themselves, a preference, a date or a deadline."""
    lowered = text.lower()  # the patterns are lower case: matching a lowered text is 3x faster than IGNORECASE
    return bool(_PERSONAL.search(lowered) or _DATE.search(lowered))


def _gist(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    first = _SENTENCE.split(flat, maxsplit=1)[0] if flat else ""
    if len(first) < 40 and len(flat) > len(first):
        first = flat
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _header(moment: datetime) -> str:
    return f"Date: {moment.strftime('%b')} {moment.day}, {moment.year}"


def _short(value: object, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return _gist(text, limit)


def _observe(messages: Iterable[Message]) -> tuple[list[str], str | None]:
    """Lines for a run of messages, and the latest user request (for hints)."""
    lines: list[str] = []
    current_day = None
    last_user: str | None = None
    results = {p.tool_call_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}
    for message in messages:
        moment = message.created_at.astimezone(UTC)
        if moment.date() != current_day:
            current_day = moment.date()
            lines.append(_header(moment))
        clock = moment.strftime("%H:%M")
        text = message.text
        if message.role == "user" and text.strip():
            last_user = text
            mark = "🔴" if states_personal_fact(text) else "🟡"
            verb = "asked" if text.rstrip().endswith("?") else "stated"
            lines.append(f"* {mark} ({clock}) User {verb}: {_gist(text, 200)}")
        elif message.role == "assistant" and text.strip():
            lines.append(f"  * -> ({clock}) Assistant replied: {_gist(text, 140)}")
        elif message.role == "system" and text.strip():
            lines.append(f"* 🟢 ({clock}) {_gist(re.sub(r'</?system-reminder>', '', text), 120)}")
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                result = results.get(part.tool_call_id)
                outcome = f" -> {_short(result.result, 100)}" if result is not None else ""
                lines.append(f"* 🟢 ({clock}) Assistant called {part.tool_name}({_short(part.args, 80)}){outcome}")
    return lines, last_user


class OfflineModel:
    """Implements ``ports.ChatModel``. ``count_text`` gives realistic usage figures (tokens in and out)."""

    def __init__(self, count_text: Callable[[str], int] | None = None) -> None:
        self._count = count_text or (lambda text: max(1, len(text) // 4))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        task = request.task
        if isinstance(task, ObserverTask):
            text = self.observe(task)
        elif isinstance(task, ReflectorTask):
            text = self.reflect(task)
        else:
            raise ModelError("the offline model answers Observer and Reflector tasks only")
        prompt = sum(self._count(m.content) for m in request.messages) if request.messages else 0
        return ChatResponse(text=text, model=OFFLINE_MODEL_NAME, cost_usd=0.0, finish_reason="stop",
                            usage=Usage(input_tokens=prompt, output_tokens=self._count(text)))

    # -- Observer ------------------------------------------------------------------------------------------------

    def observe(self, task: ObserverTask) -> str:
        if task.threads:
            return self._observe_threads(task.threads, task)
        lines, last_user = _observe(task.messages)
        return self._with_sections("\n".join(lines), last_user, task.messages, task.want_hints,
                                   task.want_thread_title and not task.prior_thread_title)

    def _observe_threads(self, threads: Iterable[ThreadBatch], task: ObserverTask) -> str:
        blocks = []
        for batch in threads:
            lines, last_user = _observe(batch.messages)
            hints = self._sections(last_user, batch.messages, task.want_hints, False)
            blocks.append(f'<thread id="{batch.thread_id}">\n' + "\n".join(lines) + (f"\n{hints}" if hints else "")
                          + "\n</thread>")
        return "<observations>\n" + "\n".join(blocks) + "\n</observations>"

    def _with_sections(self, body: str, last_user: str | None, messages: Iterable[Message], hints: bool,
                       title: bool) -> str:
        sections = self._sections(last_user, messages, hints, title)
        return f"<observations>\n{body}\n</observations>" + (f"\n{sections}" if sections else "")

    @staticmethod
    def _sections(last_user: str | None, messages: Iterable[Message], hints: bool, title: bool) -> str:
        out = []
        if hints and last_user:
            out.append(f"<current-task>\nPrimary: the user's latest request: {_gist(last_user, 160)}\n</current-task>")
            out.append("<suggested-response>\nAnswer that request directly, using the details recorded above."
                       "\n</suggested-response>")
        if title:
            first = next((m.text for m in messages if m.role == "user" and m.text.strip()), "")
            words = re.findall(r"[A-Za-z0-9][A-Za-z0-9'-]*", first)[:5]
            if len(words) >= 2:
                out.append(f"<thread-title>{' '.join(words).capitalize()}</thread-title>")
        return "\n".join(out)

    # -- Reflector -----------------------------------------------------------------------------------------------

    def reflect(self, task: ReflectorTask) -> str:
        lines = [line for line in task.observations.splitlines() if line.strip()]
        kept = self._condense(lines, task.level)
        return "<observations>\n" + "\n".join(kept) + "\n</observations>"

    @staticmethod
    def _condense(lines: list[str], level: int) -> list[str]:
        """Keep headers, 🔴 and ✅ lines; keep fewer of the others, and shorter, at each level."""
        kept: list[str] = []
        others_today = 0
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("Date:"):
                if kept and kept[-1].strip().startswith("Date:") and level >= 3:
                    kept.pop()  # a day with nothing left to say
                kept.append(stripped)
                others_today = 0
                continue
            high = "🔴" in stripped or "✅" in stripped
            nested = line.startswith((" ", "\t"))
            if high and not nested:
                kept.append(stripped if level < 4 else _gist(stripped, 160))
                continue
            if nested:
                continue  # details go first, at every level
            if "🟢" in stripped and level >= 1:
                continue
            others_today += 1
            if level >= 4 or (level == 3 and others_today > 1) or (level == 2 and others_today % 2 == 0):
                continue
            kept.append(stripped if level == 0 else _gist(stripped, 120))
        if kept and kept[-1].startswith("Date:"):
            kept.pop()
        return kept
