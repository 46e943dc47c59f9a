"""From an ``om.context/v1`` record to its ``om.context/v2`` records, and back: the worker's side and the clients'
algorithm, both pure.

* :func:`by_reference`: one rendered v1 context, what its thread's previous publication left readers holding
  (:class:`Sent`), and the spec's account of the raw messages, give the records to publish in their order (new
  blocks, the index if the list changed, the cursor, then the digests no longer listed, to tombstone). It is the
  definition, which the tests hold the worker to.
* :func:`message_run`, :func:`fresh_from` and :func:`indexed` (the worker's path, ``runtime.effects``): the same
  records made without the v1 record, from the raw messages' ids and creation times and from the system blocks
  with their digests, so that a publication costs what changed rather than the size of the context.
* :func:`known_messages`, :func:`resolve_run`, :func:`ready` and :func:`rebuild` (every client): the messages a
  reader knows for a thread after a cursor, the cursor's raw messages found among them (or None: fetch the run), and
  the v1 record rebuilt byte for byte (the system blocks are the same strings, so prompt caches are unaffected).

The one rendering rule a client needs is how ``observations`` joins the segment blocks (``core.context``): the
blocks between the first ``<observations>`` block and the last ``</observations>`` block, each separated by a
blank line, inside the two tags on lines of their own; the empty string without segment blocks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import filterfalse

from om_stream.core.messages import Message
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_v2 import BlockRecord, ContextCursor, ContextIndex, MessageRun, block_digest

__all__ = ["ByReference", "Indexed", "Sent", "by_reference", "fresh_from", "indexed", "known_messages", "message_run",
           "observations_of", "ready", "rebuild", "resolve_run"]

OPEN, CLOSE = "<observations>", "</observations>"


@dataclass(frozen=True)
class Sent:
    """What a thread's previous publication left its readers holding: its index, and the ids of the raw messages
    of its cursor (pin, then run)."""

    index: ContextIndex
    messages: tuple[str, ...]


@dataclass(frozen=True)
class ByReference:
    """One context's v2 records, in the order they are published; ``dropped``: digests the new index no longer
    lists, whose blocks are tombstoned after the cursor."""

    blocks: tuple[BlockRecord, ...]
    index: ContextIndex | None  # None: the list did not change
    cursor: ContextCursor
    dropped: tuple[str, ...]


def by_reference(record: ContextRecord, *, pinned_message_id: str | None, run_ids: Sequence[str],
                 expire_before: int | None, previous: Sent | None) -> tuple[ByReference, Sent]:
    """The v2 records of ``record`` and what readers hold after them.

    ``pinned_message_id``, ``run_ids`` and ``expire_before``: the spec's account of the raw messages (its pin, its
    other message ids, its retention cutoff). A spec message the renderer left out (not found in the store, or past a
    later cutoff) is listed as excluded. ``previous``: None when the worker does not know what the thread's last
    publication was (it restarted, or the thread was handed over): then every block and the whole index go out."""
    messages = record.messages
    pinned = messages[0] if pinned_message_id is not None and messages and \
        messages[0].message_id == pinned_message_id else None
    run = messages[1:] if pinned is not None else messages
    rendered = {m.message_id for m in messages}
    excluded = [i for i in run_ids if i not in rendered]
    if expire_before is not None and run:
        # a renderer that kept an older message (a condensed log is rendered without a cutoff): the cutoff a reader
        # applies must keep every message the context holds
        expire_before = min(expire_before, *(m.created_at_ms for m in run))
    raw = MessageRun(first_message_id=run[0].message_id if run else None,
                     through_message_id=run[-1].message_id if run else None, count=len(run),
                     pinned_message_id=pinned.message_id if pinned is not None else None,
                     expire_before=expire_before if run else None, excluded=excluded if run else [])
    held = [*([pinned] if pinned is not None else []), *run]
    ids = tuple(m.message_id for m in held)
    new = _new_messages(held, set(previous.messages) if previous is not None else set())

    digests = [block_digest(text) for text in record.system_blocks]
    before = previous.index if previous is not None else None
    blocks: list[BlockRecord] = []
    dropped: tuple[str, ...] = ()
    if before is not None and before.blocks == digests:
        index = None
        index_version = before.version
    else:
        index_version = record.version if before is None else max(record.version, before.version + 1)
        index = ContextIndex(thread_id=record.thread_id, version=index_version, blocks=digests)
        listed = set(before.blocks) if before is not None else set()
        for digest, text in zip(digests, record.system_blocks, strict=True):
            if digest not in listed:
                listed.add(digest)
                blocks.append(BlockRecord(thread_id=record.thread_id, digest=digest, text=text))
        if before is not None:
            now = set(digests)
            dropped = tuple(dict.fromkeys(d for d in before.blocks if d not in now))
    cursor = ContextCursor(
        thread_id=record.thread_id, resource_id=record.resource_id, version=record.version,
        generation=record.generation, thread_title=record.thread_title, through_message_id=record.through_message_id,
        index_version=index_version, raw=raw, new_messages=new, hints=record.hints, tokens=record.tokens,
        continuation=record.continuation)
    held_index = index if index is not None else before
    assert held_index is not None  # an unchanged list has a previous index
    return ByReference(tuple(blocks), index, cursor, dropped), Sent(held_index, ids)


def _new_messages(held: Sequence[Message], sent: Collection[str]) -> list[Message]:
    """The held messages readers do not have yet. Normally they follow every message sent before (they arrived
    after it); when one does not (a clear made the whole conversation raw again), the whole of ``held`` is sent, so
    that a reader's order is the run's."""
    fresh = [i for i, m in enumerate(held) if m.message_id not in sent]
    if not fresh:
        return []
    if any(m.message_id in sent for m in held[fresh[0]:]):
        return list(held)
    return list(held[fresh[0]:])


def message_run(ids: Sequence[str], created_at_ms: Sequence[int], *, pinned_message_id: str | None,
                run_ids: Sequence[str], expire_before: int | None) -> MessageRun:
    """The cursor's ``raw`` from the ids of the context's raw messages (pin, then run, as rendered) and their
    creation times: what :func:`by_reference` makes of ``record.messages``, without the messages. (The passes over
    the ids are C-level, so that a long run costs little.)"""
    pinned = ids[0] if pinned_message_id is not None and ids and ids[0] == pinned_message_id else None
    start = 1 if pinned is not None else 0
    count = len(ids) - start
    if not count:
        return MessageRun(pinned_message_id=pinned)
    excluded = list(filterfalse(set(ids).__contains__, run_ids))
    if expire_before is not None:
        expire_before = min(expire_before, *created_at_ms[start:])
    return MessageRun(first_message_id=ids[start], through_message_id=ids[-1], count=count,
                      pinned_message_id=pinned, expire_before=expire_before, excluded=excluded)


def fresh_from(held: Sequence[str], sent: frozenset[str]) -> int:
    """Where the cursor's ``new_messages`` start among the held ids (``len(held)``: none), by
    :func:`by_reference`'s rule: the held messages readers do not have, or all of them when one of those does
    not follow every message sent before. Found from the end (the new messages are normally the last few), and the
    ones before checked in C (``issuperset``)."""
    fresh = len(held)
    while fresh and held[fresh - 1] not in sent:
        fresh -= 1
    if fresh and not sent.issuperset(held[:fresh]):
        return 0
    return fresh


@dataclass(frozen=True)
class Indexed:
    """The block side of one publication: the new blocks, the index if the list changed, the version the cursor
    names, the digests to tombstone, and the index readers hold after it."""

    blocks: tuple[BlockRecord, ...]
    index: ContextIndex | None
    index_version: int
    dropped: tuple[str, ...]
    held: ContextIndex


def indexed(thread_id: str, version: int, system_blocks: Sequence[str], digests: list[str],
            before: ContextIndex | None) -> Indexed:
    """What :func:`by_reference` publishes of ``system_blocks`` (named by ``digests``) after the index ``before``."""
    if before is not None and before.blocks == digests:
        return Indexed((), None, before.version, (), before)
    index_version = version if before is None else max(version, before.version + 1)
    index = ContextIndex(thread_id=thread_id, version=index_version, blocks=digests)
    listed = set(before.blocks) if before is not None else set()
    blocks: list[BlockRecord] = []
    for digest, text in zip(digests, system_blocks, strict=True):
        if digest not in listed:
            listed.add(digest)
            blocks.append(BlockRecord(thread_id=thread_id, digest=digest, text=text))
    dropped: tuple[str, ...] = ()
    if before is not None:
        now = set(digests)
        dropped = tuple(dict.fromkeys(d for d in before.blocks if d not in now))
    return Indexed(tuple(blocks), index, index_version, dropped, index)


def known_messages(previous: Sequence[Message], cursor: ContextCursor) -> list[Message]:
    """The messages a reader knows for a thread once it reads ``cursor``, in position order: those of the context it
    rebuilt before (pin, then run) that the cursor does not send again, then the cursor's ``new_messages``."""
    again = {m.message_id for m in cursor.new_messages}
    return [*(m for m in previous if m.message_id not in again), *cursor.new_messages]


