"""Reading what the Observer and Reflector answered.

The accepted format (what ``observer.py``/``reflector.py`` ask for, and what the offline model writes)::

    <observations>
    Date: Jun 6, 2026
    * 🔴 (09:14) User stated ...
      * -> detail
    </observations>
    <current-task>…</current-task>            (optional; likewise suggested-response, thread-title)
    <my-extractor>…</my-extractor>            (optional, one per inline extractor; JSON is decoded)
    <extracted-values>{"my-extractor": …}</extracted-values>   (optional alternative)

Rules, in order: a degenerate answer (``degenerate.py``) is rejected whole; extractor values are taken (the last
occurrence of a slug wins, unknown slugs are ignored); ``<observations>`` blocks whose tags start a line are
concatenated; without them the list-item lines are kept (the Reflector falls back to the whole text); an answer
cut off mid-block keeps what it has, except a Reflector's, which keeps only its list items (and the indented lines
continuing them) when it has any, as the reference keeps list items: prose after the list is not memory; ephemeral
ids a Reflector copied (``[O1]``, ``[O1-N2]``) are removed; a values block holding the prompt's placeholder
sentence is nothing extracted, not a failure; lines over 10,000 characters are cut. In multi-thread mode the block
is split into ``<thread id="…">`` sections, each with its own hint tags and extractor values (values written
outside every section are the whole answer's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from om_stream.core.extractors import BUILT_IN_SLUGS, Extractor
from om_stream.core.prompts.degenerate import is_degenerate

__all__ = ["MAX_LINE_CHARS", "ParsedOutput", "parse_observer_output", "parse_reflector_output"]

MAX_LINE_CHARS = 10_000
_HINTS = ("current-task", "suggested-response", "thread-title")
_VALUES_TAG = "extracted-values"
_OBS_OPEN = re.compile(r"^[ \t]*<observations>", re.MULTILINE)
_OBS_CLOSE = re.compile(r"^[ \t]*</observations>|</observations>[ \t]*$", re.MULTILINE)
_THREAD_OPEN = re.compile(r"<thread\s+id\s*=\s*[\"']?([^\"'>]*?)[\"']?\s*>")
_THREAD_CLOSE = "</thread>"
_STRAY_THREAD = re.compile(r"</?thread\b[^>]*>")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S")
_DATE_LINE = re.compile(r"^\s*Date:\s*\S")
_FENCE = re.compile(r"^\s*```[\w-]*\s*$")
# the ephemeral ids a model may copy from the ids it was shown ("[O1]", "[O1-N2]"): never part of the memory; the
# space before one that follows text goes with it, and the space after one that starts a line
_ANCHOR = r"\[O\d+(?:-N\d+)*\]"
_ANCHOR_ID = re.compile(rf"(?<=\S)[ \t]*{_ANCHOR}|{_ANCHOR}[ \t]?")


@dataclass(frozen=True)
class ParsedOutput:
    observations: str
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    extraction_failures: tuple[tuple[str, str], ...] = ()
    per_thread: dict[str, ParsedOutput] | None = None
    degenerate: bool = False
    empty: bool = False


@dataclass(frozen=True)
class _Span:
    name: str
    start: int
    end: int
    content: str


# -- tagged sections ------------------------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _any_open(names: tuple[str, ...]) -> re.Pattern[str]:
    """Memoised, as ``_opener``: the same few section names are looked for in every model answer."""
    alternatives = "|".join(re.escape(n) for n in (*names, "observations"))
    return re.compile(rf"^[ \t]*<(?:{alternatives})>|<thread\s", re.MULTILINE)


@lru_cache(maxsize=256)
def _opener(name: str, anchored: bool) -> re.Pattern[str]:
    return re.compile((r"^[ \t]*" if anchored else "") + f"<{re.escape(name)}>", re.MULTILINE if anchored else 0)


def _spans(text: str, name: str, *, anchored: bool, next_open: re.Pattern[str]) -> list[_Span]:
    """Every ``<name>…</name>`` section; an unclosed one ends where the next section opens, or at the end."""
    opener = _opener(name, anchored)
    closer = f"</{name}>"
    found: list[_Span] = []
    position = 0
    while match := opener.search(text, position):
        begin = match.end()
        close = text.find(closer, begin)
        if close >= 0:
            content, end = text[begin:close], close + len(closer)
        else:
            following = next_open.search(text, begin)
            end = following.start() if following else len(text)
            content = text[begin:end]
        found.append(_Span(name, match.start(), end, content.strip()))
        position = max(end, begin)
    return found


def _take(text: str, names: dict[str, bool]) -> tuple[list[_Span], str]:
    """The sections named (name → open tag must start a line), in order, and the text without them."""
    next_open = _any_open(tuple(names))
    candidates = sorted((s for n, anchored in names.items() for s in _spans(text, n, anchored=anchored,
                                                                               next_open=next_open)),
                        key=lambda s: s.start)
    kept: list[_Span] = []
    pieces: list[str] = []
    cursor = 0
    for span in candidates:
        if span.start < cursor:  # inside a section already taken
            continue
        kept.append(span)
        pieces.append(text[cursor:span.start])
        cursor = span.end
    pieces.append(text[cursor:])
    return kept, "".join(pieces)


def _decode_value(raw: str) -> Any:
    if raw[:1] in ("{", "[") or (len(raw) > 1 and raw[0] == raw[-1] == '"'):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _placeholder(content: str) -> bool:
    """A values block that cannot hold a value (no object, or no ``name: value`` in it): the model copied the
    prompt's placeholder sentence where the JSON belongs, and extracted nothing. Not a failure, as in the
    reference; a block that tries to be an object and is broken still is one."""
    return "{" not in content or ":" not in content


def _extracted(spans: Sequence[_Span], slugs: set[str]) -> tuple[dict[str, Any], dict[str, str], str | None]:
    """Values by slug (last wins, JSON block and tags alike), hint values found in a JSON block, JSON error."""
    values: dict[str, Any] = {}
    hints: dict[str, str] = {}
    error: str | None = None
    for span in spans:
        if span.name == _VALUES_TAG:
            if _placeholder(span.content):
                continue
            try:
                decoded = json.loads(span.content or "{}")
            except ValueError as exc:
                error = f"the <extracted-values> block is not valid JSON ({exc})"
                continue
            if not isinstance(decoded, dict):
                error = "the <extracted-values> block is not a JSON object"
                continue
            for key, value in decoded.items():
                if key in slugs and value is not None:
                    values[key] = value
                elif key in _HINTS and isinstance(value, str) and value.strip():
                    hints[key] = value.strip()
        elif span.name in slugs and span.content:
            values[span.name] = _decode_value(span.content)
    return values, hints, error


# -- observation text -----------------------------------------------------------------------------------------------

def _blocks(text: str) -> tuple[str | None, str, bool]:
    """The concatenated ``<observations>`` blocks (None when there is none), the text outside them, and whether
    the last block was never closed."""
    contents: list[str] = []
    outside: list[str] = []
    position = 0
    unclosed = False
    while opened := _OBS_OPEN.search(text, position):
        outside.append(text[position:opened.start()])
        closed = _OBS_CLOSE.search(text, opened.end())
        if closed is None:  # the answer was cut off, or the model forgot the tag: keep what arrived
            contents.append(text[opened.end():])
            position = len(text)
            unclosed = True
            break
        contents.append(text[opened.end():closed.start()])
        position = closed.end()
    outside.append(text[position:])
    return ("\n".join(c.strip("\n") for c in contents) if contents else None), "".join(outside), unclosed


def _cut_line(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    cut = MAX_LINE_CHARS - 1 if "\ud800" <= line[MAX_LINE_CHARS - 1] <= "\udbff" else MAX_LINE_CHARS
    return f"{line[:cut]} [truncated]"


def _clean(text: str, *, strip_threads: bool) -> str:
    lines = []
    for raw in text.splitlines():
        if _FENCE.match(raw) or (strip_threads and _STRAY_THREAD.fullmatch(raw.strip())):
            continue
        line = _STRAY_THREAD.sub("", raw) if strip_threads else raw
        lines.append(_cut_line(line.rstrip()))
    return "\n".join(lines).strip("\n")


def _list_items(text: str, *, bodies: bool = False) -> str:
    """Fallback for an answer without tags: its list items, with the ``Date:`` lines that head them; with
    ``bodies``, also the indented lines that continue an item kept (a snippet the item quotes), never prose at the
    margin."""
    kept: list[str] = []
    in_item = False
    for line in text.splitlines():
        if _DATE_LINE.match(line):
            if kept and _DATE_LINE.match(kept[-1]):
                kept.pop()
            kept.append(line)
            in_item = False
        elif _LIST_ITEM.match(line):
            kept.append(line)
            in_item = True
        elif bodies and in_item and line[:1] in (" ", "\t") and line.strip():
            kept.append(line)
        else:
            in_item = False
    if kept and _DATE_LINE.match(kept[-1]):
        kept.pop()
    return "\n".join(kept)


def _hint_values(spans: Iterable[_Span], base: dict[str, str] | None = None) -> dict[str, str]:
    values = dict(base or {})
    for span in spans:
        if span.name in _HINTS and span.content:
            values[span.name] = span.content
    return values


def _thread_sections(text: str) -> list[tuple[str, int, int]]:
    """Each ``<thread id="…">`` section as (id, start of its content, end of its content); an unclosed section
    ends where the next one opens."""
    found = []
    position = 0
    while opened := _THREAD_OPEN.search(text, position):
        close = text.find(_THREAD_CLOSE, opened.end())
        following = _THREAD_OPEN.search(text, opened.end())
        end = close if close >= 0 else len(text)
        if following and following.start() < end:
            end = following.start()
            position = end
        else:
            position = end + len(_THREAD_CLOSE) if close >= 0 else len(text)
        found.append((opened.group(1).strip(), opened.end(), end))
    return found


def _by_thread(spans: Sequence[_Span], text: str) -> tuple[list[_Span], dict[str, list[_Span]]]:
    """``spans`` of ``text`` split into those outside every thread section and those inside one, by thread id."""
    sections = _thread_sections(text)
    outside: list[_Span] = []
    inside: dict[str, list[_Span]] = {}
    for span in spans:
        owner = next((tid for tid, start, end in sections if start <= span.start < end), None)
        if owner is None:
            outside.append(span)
        else:
            inside.setdefault(owner, []).append(span)
    return outside, inside


def _per_thread(block: str, values: dict[str, dict[str, Any]],
                json_hints: dict[str, dict[str, str]]) -> dict[str, ParsedOutput]:
    sections: dict[str, list[str]] = {}
    hints: dict[str, dict[str, str]] = {}
    for thread_id, start, end in _thread_sections(block):
        spans, rest = _take(block[start:end], dict.fromkeys(_HINTS, True))
        hints[thread_id] = _hint_values(spans, hints.get(thread_id, json_hints.get(thread_id)))
        sections.setdefault(thread_id, []).append(_clean(rest, strip_threads=True))
    result = {}
    for thread_id, texts in sections.items():
        text = "\n".join(t for t in texts if t)
        found = hints[thread_id]
        result[thread_id] = ParsedOutput(observations=text, current_task=found.get("current-task"),
                                         suggested_response=found.get("suggested-response"),
                                         thread_title=found.get("thread-title"),
                                         extracted=values.get(thread_id, {}), empty=not text.strip())
    return result


# -- entry points ---------------------------------------------------------------------------------------------------

def _parse(text: str, extractors: Sequence[Extractor], *, reflector: bool, multi_thread: bool) -> ParsedOutput:
    if is_degenerate(text):
        return ParsedOutput(observations="", degenerate=True, empty=True)
    slugs = {e.slug for e in extractors if e.slug not in BUILT_IN_SLUGS}
    tags = {_VALUES_TAG: False, **dict.fromkeys(sorted(slugs), False)}
    if not multi_thread:
        tags.update({"current-task": True, "suggested-response": True, "thread-title": True})
    spans, body = _take(text, tags)
    thread_values: dict[str, dict[str, Any]] = {}
    thread_json_hints: dict[str, dict[str, str]] = {}
    errors: list[str] = []
    if multi_thread:
        spans, inside = _by_thread(spans, text)
        for thread_id, own in inside.items():
            thread_values[thread_id], thread_json_hints[thread_id], own_error = _extracted(own, slugs)
            errors += [own_error] if own_error else []
    extracted, json_hints, json_error = _extracted(spans, slugs)
    errors += [json_error] if json_error else []
    found_somewhere = set(extracted).union(*(v.keys() for v in thread_values.values()))
    failures = tuple((slug, errors[0]) for slug in sorted(slugs) if errors and slug not in found_somewhere)
    per_thread: dict[str, ParsedOutput] | None = None
    block, outside, unclosed = _blocks(body)
    if multi_thread:
        outside_spans, outside = _take(outside, dict.fromkeys(_HINTS, True))
        hints = _hint_values(outside_spans, json_hints)
        if block is None:
            block = outside if _THREAD_OPEN.search(outside) else _list_items(outside)
        per_thread = _per_thread(block, thread_values, thread_json_hints)
        if per_thread:
            observations = "\n".join(f'<thread id="{tid}">\n{part.observations}\n</thread>'
                                     for tid, part in per_thread.items())
        else:
            observations = _clean(block, strip_threads=True)
        empty = all(p.empty for p in per_thread.values()) if per_thread else not observations.strip()
    else:
        hints = _hint_values(spans, json_hints)
        if reflector and unclosed:
            # the reference reads a block never closed as no block: the answer's list items, so prose the model
            # wrote after its list is not stored as memory (without list items, what arrived is kept)
            block = _list_items(body, bodies=True) or block
        if block is None:
            block = _list_items(body)
            if reflector and not block.strip():
                block = body
        observations = _clean(_ANCHOR_ID.sub("", block) if reflector else block, strip_threads=not reflector)
        empty = not observations.strip()
    return ParsedOutput(observations=observations, current_task=hints.get("current-task"),
                        suggested_response=hints.get("suggested-response"), thread_title=hints.get("thread-title"),
                        extracted=extracted, extraction_failures=failures, per_thread=per_thread, empty=empty)


def parse_observer_output(text: str, *, extractors: Sequence[Extractor] = (),
                          multi_thread: bool = False) -> ParsedOutput:
    """The Observer's answer as values. ``per_thread`` is set (possibly empty) only in multi-thread mode."""
    return _parse(text, extractors, reflector=False, multi_thread=multi_thread)


def parse_reflector_output(text: str, *, extractors: Sequence[Extractor] = ()) -> ParsedOutput:
    """The Reflector's answer as values. ``<thread>`` sections are kept: in resource scope they are the log's."""
    return _parse(text, extractors, reflector=True, multi_thread=False)
