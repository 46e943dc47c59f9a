"""The usage instructions an agent's prompt gets when its memory has retrieval on.

They teach when to look things up (exact wording, code, numbers, details the observations summarise away, other
conversations) and how: which mode, how to use a group's range as a cursor, paging, detail levels and ``partIndex``.
The text depends on the scope (``thread``: only the current conversation; ``resource``: every conversation of the
user) and on whether semantic search is available, so an agent is never pointed at a mode it cannot use. The
application's own guidance (``retrieval.instructions``) is appended, never substituted.
"""

from __future__ import annotations

from om_stream.core.config import RetrievalConfig

__all__ = ["recall_instructions"]

_INTRO = """## Looking up source messages (the recall tool)

Your observations are a summary. Each group of observations names the raw messages it was written from, as a range
of message ids: `_range: <firstId>:<lastId>_` (several ranges are separated by commas). The recall tool reads those
messages back, word for word."""

_WHEN = """Use recall, rather than answering from the summary, when:
- the user asks you to repeat, quote or show something exactly (code, a command, a URL, a number, a name);
- the observations mention something but leave out the detail you need;
- you are about to rely on a detail you are not sure of: check it first;
{resource_when}If a lookup could change your answer, look it up: a recall call costs far less than a wrong answer."""

_RESOURCE_WHEN = ("- the user refers to another conversation or to something said \"before\", even if no "
                  "observation mentions it.\n")

_MODES_THREAD = """How to look things up (this conversation only):
- mode "messages" (the default) with a cursor: a message id, usually one end of a group's range.
- mode "messages" without a cursor reads this conversation from its start (anchor "start") or its end (anchor "end").
- mode "threads" shows this conversation's id and title."""

_MODES_RESOURCE = """How to look things up (every conversation of this user):
- mode "threads" lists the user's conversations, most recently active first, with ids, titles and dates
  (filter by creation date with before/after; page is 0-based).
- mode "messages" reads one conversation: give a cursor (a message id), or threadId (an id from mode "threads", or
  "current") to read it from its start or end (anchor "start" / "end").
- a cursor from another conversation opens that conversation; with threadId, the cursor must belong to it."""

_SEARCH = """- mode "search" with a query finds messages and observations by meaning{where}; each result shows its
  score, a preview, and a cursor to open with mode "messages". Search ranks by similarity, so a top result can still
  be off topic: when results look unrelated, {fallback}"""

_SEARCH_FALLBACK_RESOURCE = "list the conversations with mode \"threads\" and read the likely ones; do not give up."
_SEARCH_FALLBACK_THREAD = "page through the conversation with mode \"messages\" instead."

_CURSOR = """Reading messages:
1. Take the first or the last id of a range (never the whole `first:last` string) as the cursor.
2. page 1 reads forward starting at the cursor, page -1 reads backward ending at it; page 2 / -2 continue further.
   Messages are always listed oldest first; hasNextPage / hasPrevPage say whether newer / older ones exist.
3. limit sets how many messages a page holds (at most 20). Without a cursor, pages count away from the anchor:
   with anchor "end", page 2 holds the messages before page 1."""

_DETAIL = """Detail:
- detail "low" (the default) shows each message part shortened, tagged [p0], [p1], ... Parts cut short say so,
  with the exact call that shows them in full.
- partIndex N with a cursor returns part N of that message in full. A part too long for one answer comes in pieces:
  call again with the charOffset the answer gives (nextCharOffset) until it stops.
- detail "high" shows one part at a time and says how to reach the next part or message.
- partType ("text", "tool-call", "tool-result", "reasoning", "image", "file") and toolName keep only matching parts;
  messages without one are skipped.
- author (an author's id or name, as shown in brackets after a message's role) keeps only the messages that author
  wrote, in a thread several people or agents write to; in search, only their messages (no observation groups).
- Answers are limited to about 2,000 tokens; a cut answer says truncated. Ask for fewer messages or one part."""

_SKIP = """You do not need recall when the observations already answer the question with the detail asked for, or
for small talk."""


def recall_instructions(retrieval: RetrievalConfig | None, *, search_available: bool = True) -> str:
    """The instructions text for an agent whose memory has ``retrieval`` on (empty when it is off).

    ``search_available``: a recall index and an embedder are configured; search is offered only when
    ``retrieval.vector`` is also true.
    """
    if retrieval is None:
        return ""
    resource = retrieval.scope == "resource"
    search = retrieval.vector and search_available
    sections = [_INTRO, _WHEN.format(resource_when=_RESOURCE_WHEN if resource else "")]
    modes = _MODES_RESOURCE if resource else _MODES_THREAD
    if search:
        modes += "\n" + _SEARCH.format(
            where=" across all of the user's conversations (threadId narrows it to one)" if resource
            else " in this conversation",
            fallback=_SEARCH_FALLBACK_RESOURCE if resource else _SEARCH_FALLBACK_THREAD)
        if resource:
            modes += ("\n- Choosing: search when you do not know which conversation holds it; threads to see what "
                      "exists; messages once you know where to read.")
    sections += [modes, _CURSOR, _DETAIL, _SKIP]
    if retrieval.instructions and retrieval.instructions.strip():
        sections.append(f"Additional recall guidance:\n{retrieval.instructions.strip()}")
    return "\n\n".join(sections)