def resolve_run(cursor: ContextCursor, known: Sequence[Message]) -> list[Message] | None:
    """The raw messages of ``cursor`` (pin, then run) found in ``known`` (a thread's messages in position order), or
    None when they are not all there: the reader fetches the run (``GET /v1/threads/{id}/messages``) instead."""
    raw = cursor.raw
    by_id = {m.message_id: m for m in known}
    out: list[Message] = []
    if raw.pinned_message_id is not None:
        pinned = by_id.get(raw.pinned_message_id)
        if pinned is None:
            return None
        out.append(pinned)
    if raw.count == 0:
        return out
    ids = [m.message_id for m in known]
    if raw.first_message_id not in by_id or raw.through_message_id not in by_id:
        return None
    first, through = ids.index(raw.first_message_id), len(ids) - 1 - ids[::-1].index(raw.through_message_id)
    if through < first:
        return None
    skip = set(raw.excluded)
    if raw.pinned_message_id is not None:
        skip.add(raw.pinned_message_id)
    before = raw.expire_before
    run = [m for m in known[first:through + 1]
           if m.message_id not in skip and (before is None or m.created_at_ms >= before)]
    if len(run) != raw.count or run[0].message_id != raw.first_message_id:
        return None
    return out + run


def ready(cursor: ContextCursor, index: ContextIndex | None, blocks: Mapping[str, str]) -> bool:
    """The reader holds the index the cursor names and every block of it."""
    return index is not None and index.version == cursor.index_version and all(d in blocks for d in index.blocks)


