"""The Observer's prompt: a system message with all of its instructions, then the task and the history as user
messages. Instructions stay in the system role (a user-role copy would read as something the user said).

Also owns ``previousObserverTokens``: :func:`truncate_previous` cuts the previous observations shown to the
Observer down to a token budget (the reference documents this but never calls it; here it is applied).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from om_stream.core.extractors import BUILT_IN_SLUGS, ExtractionContext, Extractor
from om_stream.core.prompts.chat import ChatMessage
from om_stream.core.prompts.tasks import ObserverTask
from om_stream.core.prompts.transcript import AttachmentPolicy, render_messages, render_threads

__all__ = [
    "OBSERVATION_RULES",
    "OUTPUT_FORMAT",
    "build_observer_messages",
    "extractor_sections",
    "observer_system_prompt",
    "prior_values",
    "truncate_previous",
]

CountText = Callable[[str], int]

OBSERVATION_RULES = """\
HOW TO OBSERVE

Statements, questions and intentions
- When the user states something about themselves, their work or their world, record it as an assertion: \
"User stated ...".
- When the user asks or requests something, record it as such: "User asked ...", "User requested ...". A question \
is not a fact and does not tell you its answer.
- When the user says what they will do, must do or plan to do, record the intention with its date: \
"User stated they will ...".
- An assertion outranks a later question on the same subject: if the user said they drive a red car and later \
asks which car colour is safest, the red car is still the fact.

Changes of state
- When something replaces an earlier fact, say so explicitly: "User switched from X to Y", "User no longer ...". \
The newer line supersedes the older one; make that visible.

Time
- Every observation starts with the time of the message it comes from.
- When a message refers to a date that can be worked out from the message's own date ("yesterday", "last \
Friday", "next month", "in March"), add the resolved date at the very end of the line: "(meaning Jun 6, 2026)", \
or "(estimated Mar 2026)" when only approximate. Only for references you can resolve: never for vague ones \
("recently", "soon", "a while ago") and never for facts stated in the present tense.
- A sentence that mentions several events at different times becomes several lines, each with its own date at \
the end.

Precise wording
- Keep unusual or telling phrasing in quotes.
- Use the precise verb, not a vague one: "bought", "subscribed to", "returned", "was given" rather than "got" or \
"has". When the assistant clarified what the user meant, use the clarified wording.
- Keep what distinguishes the things the assistant produced: each item of a list of recommendations with the \
attribute that set it apart; names, handles and titles; the structure of creative work; exact numbers, results \
and measurements; quantities with the count first ("3 tickets"); the user's role at an event (speaker, \
organiser, guest).

What to capture
- What the user is working on and why; outcomes and decisions; constraints and preferences.
- The assistant's explanations, in enough detail that it could give them again; relevant code snippets; \
formatted text or ASCII art verbatim; text the user and the assistant edited together, verbatim in its latest form.
- Who, what, where and when; the identifying attributes of people, places and things.
- Short and medium user messages nearly word for word; long ones summarised, with their key sentences quoted.

Tool use
- Record what tool was called, why, and what it returned or taught, with file paths and line numbers when useful.
- Never repeat an observation already recorded. Group repeated similar tool actions under one parent line with \
"->" sub-bullets instead of one line each.

Next steps
- Record actionable next steps. A next step the user declined or postponed is marked "waiting for user".

Completion (✅)
- Mark with ✅ what is finished: the user confirmed it worked, a question got a definitive answer and the user \
moved on, a goal or subtask was completed.
- Never for a reply the user has not reacted to, a topic that was merely paused, or an ambiguous reaction.
- Use ✅ as a sub-bullet of the task it completes or as its own line, and say concretely what was done \
("✅ Fixed the off-by-one error in pagination.py"), never just "done"."""

OUTPUT_FORMAT = """\
OUTPUT FORMAT

Every observation line starts with a priority mark:
🔴 important: facts the user stated about themselves, preferences, goals not yet reached, context that must not \
be lost
🟡 useful: project details, things learned, tool results
🟢 minor or uncertain
✅ completed (see above)

Observations are grouped by day under a line "Date: Mon D, YYYY". Each observation line reads \
"* <mark> (HH:MM) text" with a 24-hour time; details go on indented lines under their parent. Everything goes \
inside one <observations> block:

<observations>
Date: Jun 6, 2026
* 🔴 (09:14) User stated they are moving to Lyon in September (meaning Sep 2026).
* 🟡 (09:20) Assistant compared three moving companies for the user:
  * -> MoveFast: cheapest, four-week lead time
  * -> Lyon Express: insures fragile items
  * ✅ User chose Lyon Express.
</observations>"""

GUIDELINES = """\
GUIDELINES
- Be specific and actionable: a future reader has nothing but these lines.
- One to five observations per exchange is typical. Be terse; no filler, no duplicates.
- Record tool calls: what was done, why, and what was learned.
- Record detailed assistant answers so they could be given again.
- Every observation line starts with a priority mark or ✅.
- Record concrete completed work with ✅."""

_ROLE = """\
You are the memory of an AI assistant. You read the latest part of a conversation between a user and the \
assistant and write observations about it. The assistant will not see these messages again: your observations \
are the only record it keeps, so write down what it needs to carry on as if it remembered everything that matters."""

_SINGLE_THREAD = """\
THREADS
All the messages come from one conversation. Never write thread ids or <thread> tags."""

_MULTI_THREAD = """\
THREADS
The history contains several conversations of the same user, each in a <thread id="..."> block. Inside \
<observations>, write one <thread id="..."> block per conversation, with the same id, holding that conversation's \
observations and, when they are requested, its own optional sections. For example:

<observations>
<thread id="a1">
Date: Jun 6, 2026
* 🔴 (09:14) User stated they are moving to Lyon in September (meaning Sep 2026).
<current-task>Primary: compare moving companies.</current-task>
</thread>
<thread id="b2">
Date: Jun 6, 2026
* 🟡 (10:02) User asked for a French phrase book recommendation.
</thread>
</observations>"""

_AUTHORS = """\
AUTHORS
Several people or agents write in this conversation. A message's first line names who wrote it, in square \
brackets after the role: "User [Ana] (09:14): ..." is a message of Ana's, "Assistant [billing-agent]: ..." one of \
the billing-agent's; "[planner, agent]" marks an agent writing in the user's role, "[Sam, human]" a person writing \
in the assistant's. Attribute every observation to its author by that name instead of "User" or "Assistant": \
"Ana stated ...", "Ben asked ...", "Ana decided ...", "billing-agent replied ...". Keep what each one said, asked, \
decided or prefers apart: never merge two people's words into one "User" line. A message without a name in \
brackets is the user's or the assistant's, as usual."""

_CLOSING_WITH_HINTS = """\
The user's messages matter most. If the latest user message asks something new or starts a task, make it the \
first item of <current-task>. If the assistant still has to reply, say so in <suggested-response>, and that it \
should then wait for the user."""

_CLOSING = """\
The user's messages matter most: make sure the latest user message, and what it asks for, is recorded."""

_HINT_INSTRUCTIONS = {
    "current-task": "What the assistant is working on now: the primary task, any secondary ones, and whether it "
                    "is waiting for the user. Flag actions the assistant took off-task without the user's approval.",
    "suggested-response": "A short hint for the assistant's next message: what to say or do next so the "
                          "conversation continues naturally.",
    "thread-title": "A title for the conversation: a noun phrase of 2 to 5 words. Keep the current title unless "
                    "the topic really changed.",
}
_GAP_MARKER = "[{} observations truncated here]"
_PRIORITY = ("🔴", "✅")
_DATE = re.compile(r"^\s*Date:")
_THREAD_OPEN = re.compile(r"^\s*<thread\b")
_THREAD_CLOSE = re.compile(r"^\s*</thread>\s*$")
_OTHER_TAG = re.compile(r"^\s*</?[a-z][a-z-]*(\s[^>]*)?>\s*$")


# -- shared with the Reflector --------------------------------------------------------------------------------------

def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def extractor_sections(hints: Iterable[str], extractors: Iterable[Extractor], context: ExtractionContext,
                       *, hints_in_threads: bool = False, heading: bool = True) -> str:
    """The optional output sections: the built-in hints requested, then one per inline extractor."""
    entries = [(slug, _HINT_INSTRUCTIONS[slug]) for slug in hints]
    entries += [(e.slug, e.instructions_for(context).strip()) for e in extractors
                if e.inline and e.slug not in BUILT_IN_SLUGS]
    if not entries:
        return ""
    where = "inside each <thread> block, for that conversation" if hints_in_threads else "after </observations>"
    title = "OPTIONAL SECTIONS\n" if heading else ""
    lines = [f"{title}You may add the following sections ({where}), each as <name>value</name>. "
             "Include a section only when you have something relevant for it; write no other sections."]
    lines += [f"<{slug}>: {text}" for slug, text in entries]
    return "\n\n".join(lines)


