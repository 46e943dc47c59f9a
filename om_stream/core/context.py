"""The context an agent sends to its model next: OM system blocks, the continuation reminder, raw messages.

* Every observation segment is its own system block, between an opening ``<observations>`` block and a closing
  ``</observations>`` block, so a new segment only adds a block before the closing one: everything before it
  stays byte-identical and providers' prompt caches keep hitting.
* Relative-time annotations ("3 days ago", "in 2 weeks", "likely already happened") are computed against the
  conversation's own time (its newest message), not the wall clock, so a replayed conversation renders the same.
  A ``(meaning …)`` / ``(estimated …)`` note is annotated when it names a day with its year: a plain date, or, as
  the reference reads them, a range of days, a part of a month ("early / mid / late May 2023") or a span of months.
* Continuation hints (current task, suggested response) and extracted values follow the observations.
* Resource scope: what the user said in the resource's other threads and that is not observed yet comes before the
  observations, one ``<other-conversation>`` block per thread, each part cut to ``OTHER_PART_CHARS``. The blocks
  stay bounded: a resource's unobserved messages are what its message threshold lets wait.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache, partial

from om_stream.core.commands import ContextSpec
from om_stream.core.labels import thread_label
from om_stream.core.messages import Message
from om_stream.core.prompts.transcript import render_messages
from om_stream.core.retention import cut_text, parse_day

__all__ = ["CONTINUATION_REMINDER", "INTRO", "OTHER_PART_CHARS", "RenderedBlocks", "RenderedContext",
           "annotate_relative_times", "observation_log", "other_conversation_blocks", "render_blocks",
           "render_context", "visible_texts"]

OTHER_PART_CHARS = 500  # each part of another thread's message, as the agent sees it

INTRO = (
    "Below is your memory of this conversation so far: observations written while it went on, oldest first, "
    "followed by the latest messages verbatim.\n"
    "How to use it:\n"
    "- Rely on specific details from it (names, dates, numbers, preferences) and connect your answer to them.\n"
    "- When observations disagree, the newer one is right: later lines supersede earlier ones (watch for "
    "'changed to', 'no longer', 'switched', 'moved to').\n"
    "- A plan whose date is now in the past most likely happened, unless something later says otherwise.\n"
    "- The user's latest message is what you are answering; the memory is background for it.\n"
    "- Text inside <system-reminder> tags is guidance for you, never something to mention to the user."
)

CONTINUATION_REMINDER = (
    "<system-reminder>Earlier parts of this conversation are summarised in your memory above. Continue naturally "
    "from the messages that follow; treat the memory as background. Pick up unfinished work only where it helps "
    "the latest request, and follow the suggested response if one is given. Do not mention memory, summaries or "
    "missing messages. Everything after this reminder is newer and takes priority.</system-reminder>"
)

_DATE_HEADER = re.compile(r"^(\s*)Date:\s*([A-Z][a-z]{2,8}\.? \d{1,2}, \d{4})\s*$")
_MEANING = re.compile(r"\((meaning|estimated)\s+([^()]*?\b\d{4})\)")
_FUTURE_INTENT = re.compile(r"\b(will|plans? to|planning to|going to|wants? to|needs? to|about to|intends? to|"
                            r"looking forward to|scheduled|is due|deadline)\b", re.IGNORECASE)
_GROUP_TAG = re.compile(r"</?observation-group[^>]*>")
# estimated dates the Observer writes, each read as one day (the reference's reading): a range of days is its first
# day, early / mid / late a month its 7th / 15th / 23rd ("mid-to-late": the first word), a span of months or a month
# alone its first month's 1st
_MONTH = (r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
          r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
_DAY_RANGE = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})\s*[-–]\s*\d{{1,2}},?\s+(\d{{4}})\b", re.IGNORECASE)
_PART_OF_MONTH = re.compile(rf"\b(early|mid|late)(?:[- ]to[- ](?:early|mid|late))?[- ]+{_MONTH},?\s+(\d{{4}})\b",
                            re.IGNORECASE)
_MONTHS_SPAN = re.compile(rf"\b{_MONTH}(?:\s*(?:to|through|[-–])\s*{_MONTH})?,?\s+(\d{{4}})\b", re.IGNORECASE)
_PART_DAY = {"early": 7, "mid": 15, "late": 23}


@dataclass(frozen=True)
class RenderedBlocks:
    system_blocks: tuple[str, ...]
    segment_blocks: tuple[str, ...]  # the observation segments among them, as rendered
    continuation: str | None  # the synthetic user reminder placed before the raw messages (None without memory)


@dataclass(frozen=True)
class RenderedContext:
    system_blocks: tuple[str, ...]
    observations: str  # the whole observation log as the agent sees it, tags closed
    continuation: str | None  # the synthetic user reminder placed before the raw messages (None without memory)
    messages: tuple[Message, ...]
    message_tokens: int
    observation_tokens: int


def _relative(days: int) -> str:
    if days == 0:
        return "today"
    if days == -1:
        return "yesterday"
    if days == 1:
        return "tomorrow"
    span = abs(days)
    if span < 7:
        amount = f"{span} days"
    elif span < 30:
        weeks = span // 7
        amount = f"{weeks} week{'s' if weeks > 1 else ''}"
    elif span < 365:
        months = span // 30
        amount = f"{months} month{'s' if months > 1 else ''}"
    else:
        years = span // 365
        amount = f"{years} year{'s' if years > 1 else ''}"
    return f"{amount} ago" if days < 0 else f"in {amount}"


def _gap(days: int) -> str:
    if days < 7:
        return f"[{days} days later]"
    if days < 30:
        weeks = days // 7
        return f"[{weeks} week{'s' if weeks > 1 else ''} later]"
    months = days // 30
    return f"[{months} month{'s' if months > 1 else ''} later]"


@lru_cache(maxsize=8192)
def _without_group_tags(stored: str) -> str:
    """A stored segment's text without its ``<observation-group>`` tags. Memoised, like
    :func:`annotate_relative_times` after it: a segment's text never changes, and a string the content cache hands
    out again is the same object, whose hash is kept, so rendering an unchanged segment costs the same whatever its
    length (an unmemoised pass over a 4,000-token log took ~60 us, on every context)."""
    return _GROUP_TAG.sub("", stored).strip()


@lru_cache(maxsize=8192)
def annotate_relative_times(text: str, today: date, previous_header: date | None = None) -> tuple[str, date | None]:
    """Annotate date headers and ``(meaning <date>)`` marks relative to ``today`` (the conversation's date); a
    header repeating the day of the header before it (in this text or, through ``previous_header``, in the segments
    before it) is left out, so each day is introduced once.

    Returns the text and the last date header seen, so consecutive segments can mark gaps between them.
    Memoised: a context is re-rendered after every message, and its segments rarely change.
    """
    out: list[str] = []
    last = previous_header
    for line in text.splitlines():
        header = _DATE_HEADER.match(line)
        if header:
            day = parse_day(header.group(2))
            if day is None:
                out.append(line)
                continue
            if day == last:
                continue  # the same day as the header before it (a later group of that day): said once
            if last is not None and (day - last).days > 1:
                out.append(f"{header.group(1)}{_gap((day - last).days)}")
            out.append(f"{line.rstrip()} ({_relative((day - today).days)})")
            last = day
            continue
        out.append(_MEANING.sub(partial(_meaning_note, line=line, today=today), line))
    return "\n".join(out), last


def _month(name: str) -> int:
    return ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec").index(
        name[:3].lower()) + 1


def _estimated_day(note: str) -> date | None:
    """The day a ``(meaning …)`` / ``(estimated …)`` note names: a plain date, a range of days, a part of a month
    or a span of months, always with its year (None: no such date)."""
    day = parse_day(note)
    if day is not None:
        return day
    try:
        if found := _DAY_RANGE.search(note):
            return date(int(found.group(3)), _month(found.group(1)), int(found.group(2)))
        if found := _PART_OF_MONTH.search(note):
            return date(int(found.group(3)), _month(found.group(2)), _PART_DAY[found.group(1).lower()])
        if found := _MONTHS_SPAN.search(note):
            return date(int(found.group(3)), _month(found.group(1)), 1)
    except ValueError:  # a day the month does not have
        return None
    return None


def _meaning_note(match: re.Match[str], *, line: str, today: date) -> str:
    day = _estimated_day(match.group(2))
    if day is None:
        return match.group(0)
    delta = (day - today).days
    note = f"{match.group(0)} - {_relative(delta)}"
    if delta < 0 and _FUTURE_INTENT.search(line):
        note += ", likely already happened"
    return note


def other_conversation_blocks(spec: ContextSpec, messages: Sequence[Message]) -> tuple[tuple[str, str], ...]:
    """The other threads' unobserved messages (``spec.other_threads``) as (label, transcript) pairs, in the spec's
    order; a thread none of whose messages could be read is left out. Attachments show as placeholders only."""
    by_id = {m.message_id: m for m in messages}
    blocks = []
    for thread_id, message_ids in spec.other_threads:
        found = [by_id[i] for i in message_ids if i in by_id and by_id[i].thread_id == thread_id]
        # parts are cut to a few hundred characters, far below the transcript's token limits: characters stand in
        # for tokens there
        text = render_messages(found, len, attachments_policy=False, max_part_chars=OTHER_PART_CHARS).text
        if text:
            blocks.append((thread_label(thread_id, spec.obscure_thread_ids), text))
    return tuple(blocks)


def visible_texts(spec: ContextSpec, segments: Mapping[str, str]) -> dict[str, str]:
    """The spec's segment texts as the agent may see them: without the entries past the retention cutoff
    (``spec.expire_before``; ``core.retention``). A segment whose entries all start at or after the cutoff (its
    ``segment_dated_from``) is given as stored, so the blocks change only when something in them expires."""
    before = spec.expire_before
    visible = {i: segments[i] for i in spec.segment_ids if i in segments}
    if before is None:
        return visible
    dated = spec.segment_dated_from if len(spec.segment_dated_from) == len(spec.segment_ids) else ()
    for index, segment_id in enumerate(spec.segment_ids):
        if segment_id in visible and not (dated and dated[index] >= before):
            undated_at = spec.segment_boundaries[index] if index < len(spec.segment_boundaries) else before
            visible[segment_id] = cut_text(visible[segment_id], before, undated_at).text
    return visible


def render_context(spec: ContextSpec, segments: Mapping[str, str], messages: Sequence[Message], *,
                   now_ms: int, hints: bool = True, extracted: Mapping[str, str] | None = None,
                   extra_instructions: str | None = None, instructions_need_observations: bool = False,
                   other_conversations: Sequence[tuple[str, str]] = (),
                   group_headings: Mapping[str, str] | None = None) -> RenderedContext:
    """Assemble the agent's context from a ``ContextSpec`` and the stored texts it names: the system blocks
    (:func:`render_blocks`), the observation log joined from the segment blocks, and the raw messages created at or
    after the retention cutoff."""
    rendered = render_blocks(spec, segments, now_ms=now_ms, hints=hints, extracted=extracted,
                             extra_instructions=extra_instructions,
                             instructions_need_observations=instructions_need_observations,
                             other_conversations=other_conversations, group_headings=group_headings)
    before = spec.expire_before
    return RenderedContext(system_blocks=rendered.system_blocks, observations=observation_log(rendered),
                           continuation=rendered.continuation,
                           messages=tuple(m for m in messages if before is None or m.created_at_ms >= before),
                           message_tokens=spec.message_tokens, observation_tokens=spec.observation_tokens)


def observation_log(rendered: RenderedBlocks) -> str:
    """The whole observation log as the agent sees it (``om.context/v1``'s ``observations``), tags closed."""
    segment_blocks = rendered.segment_blocks
    return "<observations>\n" + "\n\n".join(segment_blocks) + "\n</observations>" if segment_blocks else ""


def render_blocks(spec: ContextSpec, segments: Mapping[str, str], *, now_ms: int, hints: bool = True,
                  extracted: Mapping[str, str] | None = None, extra_instructions: str | None = None,
                  instructions_need_observations: bool = False, other_conversations: Sequence[tuple[str, str]] = (),
                  group_headings: Mapping[str, str] | None = None) -> RenderedBlocks:
    """The system blocks and the continuation reminder of a context: what does not depend on its raw messages
    (``om.context/v2`` publishes them apart from the messages, and need not touch the messages to make them).

    Retrieval mode: ``extra_instructions`` are the recall tool's instructions and ``group_headings`` introduce each
    segment with its group id and message ranges (the cursors those instructions talk about). With
    ``instructions_need_observations`` (thread-scoped retrieval: recall reads only this conversation, whose
    messages are all in the context until something is observed) the instructions come only once there is an
    observation group; resource-scoped retrieval gives them from the start (other conversations can be read)."""
    today = datetime.fromtimestamp(now_ms / 1000, tz=UTC).date()
    segments = visible_texts(spec, segments)
    segment_blocks: list[str] = []
    previous: date | None = None
    for segment_id in spec.segment_ids:
        text = _without_group_tags(segments.get(segment_id, ""))
        if not text:
            continue
        annotated, previous = annotate_relative_times(text, today, previous)
        heading = (group_headings or {}).get(segment_id)
        segment_blocks.append(f"{heading}\n{annotated}" if heading else annotated)
    blocks: list[str] = []
    if instructions_need_observations and not segment_blocks:
        extra_instructions = None
    intro = INTRO if not extra_instructions else f"{INTRO}\n\n{extra_instructions}"
    has_memory = bool(segment_blocks or (hints and (spec.current_task or spec.suggested_response)))
    if has_memory or extra_instructions:
        blocks.append(intro)
    if other_conversations:
        rendered = "\n\n".join(f'<other-conversation id="{tid}">\n{body}\n</other-conversation>'
                               for tid, body in other_conversations)
        blocks.append("The same user is also talking with you in other conversations. What they said there "
                      "recently is below, for reference only: it is not part of this conversation, and you answer "
                      f"only this one.\n<other-conversations>\n{rendered}\n</other-conversations>")
    if segment_blocks:
        blocks.append("<observations>")
        blocks.extend(segment_blocks)
        blocks.append("</observations>")
    if hints and spec.current_task:
        blocks.append(f"<current-task>\n{spec.current_task}\n</current-task>")
    if hints and spec.suggested_response:
        blocks.append(f"<suggested-response>\n{spec.suggested_response}\n</suggested-response>")
    for slug, value in (extracted or {}).items():
        blocks.append(f"<{slug}>\n{value}\n</{slug}>")
    return RenderedBlocks(system_blocks=tuple(blocks), segment_blocks=tuple(segment_blocks),
                          continuation=CONTINUATION_REMINDER if has_memory else None)
