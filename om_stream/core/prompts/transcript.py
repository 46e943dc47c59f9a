"""The message history as the Observer reads it: a plain-text transcript plus the attachments to forward.

* Lines are chronological; a date line (``Jun 6, 2026 (Saturday):``) opens every new day, and each message reads
  ``Role (HH:MM): text``, the time shown only when it differs from the previous message's.
* A message with an author (a shared thread) names it in square brackets after the role: ``User [Ana] (09:14):``,
  ``Assistant [billing-agent]:``; the author's kind is added when the role does not imply it (``User [planner,
  agent]``: an agent writing in the user's role). The role stays first, as in a thread without authors, so the
  Observer's rules about "the user" and "the assistant" still read the line the same way, and the parentheses
  keep holding only the time the Observer copies into its lines. A message without an author reads as it always
  did: a thread without authors renders byte for byte as before.
* A tool call is shown once per call id (``Tool call <name>: <outline of the arguments>``), its result once
  (``Tool result <name>: …``, pretty JSON cut to 5,000 tokens with a note saying how much was cut).
* Images and files become ``[Image #n: label]`` / ``[File #n: label]`` placeholders; the binary itself is
  returned as an :class:`~om_stream.ports.Attachment` when ``observeAttachments`` allows its mime type.
* System messages (temporal gap reminders) are plain lines.
* ``max_part_chars`` cuts each part to that many characters (the other conversations an agent sees in resource
  scope: a glimpse of each part, not the part).

Token counts come from the ``count_text`` argument; nothing here knows a tokenizer.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from om_stream.core.messages import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    author_mark,
)
from om_stream.core.prompts.chat import Attachment
from om_stream.core.prompts.tasks import ThreadBatch

__all__ = [
    "ARGS_TOKEN_LIMIT",
    "RESULT_TOKEN_LIMIT",
    "AttachmentPolicy",
    "Transcript",
    "attachment_allowed",
    "outline_args",
    "render_messages",
    "render_threads",
    "truncate_to_tokens",
]

CountText = Callable[[str], int]
AttachmentPolicy = bool | Literal["auto"] | Sequence[str]

RESULT_TOKEN_LIMIT = 5_000
ARGS_TOKEN_LIMIT = 2_000
_PREVIEW_CHARS = 160
_MAX_DEPTH = 5
_MAX_ENTRIES = 20
_MAX_NODES = 100
_ROLE_LABEL = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}
_REMINDER_TAG = re.compile(r"</?system-reminder>")
_MEDIA_TYPES = {"image", "file", "media", "image_url", "input_image", "document"}


@dataclass(frozen=True)
class Transcript:
    text: str
    attachments: tuple[Attachment, ...] = ()


# -- cutting text to a token budget ---------------------------------------------------------------------------------

def _safe_cut(text: str, length: int) -> str:
    """``text[:length]`` without leaving half of a UTF-16 surrogate pair (possible in JSON-decoded strings)."""
    if 0 < length < len(text) and "\ud800" <= text[length - 1] <= "\udbff":
        length -= 1
    return text[:length]


def truncate_to_tokens(text: str, limit: int, count_text: CountText) -> str:
    """``text`` whole if it fits ``limit`` tokens, else its longest fitting prefix and ``[… N tokens truncated]``.

    Binary search on the prefix length, counting with ``count_text``; the search range starts small and doubles
    so a huge text is not counted whole over and over.
    """
    total = count_text(text)
    if total <= limit:
        return text
    high = min(len(text), max(64, limit * 8))
    while high < len(text) and count_text(_safe_cut(text, high)) <= limit:
        high = min(len(text), high * 2)
    low = 0  # invariant: the prefix of length ``low`` fits
    while low < high:
        middle = (low + high + 1) // 2
        if count_text(_safe_cut(text, middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    kept = _safe_cut(text, low)
    return f"{kept}\n[… {total - count_text(kept)} tokens truncated]"


# -- tool arguments and results -------------------------------------------------------------------------------------

def _preview(text: str) -> str:
    if len(text) <= _PREVIEW_CHARS:
        return text
    return f"{_safe_cut(text, _PREVIEW_CHARS)}… ({len(text)} chars)"


def _decoded(value: Any) -> Any:
    """Arguments or results that arrive as a JSON string are read as the JSON they contain."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _outline_tree(value: Any) -> Any:
    """A pruned copy of ``value``, visited breadth-first so shallow entries survive when the budget runs out."""
    holder: list[Any] = [None]
    queue: deque[tuple[Any, Any, Any, int]] = deque([(value, holder, 0, 0)])
    nodes = 0
    while queue:
        item, parent, key, depth = queue.popleft()
        if isinstance(item, dict | list | tuple):
            size = len(item)
            if depth >= _MAX_DEPTH or nodes >= _MAX_NODES:
                noun = ("key" if size == 1 else "keys") if isinstance(item, dict) else \
                    ("item" if size == 1 else "items")
                parent[key] = f"{{… {size} {noun}}}" if isinstance(item, dict) else f"[… {size} {noun}]"
                continue
            entries = list(item.items()) if isinstance(item, dict) else list(enumerate(item))
            shown = entries[:min(_MAX_ENTRIES, _MAX_NODES - nodes)]
            nodes += len(shown)
            if isinstance(item, dict):
                out_dict: dict[str, Any] = {str(k): None for k, _ in shown}
                if size > len(shown):
                    out_dict["…"] = f"{size - len(shown)} more keys"
                parent[key] = out_dict
                queue.extend((v, out_dict, str(k), depth + 1) for k, v in shown)
            else:
                out_list: list[Any] = [None] * len(shown)
                if size > len(shown):
                    out_list.append(f"… {size - len(shown)} more items")
                parent[key] = out_list
                queue.extend((v, out_list, i, depth + 1) for i, (_, v) in enumerate(shown))
        elif isinstance(item, str):
            parent[key] = _preview(item)
        elif item is None or isinstance(item, bool | int | float):
            parent[key] = item
        else:
            parent[key] = _preview(str(item))
    return holder[0]


