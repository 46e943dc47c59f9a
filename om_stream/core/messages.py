"""Chat messages as OM sees them: a role, a time, typed parts (text, image, file, tool call/result, reasoning) and,
in a thread several people or agents write to, who wrote each one (its ``author``).

These are the message fields of the wire contract (``om.message/v1``) without the envelope; ``wire`` wraps them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict

__all__ = [
    "MAX_SAFE_INTEGER",
    "Author",
    "AuthorKind",
    "FilePart",
    "ImagePart",
    "Message",
    "Part",
    "PromptCacheRetention",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "author_mark",
    "author_query_keys",
    "iso",
    "to_ms",
]

Role = Literal["user", "assistant", "system", "tool"]
AuthorKind = Literal["human", "agent", "tool"]
PromptCacheRetention = Literal["in_memory", "24h"]  # OpenAI's names
MAX_SAFE_INTEGER = 2**53 - 1  # I-JSON: the largest integer every client (JavaScript too) represents exactly


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_Part):
    type: Literal["reasoning"] = "reasoning"
    text: str


class ImagePart(_Part):
    """An image by URL or inline base64 ``data``. Width/height/size help the token estimate when known."""

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    mime_type: str = "image/png"
    filename: str | None = None
    width: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    height: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    size_bytes: int | None = Field(None, ge=0, le=MAX_SAFE_INTEGER)
    detail: Literal["low", "high", "auto"] | None = None


class FilePart(_Part):
    type: Literal["file"] = "file"
    url: str | None = None
    data: str | None = None
    mime_type: str = "application/octet-stream"
    filename: str | None = None
    size_bytes: int | None = Field(None, ge=0, le=MAX_SAFE_INTEGER)


class ToolCallPart(_Part):
    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str = Field(min_length=1)
    tool_name: str = Field(min_length=1)
    args: Any = None


class ToolResultPart(_Part):
    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str = Field(min_length=1)
    tool_name: str = Field(min_length=1)
    result: Any = None
    is_error: bool = False


Part = Annotated[TextPart | ImagePart | FilePart | ToolCallPart | ToolResultPart | ReasoningPart,
                 Field(discriminator="type")]


# Line breaks and other control characters (C0, DEL, C1, the Unicode line and paragraph separators). The schema's
# pattern holds the characters themselves, not escapes, so every client's regular expressions read it alike (Go's
# RE2 knows no backslash-u escape).
_CONTROL_CHARS = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_CONTROL = re.compile(f"[{_CONTROL_CHARS}]")
_PRINTABLE: JsonDict = {"pattern": f"^[^{_CONTROL_CHARS}]*$"}


class Author(BaseModel):
    """Who wrote a message in a shared thread: a person of a support channel, a sub-agent of a supervisor.

    ``id`` is stable (the recall tool filters by it); ``name`` is what the Observer's transcript shows, the id
    when there is none. Neither may hold a line break or another control character: the transcript prints the
    name in a message's header line, and a name with a line break could write lines of its own there.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=256, json_schema_extra=_PRINTABLE,
                    description="The author's stable id (a user id, an agent's name); the recall tool filters by it")
    name: str | None = Field(None, min_length=1, max_length=128, json_schema_extra=_PRINTABLE,
                             description="The name the Observer's transcript and observations use; the id when "
                                         "absent")
    kind: AuthorKind = Field(description="human, agent or tool")

    @field_validator("id", "name")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        # the schema's pattern says the same; this says it in words
        if value is not None and _CONTROL.search(value):
            raise ValueError("must not contain line breaks or other control characters")
        return value

    @property
    def label(self) -> str:
        """How the transcript and the offline Observer name the author."""
        return (self.name or "").strip() or self.id

    @property
    def keys(self) -> tuple[str, str]:
        """What a search for an author matches (``author_query_keys``): its id as it is, and the name shown for it
        in any case. The recall index keeps them with each message's vectors, so it filters by author itself."""
        return f"id:{self.id}", f"name:{self.label.casefold()}"


def author_query_keys(who: str) -> tuple[str, str]:
    """The keys an author of ``who`` (an id, or the name shown for one) holds in ``Author.keys``."""
    wanted = who.strip()
    return f"id:{wanted}", f"name:{wanted.casefold()}"


def to_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@lru_cache(maxsize=256)
def iso(ms: int) -> str:
    """ISO-8601 UTC with milliseconds, as every timestamp in events. Memoised: the events of one decision share
    its time."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    message_id: str = Field(min_length=1, max_length=256)
    thread_id: str = Field(min_length=1, max_length=256)
    resource_id: str = Field(min_length=1, max_length=256)
    role: Role
    created_at: datetime
    parts: tuple[Part, ...]
    model: str | None = None
    prompt_cache_retention: PromptCacheRetention | None = Field(
        None, description="The prompt-cache retention the actor asked of OpenAI on the call of `model` "
                          "(`prompt_cache_retention`; the AI SDK's `providerOptions.openai.promptCacheRetention`). "
                          "With `activateAfterIdle: 'auto'` and an OpenAI actor it sets the idle time: '24h' -> "
                          "1 h, 'in_memory' -> 5 min. Absent: the model's default.")
    metadata: dict[str, Any] | None = None
    author: Author | None = Field(None, description="Who wrote the message, in a thread several people or agents "
                                                    "write to. Absent: the thread's user (role user) or its "
                                                    "assistant, as before.")

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    @cached_property
    def created_at_ms(self) -> int:
        return to_ms(self.created_at)

    @cached_property
    def compact_json(self) -> str:
        """Compact JSON (aliases, nulls left out), computed once: a message is written into many contexts."""
        return self.model_dump_json(by_alias=True, exclude_none=True)

    @property
    def text(self) -> str:
        """The plain text of the message (text parts joined), for rendering and offline observation."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    def written_by(self, who: str) -> bool:
        """The message's author is ``who``: its id exactly, or the name the transcript shows for it (its name, else
        its id) in any case: a model that read "Ana stated ..." in its observations asks for "Ana"."""
        return self.author is not None and not set(self.author.keys).isdisjoint(author_query_keys(who))

    def tool_call_ids(self) -> list[str]:
        return [p.tool_call_id for p in self.parts if isinstance(p, ToolCallPart)]

    def tool_result_ids(self) -> list[str]:
        return [p.tool_call_id for p in self.parts if isinstance(p, ToolResultPart)]


_ROLE_KIND = {"user": "human", "assistant": "agent", "tool": "tool"}  # the author a role implies


def author_mark(message: Message) -> str:
    """`` [Ana]`` (with a leading space) for a message with an author, ``""`` without one: how the Observer's
    transcript and the recall tool name who wrote a message, after its role. The author's kind is added when the
    role does not imply it (`` [planner, agent]`` on a user message). Brackets in a name are shown as parentheses,
    so the mark always ends where its name does. A system message (a temporal reminder) names nobody."""
    author = message.author
    if author is None or message.role == "system":
        return ""
    label = author.label.replace("[", "(").replace("]", ")")
    kind = "" if _ROLE_KIND.get(message.role) == author.kind else f", {author.kind}"
    return f" [{label}{kind}]"
