"""The Reflector's prompt: condense the whole observation log into a new one that replaces it.

The system message carries the Observer's own rules (so the rewrite keeps their format and meaning), the
consolidation rules and ``reflection.instruction``; the user message carries the log (observation-group tags
stripped), any specific guidance, the compression guidance of the current ladder level (``ladder.py``), prior
extracted values and the inline extractor sections.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from om_stream.core.extractors import ExtractionContext
from om_stream.core.prompts.chat import ChatMessage
from om_stream.core.prompts.observer import (
    GUIDELINES,
    OBSERVATION_RULES,
    OUTPUT_FORMAT,
    extractor_sections,
    prior_values,
)
from om_stream.core.prompts.tasks import ReflectorTask

__all__ = ["build_reflector_messages", "compression_guidance", "reflector_system_prompt"]

CountText = Callable[[str], int]

_GROUP_TAG = re.compile(r"^[ \t]*</?observation-group\b[^>]*>[ \t]*\n?|</?observation-group\b[^>]*>", re.MULTILINE)

_ROLE = """\
You are the memory of an AI assistant. Another part of that memory, the Observer, has been writing observations \
about the assistant's conversations as they happened. The rules it follows are these:

<observer-rules>
{rules}
</observer-rules>

YOUR ROLE
You reflect on all of the observations: reorganise and streamline them, connect related items, draw the \
conclusions they support, and notice where the assistant drifted from what the user wanted and how to get back \
on track. Rewrite them so that the assistant can carry on from them alone.

Your reflection IS the entire memory. Whatever you leave out is forgotten; assume the assistant knows nothing \
else about the user or the conversation."""

_CONSOLIDATION = """\
CONSOLIDATION
- Keep dates and times, above all when something started, was completed or changed.
- Combine related items: a series of tool calls becomes one line with its outcome; repeated facts become one.
- Keep every ✅ mark together with the concrete outcome it records.
- Condense older content more; keep more detail for recent content.
- When a user assertion and a later question on the same subject disagree, the assertion wins.
- Drop what was superseded, but keep the final state and, when it matters, that it changed."""

_THREADS = """\
THREADS
The observations cover several conversations, in <thread id="..."> sections. Keep a conversation's section for \
what is specific to it. Facts that hold across conversations (the user's name, job, preferences) are stated once, \
outside the thread sections. For example, two sections that both say "User stated they are vegetarian" become \
one line before the sections, and each section keeps only its own topic."""

_OUTPUT = """\
Write the reflection in the Observer's output format: priority marks, "Date: Mon D, YYYY" groups, (HH:MM) times, \
all inside one <observations> block."""

_CLOSING_WITH_HINTS = """\
The user's messages matter most. If the latest user request is still open, make it the first item of \
<current-task>. If the assistant still has to reply, say so in <suggested-response>, and that it should then wait \
for the user."""

_LEVELS = {
    1: ("Condense gently. Shorten the older part and keep the detail near the end. Merge related items and "
        "repeated tool calls without losing names, places, events or people. Keep every ✅. Aim to keep about "
        "8/10 of the detail."),
    2: ("Condense firmly. Compress older content heavily; merge everything about the same file, module or topic "
        "into one short story of what happened; drop all redundancy. Aim to keep about 6/10 of the detail."),
    3: ("This is critical. Summarise the oldest 50-70% of the observations into a few short lines per topic; "
        "keep the most recent 30-50% condensed but recognisable. Reduce tool sequences to their outcomes and drop "
        "superseded items. Keep names, dates, decisions, errors, preferences and architecture choices. Aim to "
        "keep about 4/10 of the detail."),
    4: ("Go to the extreme. Cut the number of lines drastically while keeping the Date/bullet format. Collapse "
        "every tool sequence into what was learned; at most two or three date groups per day; one or two lines "
        "per older topic; keep only final states. Aim to keep about 2/10 of the detail."),
}


def compression_guidance(level: int, target_tokens: int, current_tokens: int) -> str:
    """The ladder level's instructions; empty at level 0. Levels above 4 read as 4."""
    if level <= 0:
        return ""
    step = min(level, max(_LEVELS))
    return (f"## Compression (level {step} of 4)\n\nThe previous reflection was too large: the result must be "
            f"under {target_tokens} tokens (the observations above are about {current_tokens} tokens). "
            f"{_LEVELS[step]}")


def reflector_system_prompt(task: ReflectorTask) -> str:
    rules = "\n\n".join((OBSERVATION_RULES, OUTPUT_FORMAT, GUIDELINES))
    parts = [_ROLE.format(rules=rules), _CONSOLIDATION]
    if task.multi_thread:
        parts.append(_THREADS)
    parts.append(_OUTPUT)
    if task.want_hints:
        parts.append("After </observations> you may add <current-task> (what the assistant is working on now and "
                     "whether it waits for the user) and <suggested-response> (a short hint for its next message)."
                     "\n\n" + _CLOSING_WITH_HINTS)
    if task.instruction and task.instruction.strip():
        parts.append(f"ADDITIONAL INSTRUCTIONS FROM THE APPLICATION\n{task.instruction.strip()}")
    return "\n\n".join(parts)


def _strip_groups(observations: str) -> str:
    return _GROUP_TAG.sub("", observations).strip()


def build_reflector_messages(task: ReflectorTask, count_text: CountText) -> tuple[ChatMessage, ...]:
    """System prompt and one user message: the log to reflect, guidance, compression level, prior values, extra
    output sections, and the demand for an observations block."""
    log = _strip_groups(task.observations)
    sections = [f"## Observations to reflect on\n\n{log or '(none)'}",
                "## Your task\n\nRewrite these observations into a refined, condensed version. It replaces them "
                "completely and becomes the whole memory."]
    if task.guidance and task.guidance.strip():
        sections.append(f"## Specific guidance\n\n{task.guidance.strip()}")
    guidance = compression_guidance(task.level, task.target_tokens, count_text(log))
    if guidance:
        sections.append(guidance)
    prior = prior_values(task.prior_extracted, task.inline_extractors)
    if prior:
        sections.append(f"## Prior extracted values\n\n{prior}\n\nCarry them forward unless the observations "
                        "justify a change.")
    extra = extractor_sections((), task.inline_extractors, ExtractionContext(source="reflection", thread_id=None,
                                                                               resource_id=None), heading=False)
    if extra:
        sections.append(f"## Additional output sections\n\n{extra}")
    sections.append("Always output an <observations> block.")
    return (ChatMessage(role="system", content=reflector_system_prompt(task)),
            ChatMessage(role="user", content="\n\n".join(sections)))