def prior_values(values: Mapping[str, Any], extractors: Iterable[Extractor]) -> str:
    """Previous values of the extractors that show them, as ``<slug>value</slug>`` lines."""
    return "\n".join(f"<{e.slug}>{_value_text(values[e.slug])}</{e.slug}>" for e in extractors
                     if e.include_previous_extraction and values.get(e.slug) is not None)


# -- previousObserverTokens -----------------------------------------------------------------------------------------

_PLAIN, _HIGH = 1, 2  # observation lines (content)
_OPEN, _CLOSE, _DAY = 3, 4, 5  # a ``<thread ...>`` tag, a ``</thread>`` tag, a ``Date:`` header (not content)


@lru_cache(maxsize=65_536)
def _line_role(line: str) -> int:
    """What a log line is to the cut: ``_HIGH`` for 🔴/✅ observations, ``_PLAIN`` for the other observation lines,
    ``_OPEN``/``_CLOSE`` for thread tags, ``_DAY`` for date headers, 0 for blank lines and other tags. Memoised: the
    same log lines are examined on every Observer call, and a line's role was worked out by up to four patterns."""
    if _content(line):
        return _HIGH if line.strip().lstrip("*-• ").startswith(_PRIORITY) else _PLAIN
    if _THREAD_OPEN.match(line):
        return _OPEN
    if _THREAD_CLOSE.match(line):
        return _CLOSE
    return _DAY if _DATE.match(line) else 0


def _content(line: str) -> bool:
    stripped = line.lstrip()
    if not stripped:
        return False
    # the patterns only match lines starting with "Date:" or "<": skip the regexes for every other line
    if not stripped.startswith(("Date:", "<")):
        return True
    return not (_DATE.match(line) or _THREAD_OPEN.match(line) or _OTHER_TAG.match(line))


def _render(lines: list[str], roles: list[int], kept: set[int]) -> tuple[list[str], list[str]]:
    """The kept lines under the thread and date headers they need, each run of left-out observation lines as one
    gap marker: the output's lines (joined by newlines, they are the text), and the lines of it that are not kept
    observation lines (the headers and markers, whose cost the caller does not know yet)."""
    out: list[str] = []
    added: list[str] = []  # headers and markers, as they are put in ``out``
    dropped = 0  # left-out lines since the last kept one, inside the current thread section if any
    before_thread = 0  # left-out lines before the current thread section opened
    thread: str | None = None
    thread_shown = False
    day: str | None = None
    day_shown = False
    for index, role in enumerate(roles):
        if role >= _OPEN:
            line = lines[index]
            if role == _DAY:
                day, day_shown = line, False
            elif role == _OPEN:
                thread, thread_shown, day = line, False, None
                before_thread, dropped = dropped, 0
            else:  # _CLOSE
                if thread_shown:
                    if dropped:
                        out.append(_GAP_MARKER.format(dropped))
                        added.append(out[-1])
                    dropped = 0
                    out.append(line)
                    added.append(line)
                else:
                    dropped += before_thread
                thread, thread_shown, before_thread = None, False, 0
        elif role:  # an observation line: kept lines are always observation lines
            if index not in kept:
                dropped += 1
                continue
            if thread and not thread_shown:  # shown after the gap marker and the headers it needs
                if before_thread:
                    out.append(_GAP_MARKER.format(before_thread))
                    added.append(out[-1])
                out.append(thread)
                added.append(thread)
                thread_shown, before_thread = True, 0
            if dropped:
                out.append(_GAP_MARKER.format(dropped))
                added.append(out[-1])
                dropped = 0
            if day and not day_shown:
                out.append(day)
                added.append(day)
                day_shown = True
            out.append(lines[index])
    if out and dropped + before_thread:
        out.append(_GAP_MARKER.format(dropped + before_thread))
        added.append(out[-1])
    return out, added


