"""The offline Observer: observations written from the messages of an ``ObserverTask``, in the format the Observer
prompt asks of a real model (``core.prompts.observer``), so they go through the same parser.

* One ``Date:`` header per day of the batch (in the task's time zone); lines in time order, ``(HH:MM)`` times.
* A user message is one line, marked by what it says (``offline_signals``): 🔴 for a request to remember, a
  preference, a fact about the user or their world, an intention with a date or a number; 🟡 otherwise; 🟢 for a
  bare acknowledgement; ✅ when the user confirms that something worked. Its text is kept word for word up to a few
  hundred characters; a longer message keeps its most telling sentences (remember requests, facts, dates, numbers,
  versions first). Relative dates it mentions are resolved at the end of the line (``offline_dates``).
* The assistant's replies and tool calls are ``->`` detail lines under the exchange they belong to (a top-level 🟡
  line when the batch starts mid-exchange), cut down to their sentences with numbers and dates; a tool result is
  read as JSON when it is JSON and its leaves listed breadth first.
* Temporal gap reminders add nothing the times and headers do not say and are left out, unless the batch holds
  nothing else (an Observer answer is never empty).
* Current task and suggested response follow the latest user message; the thread title comes from the first one.
* In a shared thread a message's author is named where the role would be: "Ana stated: …", "billing-agent
  replied: …", "billing-agent called …" (its name, else its id); a message without an author reads "User …" /
  "Assistant: …" as it always did.

Everything here is a pure function of the task: deterministic, and a few regex passes per message.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from om_stream.adapters.offline_dates import resolve_dates
from om_stream.adapters.offline_signals import (
    HIGH,
    LOW,
    MINOR,
    confirms_success,
    read_sentence,
    sentences,
)
from om_stream.core.messages import FilePart, ImagePart, Message, ToolCallPart, ToolResultPart
from om_stream.core.prompts.tasks import ObserverTask, ThreadBatch

__all__ = ["cut", "date_header", "digest", "observe"]

USER_CHARS = 240  # a user message up to this long is kept word for word
USER_MAX_CHARS = 800
REPLY_CHARS = 100
REPLY_MAX_CHARS = 240
ARGS_CHARS = 60
RESULT_CHARS = 140
_MONTH_ABBR = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_REMINDER = re.compile(r"</?system-reminder>")
_DIGIT = re.compile(r"\d")
# discourse markers that open a sentence and say nothing of its content
_OPENER = re.compile(r"^(?:quick update|update|before we start|one more thing|by the way|btw|oh and|anyway|fyi|"
                     r"just so you know|for the record|side note|also)[:,]\s+(?=\S)", re.IGNORECASE)
_POINTS_BACK = re.compile(r"^(?!.*\d).*\b(?:that|this|it|these|those|them)\b", re.IGNORECASE)
_CONTENT_WORD = re.compile(r"[a-z0-9]{3,}")
_ACKNOWLEDGING = frozenset(
    ["noted", "understood", "sure", "okay", "great", "got", "will", "keep", "mind", "remember", "thanks", "you",
     "your", "you're", "the", "and", "for", "that", "this", "with", "all", "right"])
RESTATED = 0.6  # a reply whose words are mostly the user's own restates it, and is not recorded again
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'+#.-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_TITLE_SKIP = frozenset(
    ["i", "i'm", "im", "i've", "i'd", "i'll", "me", "my", "we", "we're", "we've", "we'd", "we'll", "our", "us", "you",
     "you're", "your", "it", "it's", "its", "they", "their", "them", "he", "she", "his", "her", "this", "that",
     "these", "those", "a", "an", "the", "is", "are", "was", "were", "be", "been", "am", "do", "does", "did", "can",
     "could", "would", "should", "will", "shall", "may", "might", "must", "have", "has", "had", "please", "hi",
     "hello", "hey", "so", "ok", "okay", "also", "just", "really", "very", "what", "how", "why", "when", "where",
     "which", "who", "whose", "whom", "there", "here", "some", "any", "help", "let", "let's"])
_TITLE_JOINERS = frozenset(["to", "of", "for", "in", "on", "with", "and", "from", "at"])


@dataclass(frozen=True)
class _UserSaid:
    digest: str
    kind: str  # "remember" | "question" | "request" | "statement"
    who: str | None = None  # the author's name, in a shared thread


@dataclass
class _Batch:
    """The lines of one conversation's batch, and what the hints need to know about it."""

    zone: tzinfo
    lines: list[str] = field(default_factory=list)
    day: date | None = None
    exchange_open: bool = False
    last_user: _UserSaid | None = None
    user_words: frozenset[str] = frozenset()
    replied: bool = False
    last_reply: str | None = None
    skipped: list[str] = field(default_factory=list)  # reminder lines, used only when nothing else was said

    def add(self, moment: datetime, line: str, *, top_level: bool) -> None:
        if moment.date() != self.day:
            self.day = moment.date()
            self.lines.append(date_header(self.day))
            self.exchange_open = False
        self.lines.append(line)
        if top_level:
            self.exchange_open = True