def outline_args(args: Any, count_text: CountText, *, limit: int = ARGS_TOKEN_LIMIT) -> str:
    """A compact outline of tool-call arguments: long strings previewed with their size, depth ≤ 5, ≤ 20 entries
    per container, ≤ 100 entries in all, and at most ``limit`` tokens."""
    value = _decoded(args)
    if value is None:
        return "(no arguments)"
    if isinstance(value, str):
        return truncate_to_tokens(_preview(value), limit, count_text)
    text = json.dumps(_outline_tree(value), ensure_ascii=False, default=str)
    return truncate_to_tokens(text, limit, count_text)


def _result_text(result: Any, count_text: CountText) -> str:
    """One line of JSON: indentation would cost the Observer tokens and say nothing the structure does not."""
    value = _decoded(result)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "),
                                                           default=str)
    return truncate_to_tokens(text, RESULT_TOKEN_LIMIT, count_text)


def _may_hold_media(result: Any) -> bool:
    """A cheap test before parsing a JSON string result: media blocks always carry a ``"type"`` key."""
    return not isinstance(result, str) or '"type"' in result


# -- attachments ----------------------------------------------------------------------------------------------------

def attachment_allowed(mime_type: str, policy: AttachmentPolicy) -> bool:
    """``observeAttachments``: ``True``/``'auto'`` forward everything (the gateway knows model capabilities and
    may still drop them), ``False`` nothing, a list is a case-insensitive mime allowlist (``image/*``, ``*``)."""
    if isinstance(policy, bool):
        return policy
    if policy == "auto":
        return True
    mime = mime_type.strip().lower()
    for raw in policy:
        pattern = raw.strip().lower()
        if pattern in ("*", "*/*", mime):
            return True
        if pattern.endswith("/*") and mime.startswith(pattern[:-1]):
            return True
    return False