@lru_cache(maxsize=64)
def truncate_previous(observations: str, budget: int | None, count_text: CountText) -> tuple[str, int]:
    """Previous observations cut to ``budget`` tokens, and the number of observation lines left out.

    ``None`` keeps everything; ``0`` keeps nothing. Otherwise the newest lines that fit are kept; then 🔴 and ✅
    lines from the older part, newest first, may replace the oldest ordinary kept lines, as long as they stay at
    most half of the kept lines. Date headers (and ``<thread>`` tags) of kept lines stay, and each run of left-out
    lines becomes one ``[N observations truncated here]`` marker. Memoised: background cycles between two
    activations see the same previous observations.
    """
    if budget is None:
        return observations, 0
    lines = observations.split("\n")
    roles = list(map(_line_role, lines))
    content = [i for i, role in enumerate(roles) if role in (_PLAIN, _HIGH)]
    if budget <= 0:
        return "", len(content)
    # a line's cost (its tokens and its newline), counted when first needed: most of a long log is left out, and
    # only what may be kept needs counting
    costs: list[int] = [-1] * len(lines)

    def cost(i: int) -> int:
        value = costs[i]
        if value < 0:
            value = costs[i] = count_text(lines[i]) + 1
        return value

    def size(out: list[str]) -> int:
        # line by line: observation lines are short and their counts are cached, unlike the whole text's
        return sum(map(count_text, out)) + len(out)

    spent_newest = 0
    for i in reversed(content):
        spent_newest += cost(i)
        if spent_newest > budget:
            break
    else:
        if size(lines) <= budget:
            return observations, 0

    tail: list[int] = []  # newest first
    spent = 0
    for i in reversed(content):
        line_cost = cost(i)
        if spent + line_cost > budget:
            break
        tail.append(i)
        spent += line_cost
    oldest_tail = tail[-1] if tail else len(lines)
    head: list[int] = []  # newest first
    ordinary = [t for t in tail if roles[t] != _HIGH]  # newest first: pop() gives up the oldest one
    for i in reversed(content):
        if i >= oldest_tail or roles[i] != _HIGH:
            continue
        if len(head) + 1 > len(tail):
            break
        line_cost = cost(i)
        while spent + line_cost > budget and ordinary and len(head) + 1 <= len(tail) - 1:
            victim = ordinary.pop()
            tail.remove(victim)
            spent -= cost(victim)
        if spent + line_cost <= budget and len(head) + 1 <= len(tail):
            head.append(i)
            spent += line_cost

    # ``tail`` is newest first; its ordinary lines, newest first, so ``pop()`` gives up the oldest of them.
    ordinary_left = [t for t in tail if roles[t] != _HIGH]
    tail_set, head_left = set(tail), list(head)

    def drop_one() -> int:
        """Give up the least valuable kept line (the oldest ordinary recent line, unless priority lines would
        then outnumber recent ones) and return its cost."""
        if head_left and (len(head_left) >= len(tail_set) or not ordinary_left):
            victim = head_left.pop()
        elif ordinary_left:
            victim = ordinary_left.pop()
            tail_set.discard(victim)
        else:
            victim = min(tail_set)  # the oldest left
            tail_set.discard(victim)
        return cost(victim)

    # ``spent`` is what the kept lines cost: the rendered text costs that plus its headers and markers
    out, added = _render(lines, roles, tail_set | set(head_left))
    # Headers and markers cost tokens too: give up lines until the whole text fits.
    while (tail_set or head_left) and (excess := spent + size(added) - budget) > 0:
        while excess > 0 and (tail_set or head_left):
            given_up = drop_one()
            excess -= given_up
            spent -= given_up
        out, added = _render(lines, roles, tail_set | set(head_left))
    kept = tail_set | set(head_left)
    if not kept:
        return "", len(content)
    return "\n".join(out), len(content) - len(kept)


# -- the prompt -----------------------------------------------------------------------------------------------------

def _context(task: ObserverTask) -> ExtractionContext:
    first = task.messages[0] if task.messages else None
    return ExtractionContext(source="observation", thread_id=first.thread_id if first else None,
                             resource_id=first.resource_id if first else None)


def _hints(task: ObserverTask) -> list[str]:
    wanted = ["current-task", "suggested-response"] if task.want_hints else []
    return [*wanted, "thread-title"] if task.want_thread_title else wanted