def observations_of(system_blocks: Sequence[str]) -> str:
    """The observation log as ``om.context/v1`` carries it, from the system blocks (the module docstring's rule)."""
    if OPEN not in system_blocks or CLOSE not in system_blocks:
        return ""
    start = system_blocks.index(OPEN)
    end = len(system_blocks) - 1 - list(system_blocks)[::-1].index(CLOSE)
    segments = system_blocks[start + 1:end]
    return OPEN + "\n" + "\n\n".join(segments) + "\n" + CLOSE if segments else ""


def rebuild(cursor: ContextCursor, index: ContextIndex, blocks: Mapping[str, str],
            messages: Sequence[Message]) -> ContextRecord:
    """The ``om.context/v1`` record of ``cursor`` (``ready`` must hold; ``messages``: what ``resolve_run`` or the
    messages API gave)."""
    system_blocks = [blocks[d] for d in index.blocks]
    return ContextRecord(
        thread_id=cursor.thread_id, resource_id=cursor.resource_id, version=cursor.version,
        through_message_id=cursor.through_message_id, observations=observations_of(system_blocks),
        hints=cursor.hints, messages=list(messages), system_blocks=system_blocks, continuation=cursor.continuation,
        tokens=cursor.tokens, generation=cursor.generation, thread_title=cursor.thread_title)
