"""Token accounting for thresholds: what a message costs in the context an agent sends to its model.

Text is counted exactly by a tokenizer the caller provides (tiktoken, o200k_base by default, in ``adapters``).
Tool results are counted in full, even though the Observer later sees a truncated copy, so thresholds reflect what
the agent really sends. Images and files are estimated by deterministic per-provider heuristics. Every message
costs a fixed overhead (role and separators) and a non-empty conversation a fixed priming overhead.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from om_stream.core.messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from om_stream.core.model_spec import provider_of

__all__ = ["CONVERSATION_OVERHEAD", "MESSAGE_OVERHEAD", "TokenAccountant", "file_tokens", "image_tokens"]

MESSAGE_OVERHEAD = 4  # role name and the chat format's separators, per message
CONVERSATION_OVERHEAD = 3  # the assistant priming every chat request carries, per non-empty conversation
_KB = 1024
_GEMINI_VERSION = re.compile(r"^gemini-(\d+)")
# Gemini 3 bills an image a fixed amount set by its media resolution, not by its size (low 280, medium 560,
# high 1120, ultra high 2240). A message does not say which resolution the agent asks for: an image costs the
# amount of an unspecified one, which is high's
_GEMINI_3_IMAGE_TOKENS = 1120


def _base64_bytes(data: str | None) -> int | None:
    if not data:
        return None
    payload = data.split(",", 1)[1] if data.startswith("data:") else data
    return len(payload) * 3 // 4


def image_tokens(part: ImagePart, provider: str, model: str = "") -> int:
    """Deterministic estimate of an image's input tokens for the provider that will read it."""
    size = part.size_bytes if part.size_bytes is not None else _base64_bytes(part.data)
    width, height = part.width, part.height
    if provider == "anthropic":
        if width and height:
            scale = min(1.0, 1568 / max(width, height))
            return math.ceil((width * scale) * (height * scale) / 750)
        if size is not None:
            return 341 if size <= 256 * _KB else 1366 if size <= _KB * _KB else 2048 if size <= 3 * _KB * _KB else 2731
        return 1600
    if provider in ("google", "gemini", "vertex_ai"):
        if _gemini_generation(model) >= 3:
            return _GEMINI_3_IMAGE_TOKENS
        if width and height:
            return 258 * math.ceil(width / 768) * math.ceil(height / 768)
        return 258
    # OpenAI and unknown providers: a base cost plus tiles of 512 px at high detail
    base, tile, fallback_tiles = _openai_image_rates(model.lower())
    detail = part.detail or "auto"
    if detail == "low":
        return base
    if width and height:
        if detail == "auto" and max(width, height) <= 768:
            return base + tile  # small images fit one tile
        scale = min(1.0, 2048 / max(width, height))
        w, h = width * scale, height * scale
        shortest = min(w, h)
        if shortest > 768:
            w, h = w * 768 / shortest, h * 768 / shortest
        return base + tile * math.ceil(w / 512) * math.ceil(h / 512)
    if size is not None:
        tiles = 1 if size <= 512 * _KB else 4 if size <= 2 * _KB * _KB else 6 if size <= 4 * _KB * _KB else 8
        return base + tile * tiles
    return base + tile * fallback_tiles


def _gemini_generation(model: str) -> int:
    """The major version of a Gemini model name (``google/gemini-3-pro-preview`` -> 3); 0 when it has none."""
    match = _GEMINI_VERSION.search(model.rsplit("/", 1)[-1].lower())
    return int(match.group(1)) if match else 0


def _openai_image_rates(model: str) -> tuple[int, int, int]:
    """(base tokens, tokens per 512-px tile, tiles assumed without size information) of OpenAI's vision models."""
    name = model.rsplit("/", 1)[-1]
    if "gpt-4o-mini" in name:
        return 2833, 5667, 1
    if "computer-use" in name:
        return 65, 129, 4
    if name.startswith(("o1", "o3")):
        return 75, 150, 4
    if "gpt-5" in name:
        return 70, 140, 4
    return 85, 170, 4


def file_tokens(part: FilePart, provider: str, count_text: Callable[[str], int], model: str = "") -> int:
    """Images sent as files count as images; PDFs and other files by size; unknown sizes by their descriptor."""
    if part.mime_type.lower().startswith("image/"):
        as_image = ImagePart(url=part.url, data=part.data, mime_type=part.mime_type, filename=part.filename,
                             size_bytes=part.size_bytes)
        return image_tokens(as_image, provider, model)
    size = part.size_bytes if part.size_bytes is not None else _base64_bytes(part.data)
    if size is None:
        return count_text(json.dumps({"type": "file", "mimeType": part.mime_type, "filename": part.filename}))
    if part.mime_type.lower() == "application/pdf":
        if provider in ("google", "gemini", "vertex_ai"):
            return max(258, size // 20)
        if provider == "anthropic":
            return max(1500, size // 3)
        return max(500, size // 4)
    return max(1, size // 4)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class TokenAccountant:
    """Counts messages with an exact text tokenizer. Pure apart from the tokenizer's own (deterministic) cache."""

    def __init__(self, count_text: Callable[[str], int], *, message_overhead: int = MESSAGE_OVERHEAD,
                 conversation_overhead: int = CONVERSATION_OVERHEAD) -> None:
        self.count_text = count_text
        self.message_overhead = message_overhead
        self.conversation_overhead = conversation_overhead

    def part_tokens(self, part: Part, model: str = "") -> int:
        provider = provider_of(model)
        if isinstance(part, ReasoningPart):
            return 0  # reasoning is not sent back to the model with the conversation (the seeds ignore it)
        if isinstance(part, TextPart):
            return self.count_text(part.text)
        if isinstance(part, ToolCallPart):
            return self.count_text(part.tool_name) + self.count_text(_json(part.args)) + 3
        if isinstance(part, ToolResultPart):
            return self.count_text(part.tool_name) + self.count_text(_json(part.result)) + 3
        if isinstance(part, ImagePart):
            return image_tokens(part, provider, model)
        return file_tokens(part, provider, self.count_text, model)

    def message_tokens(self, message: Message, model: str = "") -> int:
        """What the message adds to a conversation (overhead included). ``model`` is the actor's model."""
        return self.message_overhead + sum(self.part_tokens(p, model or message.model or "") for p in message.parts)

    def conversation_tokens(self, message_tokens: Sequence[int]) -> int:
        return (self.conversation_overhead + sum(message_tokens)) if message_tokens else 0