def _url_basename(url: str) -> str:
    path = re.split(r"[?#]", url, maxsplit=1)[0]
    path = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*", "", path)
    name = path.rstrip("/").rsplit("/", 1)[-1]
    raw = re.sub(rb"%([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), name.encode())
    return raw.decode(errors="replace")


def _label(filename: str | None, url: str | None, mime_type: str) -> str:
    if filename:
        return filename
    if url and not url.startswith("data:"):
        name = _url_basename(url)
        if name:
            return name
    return mime_type


@dataclass(frozen=True)
class _Media:
    kind: Literal["image", "file"]
    mime_type: str
    url: str | None
    data: str | None
    filename: str | None


def _media_block(value: dict[str, Any]) -> _Media | None:
    """A media block inside a tool result (MCP, AI SDK or OpenAI shapes), or None."""
    if value.get("type") not in _MEDIA_TYPES:
        return None
    url = value.get("url")
    image_url = value.get("image_url")
    if isinstance(image_url, dict):
        image_url = image_url.get("url")
    url = url if isinstance(url, str) else image_url if isinstance(image_url, str) else None
    data = value.get("data")
    data = data if isinstance(data, str) else None
    if url is None and data is None:
        return None
    mime = next((v for k in ("mimeType", "mime_type", "mediaType", "media_type")
                 if isinstance(v := value.get(k), str)), None)
    if mime is None:
        mime = "image/png" if value.get("type") in ("image", "image_url", "input_image") else \
            "application/octet-stream"
    kind: Literal["image", "file"] = "image" if mime.lower().startswith("image/") else "file"
    filename = next((v for k in ("filename", "name") if isinstance(v := value.get(k), str)), None)
    return _Media(kind, mime, url, data, filename)


# -- rendering ------------------------------------------------------------------------------------------------------

def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


@dataclass
class _Renderer:
    count_text: CountText
    policy: AttachmentPolicy
    zone: tzinfo
    max_part_chars: int | None = None
    attachments: list[Attachment] = field(default_factory=list)
    images: int = 0
    files: int = 0
    calls_seen: set[str] = field(default_factory=set)
    results_seen: set[str] = field(default_factory=set)

    def placeholder(self, media: _Media) -> str:
        label = _label(media.filename, media.url, media.mime_type)
        if media.kind == "image":
            self.images += 1
            text = f"[Image #{self.images}: {label}]"
        else:
            self.files += 1
            text = f"[File #{self.files}: {label}]"
        if (media.url or media.data) and attachment_allowed(media.mime_type, self.policy):
            self.attachments.append(Attachment(kind=media.kind, mime_type=media.mime_type, url=media.url,
                                               data=media.data, filename=media.filename))
        return text

    def strip_media(self, value: Any, depth: int = 0) -> Any:
        """The tool result with each media block replaced by its placeholder (the block itself is forwarded)."""
        if depth > _MAX_DEPTH:
            return value
        if isinstance(value, dict):
            block = _media_block(value)
            if block is not None:
                return self.placeholder(block)
            return {k: self.strip_media(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.strip_media(v, depth + 1) for v in value]
        return value

    def part_lines(self, message: Message) -> list[str]:
        lines: list[str] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text.strip():
                    lines.append(part.text)
            elif isinstance(part, ReasoningPart):
                if part.text.strip():
                    lines.append(f"Reasoning: {part.text}")
            elif isinstance(part, ImagePart | FilePart):
                kind: Literal["image", "file"] = "image" if isinstance(part, ImagePart) else "file"
                lines.append(self.placeholder(_Media(kind, part.mime_type, part.url, part.data, part.filename)))
            elif isinstance(part, ToolCallPart):
                if part.tool_call_id not in self.calls_seen:
                    self.calls_seen.add(part.tool_call_id)
                    lines.append(f"Tool call {part.tool_name}: {outline_args(part.args, self.count_text)}")
            elif isinstance(part, ToolResultPart) and part.tool_call_id not in self.results_seen:
                self.results_seen.add(part.tool_call_id)
                label = "Tool error" if part.is_error else "Tool result"
                result = self.strip_media(_decoded(part.result)) if _may_hold_media(part.result) else part.result
                lines.append(f"{label} {part.tool_name}: {_result_text(result, self.count_text)}")
        limit = self.max_part_chars
        if limit is not None:
            lines = [line if len(line) <= limit else f"{_safe_cut(line, limit)}… [cut]" for line in lines]
        return lines

    def render(self, messages: Sequence[Message]) -> str:
        out: list[str] = []
        last_day: date | None = None
        last_time: str | None = None
        for message in sorted(messages, key=lambda m: m.created_at_ms):
            moment: datetime = message.created_at.astimezone(self.zone)
            lines = self.part_lines(message)
            if not lines:
                continue
            if moment.date() != last_day:
                last_day = moment.date()
                last_time = None
                if out:
                    out.append("")
                out.append(f"{moment:%b} {moment.day}, {moment.year} ({moment:%A}):")
            if message.role == "system":
                out.extend(_REMINDER_TAG.sub("", line).strip() for line in lines)
                continue
            clock = f"{moment:%H:%M}"
            role = _ROLE_LABEL[message.role] + author_mark(message)
            if clock != last_time:
                out.append(f"{role} ({clock}): {lines[0]}")
            elif message.role == "tool" and message.author is None:  # its lines already say "Tool result …"
                out.append(lines[0])
            else:
                out.append(f"{role}: {lines[0]}")
            last_time = clock
            out.extend(lines[1:])
        return "\n".join(out)


def render_messages(messages: Sequence[Message], count_text: CountText, *, attachments_policy: AttachmentPolicy = True,
                    timezone: str = "UTC", max_part_chars: int | None = None) -> Transcript:
    """One conversation as the Observer reads it, with the attachments to send alongside."""
    renderer = _Renderer(count_text, attachments_policy, _zone(timezone), max_part_chars)
    text = renderer.render(messages)
    return Transcript(text, tuple(renderer.attachments))


def render_threads(threads: Sequence[ThreadBatch], count_text: CountText, *,
                   attachments_policy: AttachmentPolicy = True, timezone: str = "UTC") -> Transcript:
    """Several conversations (resource scope), each in a ``<thread id="…">`` block; placeholders are numbered
    across the whole rendering so each one names exactly one forwarded attachment."""
    renderer = _Renderer(count_text, attachments_policy, _zone(timezone))
    blocks = []
    for batch in threads:
        renderer.calls_seen.clear()
        renderer.results_seen.clear()
        blocks.append(f'<thread id="{batch.thread_id}">\n{renderer.render(batch.messages)}\n</thread>')
    return Transcript("\n\n".join(blocks), tuple(renderer.attachments))