def date_header(day: date) -> str:
    return f"Date: {_MONTH_ABBR[day.month - 1]} {day.day}, {day.year}"


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a word boundary with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[:max(1, limit - 1)]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:-") + "…"


def _budget(length: int, base: int, ceiling: int) -> int:
    """Longer messages keep more characters, but ever fewer of each further hundred."""
    return length if length <= base else min(ceiling, base + (length - base) // 10)


def _joined(texts: Sequence[str]) -> str:
    return " ".join(t if t.endswith((".", "!", "?", ":", ";", "…")) else f"{t};" for t in texts).rstrip(";")


def _reply_weight(text: str) -> int:
    """What makes a sentence of a reply worth keeping, cheaply: numbers, names, dates."""
    return 2 * (_DIGIT.search(text) is not None) + (text[1:] != text[1:].lower()) + 1


def digest(texts: Sequence[str], limit: int, weights: Sequence[int] | None = None) -> str:
    """The sentences of a message within ``limit`` characters: all of them when they fit, else the first one and
    the heaviest (``weights``, by default :func:`_reply_weight`), kept in their order, with ``…`` between
    sentences that were not next to each other."""
    whole = _joined(texts)
    if len(whole) <= limit or not texts:
        return cut(whole, limit)
    weight = list(weights) if weights is not None else [_reply_weight(t) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: (-(weight[i] + (1 if i == 0 else 0)), i))
    chosen: set[int] = set()
    used = 0
    for index in order:
        cost = len(texts[index]) + 2
        if used + cost > limit and chosen:
            continue
        chosen.add(index)
        used += cost
    pieces: list[str] = []
    previous = -1
    for index in sorted(chosen):
        if previous >= 0 and index != previous + 1:
            pieces.append("…")
        pieces.append(_joined([texts[index]]))
        previous = index
    return cut(" ".join(pieces), limit)


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return cut(" ".join(value.split()), 60)
    return json.dumps(value, ensure_ascii=False, default=str)


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _leaves(value: Any, limit: int) -> str:
    """A structured value as ``key=value`` leaves, breadth first (shallow facts before deep ones), with list
    sizes, within ``limit`` characters."""
    value = _decoded(value)
    if isinstance(value, str):
        return digest(sentences(value), limit)
    if not isinstance(value, dict | list | tuple):
        return _scalar(value)
    out: list[str] = []
    used = 0
    queue: deque[tuple[str, Any]] = deque([("", value)])
    while queue and used < limit:
        key, item = queue.popleft()
        if isinstance(item, dict):
            queue.extend((str(k), v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            noun = "item" if len(item) == 1 else "items"
            entry = f"{key}: {len(item)} {noun}" if key else f"{len(item)} {noun}"
            out.append(entry)
            used += len(entry) + 2
            queue.extend(("", v) for v in item[:3])
        elif item is not None and item != "":
            entry = f"{key}={_scalar(item)}" if key else _scalar(item)
            out.append(entry)
            used += len(entry) + 2
    return cut(", ".join(out), limit)


def _who(message: Message) -> str | None:
    return message.author.label if message.author is not None else None


def _user_line(message: Message, moment: datetime, previous_reply: str | None) -> tuple[str, _UserSaid] | None:
    text = message.text
    who = _who(message)
    subject = who or "User"
    clock = f"{moment:%H:%M}"
    units = [read_sentence(s) for s in sentences(text)]
    media = [f"(shared {'image' if isinstance(p, ImagePart) else 'file'}: {p.filename or p.mime_type})"
             for p in message.parts if isinstance(p, ImagePart | FilePart)]
    if not units and not media:
        return None
    said = [u for u in units if not u.filler] or units
    said = [replace(u, text=_without_opener(u.text)) for u in said]
    if any(u.remember for u in said):
        # "Please keep that in mind." says nothing the verb does not: the sentences it points back to are the fact
        pointing = [u for u in said if u.remember and _POINTS_BACK.search(u.text) and len(u.text.split()) <= 7]
        said = [u for u in said if u not in pointing] or said
    texts = [u.text for u in said]
    body = digest(texts, _budget(len(_joined(texts)), USER_CHARS, USER_MAX_CHARS), [u.weight for u in said]) \
        if said else ""
    body = " ".join(p for p in (body, *media) if p)
    notes = resolve_dates(text.lower(), moment.date()) if said else []
    suffix = "".join(f" ({n})" for n in notes)
    if any(u.remember for u in units):
        kind, verb = "remember", "asked the assistant to remember"
    elif said and said[0].question:
        kind, verb = "question", "asked"
    elif said and said[0].request:
        kind, verb = "request", "requested"
    else:
        kind, verb = "statement", "stated"
    if previous_reply is not None and kind != "remember" and confirms_success(text):
        line = f"* ✅ ({clock}) {subject} confirmed it worked: {cut(previous_reply, REPLY_CHARS)} (\"{cut(body, 80)}\")"
        return line, _UserSaid(body, "statement", who)
    mark = HIGH if any(u.mark == HIGH for u in said) else MINOR if all(u.filler for u in units) and not media \
        else LOW
    return f"* {mark} ({clock}) {subject} {verb}: {body}{suffix}", _UserSaid(body, kind, who)


def _without_opener(text: str) -> str:
    rest = _OPENER.sub("", text, count=1)
    return rest[:1].upper() + rest[1:] if rest != text and rest else text


def _restates(reply: str, user_words: frozenset[str]) -> bool:
    words = [w for w in _CONTENT_WORD.findall(reply.lower()) if w not in _ACKNOWLEDGING]
    return bool(words) and sum(w in user_words for w in words) >= RESTATED * len(words)


def _tool_outcome(part: ToolResultPart | None) -> str:
    if part is None:
        return ""
    if part.is_error:
        return f": failed: {_leaves(part.result, RESULT_CHARS)}"
    return f": {_leaves(part.result, RESULT_CHARS)}"


def _observe(messages: Iterable[Message], zone: tzinfo) -> _Batch:
    ordered = sorted(messages, key=lambda m: m.created_at_ms)
    results = {p.tool_call_id: p for m in ordered for p in m.parts if isinstance(p, ToolResultPart)}
    called = {p.tool_call_id for m in ordered for p in m.parts if isinstance(p, ToolCallPart)}
    batch = _Batch(zone=zone)
    for message in ordered:
        moment = message.created_at.astimezone(zone)
        clock = f"{moment:%H:%M}"
        if message.role == "user":
            said = _user_line(message, moment, batch.last_reply if batch.replied else None)
            if said is not None:
                batch.add(moment, said[0], top_level=True)
                batch.last_user, batch.replied = said[1], False
                batch.user_words = frozenset(_CONTENT_WORD.findall(message.text.lower()))
            continue
        if message.role == "system":
            text = " ".join(_REMINDER.sub(" ", message.text).split())
            if not text:
                continue
            if _REMINDER.search(message.text):
                batch.skipped.append(f"* {MINOR} ({clock}) {cut(text, 120)}")
            else:
                batch.add(moment, f"* {MINOR} ({clock}) System: {cut(text, 120)}", top_level=True)
            continue
        if message.text.strip():
            reply = digest(sentences(message.text), _budget(len(message.text), REPLY_CHARS, REPLY_MAX_CHARS))
            nested = batch.exchange_open and moment.date() == batch.day
            if not (nested and _restates(reply, batch.user_words)):
                speaker = f"{who} replied" if (who := _who(message)) else "Assistant"
                line = f"  * -> {speaker}: {reply}" if nested else f"* {LOW} ({clock}) {speaker}: {reply}"
                batch.add(moment, line, top_level=not nested)
            batch.replied, batch.last_reply = True, reply
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                outcome = _tool_outcome(results.get(part.tool_call_id))
                call = f"{part.tool_name}({_leaves(part.args, ARGS_CHARS) if part.args else ''}){outcome}"
            elif isinstance(part, ToolResultPart) and part.tool_call_id not in called:
                call = f"{part.tool_name} returned{_tool_outcome(part)}"  # its call was observed earlier
            else:
                continue
            nested = batch.exchange_open and moment.date() == batch.day
            who = _who(message)
            if nested:
                line = f"  * -> {who} called {call}" if who else f"  * -> {call}"
            else:
                line = f"* {LOW} ({clock}) {who or 'Assistant'} called {call}"
            batch.add(moment, line, top_level=not nested)
    if not batch.lines and ordered:
        moment = ordered[0].created_at.astimezone(zone)
        sender = _who(ordered[0]) or ordered[0].role.capitalize()
        fallback = f"* {MINOR} ({moment:%H:%M}) {sender} sent a message with nothing to observe"
        for line in batch.skipped or [fallback]:
            batch.add(moment, line, top_level=True)
    return batch


def _hints(batch: _Batch, prior_task: str | None, prior_suggested: str | None) -> list[str]:
    said = batch.last_user
    if said is None:
        kept = []
        if prior_task:
            kept.append(f"<current-task>\n{prior_task}\n</current-task>")
        if prior_suggested:
            kept.append(f"<suggested-response>\n{prior_suggested}\n</suggested-response>")
        return kept
    whose = f"{said.who}'s" if said.who else "the user's"
    what = {"remember": f"keep in mind what {said.who or 'the user'} asked to remember",
            "question": f"answer {whose} question", "request": f"do what {said.who or 'the user'} requested",
            "statement": f"respond to {whose} latest message"}[said.kind]
    state = "The assistant has replied and is waiting for the user." if batch.replied else \
        "The assistant has not replied yet."
    task = f"Primary: {what}: {cut(said.digest, 160)}\n{state}"
    if batch.replied and batch.last_reply:
        suggestion = f"Wait for the user's next message; the last reply was: {cut(batch.last_reply, 120)}"
    else:
        suggestion = f"Reply to \"{cut(said.digest, 100)}\" using the details recorded above, then wait for the user."
    return [f"<current-task>\n{task}\n</current-task>", f"<suggested-response>\n{suggestion}\n</suggested-response>"]


def _title(messages: Iterable[Message]) -> str | None:
    """A 2-5 word noun phrase from the first user message: its first question or request, else its last
    sentence, from the first word that carries meaning."""
    first = next((m.text for m in sorted(messages, key=lambda m: m.created_at_ms)
                  if m.role == "user" and m.text.strip()), None)
    if first is None:
        return None
    units = [u for u in (read_sentence(s) for s in sentences(first)) if not u.filler]
    if not units:
        return None
    chosen = next((u for u in units if u.question or u.request), units[-1])
    words: list[str] = []
    for word in _WORD.findall(chosen.text):
        lowered = word.lower()
        if not words:
            if lowered not in _TITLE_SKIP and lowered not in _TITLE_JOINERS:
                words.append(word)
        elif lowered in _TITLE_JOINERS or lowered not in _TITLE_SKIP:
            words.append(word)
        if len(words) == 5:
            break
    while words and words[-1].lower() in _TITLE_JOINERS:
        words.pop()
    if len(words) < 2:
        return None
    return words[0][:1].upper() + words[0][1:] + "".join(f" {w}" for w in words[1:])


def _thread_block(batch_in: ThreadBatch, zone: tzinfo, hints: bool) -> str:
    batch = _observe(batch_in.messages, zone)
    sections = _hints(batch, batch_in.prior_current_task, batch_in.prior_suggested_response) if hints else []
    body = "\n".join([*batch.lines, *sections])
    return f'<thread id="{batch_in.thread_id}">\n{body}\n</thread>'


def observe(task: ObserverTask) -> str:
    """The Observer's answer to ``task``: an ``<observations>`` block, then the sections asked for."""
    zone = _zone(task.timezone)
    if task.threads:
        blocks = [_thread_block(b, zone, task.want_hints) for b in task.threads]
        return "<observations>\n" + "\n".join(blocks) + "\n</observations>"
    batch = _observe(task.messages, zone)
    sections = _hints(batch, task.prior_current_task, task.prior_suggested_response) if task.want_hints else []
    if task.want_thread_title and not task.prior_thread_title:
        title = _title(task.messages)
        if title:
            sections.append(f"<thread-title>{title}</thread-title>")
    return "<observations>\n" + "\n".join(batch.lines) + "\n</observations>" + \
        "".join(f"\n{s}" for s in sections)