def _has_authors(task: ObserverTask) -> bool:
    messages = [*task.messages, *(m for batch in task.threads for m in batch.messages)]
    return any(m.author is not None and m.role != "system" for m in messages)


def observer_system_prompt(task: ObserverTask) -> str:
    """The instructions. The AUTHORS section is there only when a message of the task names its author, so a
    thread without authors is told exactly what it was told before messages had one."""
    multi = bool(task.threads)
    parts = [_ROLE, OBSERVATION_RULES, OUTPUT_FORMAT,
             extractor_sections(_hints(task), task.inline_extractors, _context(task), hints_in_threads=multi),
             GUIDELINES, _MULTI_THREAD if multi else _SINGLE_THREAD, _AUTHORS if _has_authors(task) else "",
             _CLOSING_WITH_HINTS if task.want_hints else _CLOSING]
    if task.instruction and task.instruction.strip():
        parts.append(f"ADDITIONAL INSTRUCTIONS FROM THE APPLICATION\n{task.instruction.strip()}")
    return "\n\n".join(p for p in parts if p)


def _metadata(current_task: str | None, suggested: str | None, title: str | None, want_title: bool) -> list[str]:
    lines = []
    if current_task:
        lines.append(f"<current-task>{current_task}</current-task>")
    if suggested:
        lines.append(f"<suggested-response>{suggested}</suggested-response>")
    if want_title and title:
        lines.append(f"<thread-title>{title}</thread-title>")
    return lines


def _task_message(task: ObserverTask, previous: str, dropped: int) -> str:
    sections = []
    if previous.strip():
        sections.append(f"## Previous observations\n\n{previous.strip()}\n\nThese are already recorded. Do not "
                        "repeat them: your new observations will be appended after them.")
    else:
        sections.append("## Previous observations\n\n(none yet)")
    if dropped:
        sections.append(f"Note: {dropped} older observation lines were left out above to save space; "
                        "\"[N observations truncated here]\" marks where. They are still recorded.")
    if task.buffered_observations.strip():
        sections.append("## Buffered observations (already written from earlier messages, not yet active)\n\n"
                        f"{task.buffered_observations.strip()}\n\nDo not repeat these either.")
    metadata = _metadata(task.prior_current_task, task.prior_suggested_response, task.prior_thread_title,
                         task.want_thread_title)
    for batch in task.threads:
        inner = _metadata(batch.prior_current_task, batch.prior_suggested_response, batch.prior_thread_title,
                          task.want_thread_title)
        values = prior_values(batch.prior_extracted, task.inline_extractors)
        inner += [values] if values else []
        if inner:
            metadata.append(f'<thread id="{batch.thread_id}">\n' + "\n".join(inner) + "\n</thread>")
    extracted = prior_values(task.prior_extracted, task.inline_extractors)
    if extracted:
        metadata.append(extracted)
    if metadata:
        sections.append("## Prior thread metadata\n\n" + "\n".join(metadata) + "\n\nKeep these values unless the "
                        "new messages change them.")
    ask = ("## Your task\n\nWrite new observations about the message history in the next message. Do not repeat "
           "anything already recorded above. Follow the output format of your instructions exactly.")
    if not task.want_hints:
        ask += " Always output an <observations> block."
    sections.append(ask)
    return "\n\n".join(sections)


def build_observer_messages(task: ObserverTask, count_text: CountText, *, attachments_policy: AttachmentPolicy = True,
                            previous_budget: int | None = None) -> tuple[ChatMessage, ...]:
    """System prompt, task message (previous observations, metadata, the task), history message (the transcript
    with its forwarded attachments). ``previous_budget`` applies ``previousObserverTokens``."""
    previous, dropped = truncate_previous(task.previous_observations, previous_budget, count_text)
    if task.threads:
        transcript = render_threads(task.threads, count_text, attachments_policy=attachments_policy,
                                    timezone=task.timezone)
    else:
        transcript = render_messages(task.messages, count_text, attachments_policy=attachments_policy,
                                     timezone=task.timezone)
    history = f"## New message history to observe\n\n{transcript.text or '(no new messages)'}"
    return (ChatMessage(role="system", content=observer_system_prompt(task)),
            ChatMessage(role="user", content=_task_message(task, previous, dropped + task.previous_truncated)),
            ChatMessage(role="user", content=history, attachments=transcript.attachments))
