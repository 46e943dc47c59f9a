"""``om.context/v1``: what an agent sends to its model next (the context topic, compacted, key = thread id).

An agent waits until ``through_message_id`` is its own latest message (read-your-writes), then sends
``system_blocks`` (each its own system message, for prompt caching), the continuation reminder and ``messages``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from om_stream.core.messages import Message

__all__ = ["CONTEXT_SCHEMA", "ContextHints", "ContextRecord", "ContextTokens"]

CONTEXT_SCHEMA: Literal["om.context/v1"] = "om.context/v1"
_NOT_IN_A_CHAT_NAME = re.compile(r"[^A-Za-z0-9_-]+")  # OpenAI's `name` takes ^[a-zA-Z0-9_-]{1,64}$


def _chat_name(message: Message) -> str | None:
    """The participant name OpenAI's chat format gives a user or assistant message (``name``), for a message with
    an author: the name the transcript shows, in the characters the API accepts; else its id likewise."""
    if message.author is None or message.role not in ("user", "assistant"):
        return None
    for text in (message.author.label, message.author.id):
        name = _NOT_IN_A_CHAT_NAME.sub("_", text).strip("_")[:64]
        if name:
            return name
    return None


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)


class ContextHints(_Closed):
    current_task: str | None = None
    suggested_response: str | None = None


class ContextTokens(_Closed):
    messages: int = Field(ge=0)
    observations: int = Field(ge=0)


class ContextRecord(_Closed):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.context/v1")

    schema_: Literal["om.context/v1"] = Field(CONTEXT_SCHEMA, alias="schema")
    thread_id: str
    resource_id: str
    version: int = Field(ge=0)
    through_message_id: str | None
    observations: str
    hints: ContextHints
    messages: list[Message]
    system_blocks: list[str]
    continuation: str | None = None
    tokens: ContextTokens
    generation: int = Field(ge=0)
    thread_title: str | None = None

    def to_chat_messages(self) -> list[dict[str, Any]]:
        """OpenAI-style chat messages: system blocks, the continuation reminder, then the raw messages as text (a
        user or assistant message with an author carries its participant ``name``).

        Agents with richer message formats (tool calls, images) should map ``messages`` themselves.
        """
        out: list[dict[str, Any]] = [{"role": "system", "content": block} for block in self.system_blocks]
        if self.continuation:
            out.append({"role": "user", "content": self.continuation})
        for message in self.messages:
            role: Literal["system", "user", "assistant", "tool"] = message.role
            entry: dict[str, Any] = {"role": role, "content": message.text}
            name = _chat_name(message)
            if name is not None:  # several people or agents share the thread: the model is told who said what
                entry["name"] = name
            out.append(entry)
        return out
