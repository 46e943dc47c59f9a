"""The shape of a prompt: chat messages and the attachments forwarded with them (re-exported by ``ports``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Attachment", "ChatMessage"]


@dataclass(frozen=True)
class Attachment:
    """An image or file forwarded to the model next to its ``[Image #n: name]`` placeholder."""

    kind: Literal["image", "file"]
    mime_type: str
    url: str | None = None
    data: str | None = None  # base64
    filename: str | None = None


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str
    attachments: tuple[Attachment, ...] = ()
