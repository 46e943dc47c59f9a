"""``om.context/v2`` (contexts by reference): the cursor on the context topic, the block index on
``om.context.index`` and the blocks on ``om.context.blocks`` (all compacted), and the digest that names a block.

A v2 context does not copy what its reader already has. The cursor (a few hundred bytes, one per context) names
the raw messages as a run of the thread's messages and carries in full only the messages that entered the run
since the previous cursor; the system blocks are named by digest in the thread's index, which is published only
when the list changes, and each block's text is published once, when a list first holds it. How a reader rebuilds
the ``om.context/v1`` record from them is ``wire.context_refs``; the design is docs/context-wire-v2.md.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from om_stream.core.messages import Message
from om_stream.wire.context import ContextHints, ContextTokens

__all__ = ["BLOCK_SCHEMA", "CURSOR_SCHEMA", "DIGEST_PATTERN", "INDEX_SCHEMA", "BlockRecord", "ContextCursor",
           "ContextIndex", "MessageRun", "ThreadMessages", "block_digest", "block_key", "block_update",
           "index_update", "split_block_key"]

CURSOR_SCHEMA: Literal["om.context/v2"] = "om.context/v2"
INDEX_SCHEMA: Literal["om.context-index/v1"] = "om.context-index/v1"
BLOCK_SCHEMA: Literal["om.context-block/v1"] = "om.context-block/v1"
DIGEST_PATTERN = r"^[A-Za-z0-9_-]{22}$"  # 16 bytes in unpadded base64url


def block_digest(text: str) -> str:
    """The name of a system block: the first 16 bytes of SHA-256 of its UTF-8 text, base64url without padding
    (22 characters). Identical texts share a name, so an unchanged block is never published again."""
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()[:16]).rstrip(b"=").decode()


def block_key(thread_id: str, digest: str) -> str:
    """The key of a block on ``om.context.blocks``: ``<thread id>/<digest>`` (per thread, so that an erase of the
    thread tombstones its own copy and no other thread's)."""
    return f"{thread_id}/{digest}"


def split_block_key(key: str) -> tuple[str, str]:
    """(thread id, digest) of a block key; the digest has a fixed length, so a thread id holding ``/`` is fine."""
    return key[:-23], key[-22:]


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)


class MessageRun(_Closed):
    """The raw messages of a context: ``pinned_message_id`` first when set (the open turn's question, observed
    but still raw), then the thread's messages from ``first_message_id`` through ``through_message_id`` in the
    order they reached the memory, less those created before ``expire_before`` (the retention cutoff: a message
    stamped out of order can expire inside the run) and the ``excluded`` ids; ``count`` of them. No raw message:
    the ids null and the count 0."""

    first_message_id: str | None = None
    through_message_id: str | None = None
    count: int = Field(0, ge=0)
    pinned_message_id: str | None = None
    expire_before: int | None = Field(None, description="epoch milliseconds: run messages created before it are "
                                                        "not in the context")
    excluded: list[str] = Field(default_factory=list)


class ContextCursor(_Closed):
    """One context by reference. A reader waits until it holds the index of version ``index_version`` and every
    block it names, and the run of ``raw`` (its messages, the previous cursors' ``new_messages``, or
    ``GET /v1/threads/{id}/messages?from=&through=``), then rebuilds the ``om.context/v1`` record."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.context/v2")

    schema_: Literal["om.context/v2"] = Field(CURSOR_SCHEMA, alias="schema")
    thread_id: str
    resource_id: str
    version: int = Field(ge=0)
    generation: int = Field(ge=0)
    thread_title: str | None = None
    through_message_id: str | None
    index_version: int = Field(ge=0)
    raw: MessageRun
    new_messages: list[Message] = Field(default_factory=list, description="the messages that entered the run (or "
                                        "the pin) since the previous cursor, in run order; when they do not all "
                                        "follow the messages sent before, the whole pin and run")
    hints: ContextHints
    tokens: ContextTokens
    continuation: str | None = None


class ContextIndex(_Closed):
    """The thread's system blocks, in order, by digest. ``version``: the context version at which the list last
    changed (never lower than the previous index's plus one), which the cursors name."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.context-index/v1")

    schema_: Literal["om.context-index/v1"] = Field(INDEX_SCHEMA, alias="schema")
    thread_id: str
    version: int = Field(ge=0)
    blocks: list[Annotated[str, Field(pattern=DIGEST_PATTERN)]]


class BlockRecord(_Closed):
    """One system block's text, keyed ``<thread id>/<digest>``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.context-block/v1")

    schema_: Literal["om.context-block/v1"] = Field(BLOCK_SCHEMA, alias="schema")
    thread_id: str
    digest: str = Field(pattern=DIGEST_PATTERN)
    text: str


class ThreadMessages(_Closed):
    """``GET /v1/threads/{id}/messages?from=&through=``: the thread's messages from ``from`` through ``through``,
    in the order they reached the memory (a cursor's run, for a reader that does not hold it; the reader then
    applies the cursor's ``expire_before`` and ``excluded`` as to any run it holds)."""

    thread_id: str
    messages: list[Message]


def index_update(key: bytes | None, value: bytes | None) -> tuple[str, ContextIndex | None] | None:
    """What a record of ``om.context.index`` tells a reader: its thread and that thread's index (None: a tombstone,
    the index is gone); None for a record of no thread (a segment roll's marker, whose key is not UTF-8). Raises
    ``ValidationError`` for a value that is not an index."""
    if key is None or key.startswith(b"\xff"):
        return None
    return key.decode("utf-8", "replace"), ContextIndex.model_validate_json(value) if value is not None else None


def block_update(key: bytes | None, value: bytes | None) -> tuple[str, str, str | None] | None:
    """What a record of ``om.context.blocks`` tells a reader: its thread, the block's digest and its text (None: a
    tombstone, the block is gone); None for a record that is not a block's (a segment roll's marker, a short key).
    Raises ``ValidationError`` for a value that is not a block."""
    if key is None or key.startswith(b"\xff") or len(key) < 24:
        return None
    thread_id, digest = split_block_key(key.decode("utf-8", "replace"))
    return thread_id, digest, BlockRecord.model_validate_json(value).text if value is not None else None
