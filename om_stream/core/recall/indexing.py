"""What goes into the recall index: the searchable text of a message, and texts cut to an embedder's window.

An embedder reads a bounded number of tokens (all-MiniLM-L6-v2: 256) and silently drops the rest, so long texts are
cut into chunks at line (then word) boundaries, each indexed as its own point.
"""

from __future__ import annotations

from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.recall.render import TokenCount, part_text, truncate_tokens

__all__ = ["EMBED_CHUNK_TOKENS", "MAX_CHUNKS", "embedding_chunks", "message_search_text"]

EMBED_CHUNK_TOKENS = 200
MAX_CHUNKS = 8  # a 50-page tool result is not worth 400 vectors: its start is what a search can use


def message_search_text(message: Message) -> str:
    """Text, tool calls and tool results of a message (reasoning and attachments are not searchable)."""
    return "\n".join(part_text(p) for p in message.parts if isinstance(p, TextPart | ToolCallPart | ToolResultPart)
                     and part_text(p).strip())


def embedding_chunks(text: str, count: TokenCount, max_tokens: int = EMBED_CHUNK_TOKENS,
                     max_chunks: int = MAX_CHUNKS) -> list[str]:
    """``text`` as pieces of at most ``max_tokens`` tokens, cut between lines where possible, in order."""
    chunks: list[str] = []
    current: list[str] = []
    current_tokens = 0
    for raw in text.splitlines():
        if not raw.strip():
            continue
        line = raw
        tokens = count(line)
        while tokens > max_tokens:  # a line too long for one chunk: cut it into pieces of its own
            if current:
                chunks.append("\n".join(current))
                current, current_tokens = [], 0
            piece = truncate_tokens(line, max_tokens, count)
            cut = piece.rfind(" ") if " " in piece[len(piece) // 2:] else len(piece)
            piece = (piece[:cut] if cut > 0 else piece) or line[:1]
            chunks.append(piece)
            line = line[len(piece):].lstrip()
            tokens = count(line)
            if len(chunks) >= max_chunks:
                return chunks[:max_chunks]
        if current and current_tokens + tokens + 1 > max_tokens:
            chunks.append("\n".join(current))
            current, current_tokens = [], 0
        if line:
            current.append(line)
            current_tokens += tokens + 1
        if len(chunks) >= max_chunks:
            return chunks[:max_chunks]
    if current:
        chunks.append("\n".join(current))
    return chunks[:max_chunks]
