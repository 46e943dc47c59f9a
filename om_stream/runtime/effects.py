"""Executing the store side of ``decide``'s commands and turning its references into payloads.

Shared by the embedded runner and the Kafka worker:
* ``write``: phase 1 of the commit order (content-store writes, in order, idempotent), a retention purge's
  included (what it removed is kept for its receipt);
* ``event``: an event with its ``observations`` filled from stored chunk texts where the engine gave ids (cut at
  the record's retention cutoff), a purge's receipt with what the store removed;
* ``expiry_reads``: what a record's retention purge reads before it is decided;
* ``conversation``: a record's stored messages, which a clear hands back to it;
* ``context``: a ``ContextSpec`` rendered into the ``om.context/v1`` record an agent consumes;
* ``by_reference``: the same context's ``om.context/v2`` records, made without the v1 record.

Texts just written are kept in a bounded in-process cache, so rendering a context after every message does not
read back from Cassandra what this process wrote a moment ago.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from itertools import filterfalse
from typing import TypeVar

from om_stream.core.commands import (
    ActivateChunks,
    ClearStored,
    Command,
    CommitGeneration,
    ContextSpec,
    EmitEvent,
    ExpireStored,
    PersistMessage,
    PersistRetention,
    PersistSegment,
    PersistThreadMetadata,
)
from om_stream.core.condensation import condense
from om_stream.core.config import ResolvedConfig
from om_stream.core.context import (
    RenderedBlocks,
    observation_log,
    other_conversation_blocks,
    render_blocks,
    visible_texts,
)
from om_stream.core.events import ExpiredEvent, OMEvent
from om_stream.core.messages import Message
from om_stream.core.recall.groups import group_heading
from om_stream.core.recall.instructions import recall_instructions
from om_stream.core.recall.records import StoredMessage
from om_stream.core.retention import ExpiryCounts, SegmentText, cut_text
from om_stream.core.state import RecordState
from om_stream.core.step import record_hash
from om_stream.ports import BatchedWrites, ContentStore, GroupQueries
from om_stream.runtime.content_cache import ContentCache
from om_stream.runtime.reference_memo import BlockDigests, MessageDates, RenderedThreads, ThreadBlocks
from om_stream.wire.context import ContextHints, ContextRecord, ContextTokens
from om_stream.wire.context_refs import ByReference, Sent, fresh_from, indexed, message_run
from om_stream.wire.context_v2 import ContextCursor

V = TypeVar("V", Message, str)
_EXPIRIES_KEPT = 4096  # purges written whose receipt was not made yet (a batch refused and decided again drops some)

__all__ = ["Effects", "message_prefix"]


class Effects:
    def __init__(self, store: ContentStore, config: ResolvedConfig, *, count_text: Callable[[str], int],
                 cache_bytes: int = 64 * 1024 * 1024, search_available: bool = False) -> None:
        self.store = store
        self.config = config
        self.count_text = count_text
        # retrieval mode: the recall instructions (offering search only when it works) and group headings
        self.recall_instructions = recall_instructions(config.retrieval, search_available=search_available) or None
        self._recall_waits_for_observations = config.retrieval is not None and config.retrieval.scope == "thread"
        self._groups = store if isinstance(store, GroupQueries) else None  # stores that keep observation groups
        self._batches = store if isinstance(store, BatchedWrites) else None  # stores that commit writes together
        self.cache = ContentCache(cache_bytes)
        self._expiries: OrderedDict[str, ExpiryCounts] = OrderedDict()  # expiry id -> what its purge removed
        # what ``by_reference`` remembers between publications (``runtime.reference_memo``)
        self.block_digests = BlockDigests()
        self.message_dates = MessageDates()
        self.rendered_threads = RenderedThreads()

    @property
    def batches_writes(self) -> bool:
        """The store commits writes together (``write_together``), so a batch's writes are best given at once."""
        return self._batches is not None

    async def write_together(self, commands: Iterable[Command]) -> None:
        """``write``, committed as one unit (all or none) by a store that batches writes; any other store writes
        them one by one."""
        if self._batches is None:
            await self.write(commands)
            return
        async with self._batches.batched_writes():
            await self.write(commands)

    async def write(self, commands: Iterable[Command]) -> None:
        """Phase 1 of the commit order: every content-store write, in the order the engine gave them."""
        for command in commands:
            if isinstance(command, PersistMessage):
                await self.store.put_message(command.record_key, command.message, command.seq, command.tokens)
                message = command.message
                self.cache.put(_message_key(message.resource_id, message.message_id), message)
            elif isinstance(command, PersistSegment):
                await self.store.put_segment(command)
                self.cache.put(f"s:{command.segment_id}", command.text)
            elif isinstance(command, ActivateChunks):
                await self.store.activate_chunks(command)
            elif isinstance(command, CommitGeneration):
                await self.store.commit_generation(command)
            elif isinstance(command, PersistThreadMetadata):
                await self.store.put_thread_metadata(command)
            elif isinstance(command, ClearStored):
                await self.store.clear(command.record_key, command.epoch)
            elif isinstance(command, ExpireStored):
                counts = await self.store.expire(command)
                self._expired(command)
                self._expiries[command.expiry_id] = self._expiries.pop(command.expiry_id, ExpiryCounts()) + counts
                while len(self._expiries) > _EXPIRIES_KEPT:
                    self._expiries.popitem(last=False)
            elif isinstance(command, PersistRetention):
                await self.store.put_retention(command)

    def _expired(self, command: ExpireStored) -> None:
        """A purge: drop what the cache holds of what it removed (segment texts by id, the threads' messages
        created before the cutoff, every condensed log: keyed by a digest, they are cheap to make again)."""
        segments = {f"s:{i}" for i in (*command.deletes, *(r.old_id for r in command.rewrites))}
        threads = set(command.thread_ids)
        prefix = message_prefix(command.resource_id)

        def doomed(key: str, value: Message | str) -> bool:
            if key.startswith("m:"):
                return (key.startswith(prefix) and isinstance(value, Message) and value.thread_id in threads
                        and value.created_at_ms < command.before)
            return key.startswith("c:") or key in segments

        self.cache.evict(doomed)

    async def expiry_reads(self, state: RecordState, before: int) -> tuple[list[SegmentText], int | None]:
        """What a record's purge reads: its stored segments, and its oldest message left after ``before``."""
        segments = await self.store.segment_texts_of(state.key, state.resource_id)
        next_at = await self.store.next_message_at(state.resource_id, tuple(state.threads), before)
        return segments, next_at

    def forget(self, resource_id: str, thread_ids: Iterable[str], record_ids: Iterable[str]) -> None:
        """An erase: drop what the cache holds of the subject. Messages of its threads; segment texts and group
        headings of its records (``scope:key``; their ids carry its hash, ``core.step.Step.new_id``); every
        condensed log (keyed by a digest, they are cheap to make again)."""
        threads = set(thread_ids)
        hashes = tuple(f"-{record_hash(record_id)}-" for record_id in record_ids)
        prefix = message_prefix(resource_id)

        def doomed(key: str, value: Message | str) -> bool:
            if key.startswith("m:"):
                return key.startswith(prefix) and isinstance(value, Message) and value.thread_id in threads
            if key.startswith("c:"):
                return True
            return any(h in key for h in hashes)

        self.cache.evict(doomed)

    async def _cached(self, ids: Sequence[str], prefix: str, kind: type[V],
                      load: Callable[[list[str]], Awaitable[dict[str, V]]]) -> dict[str, V]:
        """``ids`` found in the cache (under ``prefix + id``), the rest loaded (one call) and cached. Run for every
        unobserved message of a thread on every v1 context: the loop does no more than a lookup per id."""
        found: dict[str, V] = {}
        missing = []
        get = self.cache.get
        for item in ids:
            cached = get(prefix + item)
            if isinstance(cached, kind):
                found[item] = cached
            else:
                missing.append(item)
        if missing:
            for item, value in (await load(missing)).items():
                found[item] = value
                self.cache.put(prefix + item, value)
        return found

    async def messages(self, ids: Sequence[str], resource_id: str) -> list[Message]:
        """Messages of one tenant (message ids are only unique within a resource), from the cache or the store."""
        async def load(missing: list[str]) -> dict[str, Message]:
            return {m.message_id: m for m in await self.store.get_messages(missing, resource_id=resource_id)}

        found = await self._cached(ids, message_prefix(resource_id), Message, load)
        return [found[i] for i in ids if i in found]

    async def conversation(self, state: RecordState) -> list[StoredMessage]:
        """The messages a record took in, oldest first: what a clear gives back to it as unobserved."""
        return await self.store.get_record_messages(state.key, resource_id=state.resource_id,
                                                    thread_ids=tuple(state.threads), through_seq=state.msg_seq)

    async def texts(self, ids: Sequence[str]) -> dict[str, str]:
        return await self._cached(ids, "s:", str, self.store.get_segment_texts)

    async def group_headings(self, resource_id: str, segment_ids: Sequence[str]) -> dict[str, str]:
        """Each segment's group heading (id and message ranges), for stores that keep groups; cached, since a
        segment's ranges never change."""
        store = self._groups
        if store is None:
            return {}

        async def load(missing: list[str]) -> dict[str, str]:
            return {gid: group_heading(group) for gid, group in (await store.get_groups(resource_id, missing)).items()}

        return await self._cached(segment_ids, "g:", str, load)

    async def event(self, command: EmitEvent) -> OMEvent:
        event = command.event
        if command.observations_from:
            texts = await self.texts(command.observations_from)
            before = command.expire_before
            if before is not None:  # entries past the window are not published, stored or not yet purged
                texts = {i: cut_text(t, before, before).text for i, t in texts.items()}
            joined = "\n\n".join(texts[i] for i in command.observations_from if texts.get(i))
            event = event.model_copy(update={"observations": joined})
        if command.expiry_of is not None and isinstance(event, ExpiredEvent):
            counts = self._expiries.pop(command.expiry_of, ExpiryCounts())
            event = event.model_copy(update={"removed": event.removed.model_copy(update={
                "messages": counts.messages, "observations": counts.observations, "rewritten": counts.rewritten,
                "threads": counts.threads, "cycle_results": counts.cycle_results})})
        return event

    def _within_bound(self, spec: ContextSpec, texts: dict[str, str]) -> tuple[ContextSpec, dict[str, str]]:
        """A log over its bound (the engine said so with a ``data-om-condensation`` event) is condensed as it is
        rendered, into one block; the stored segments are left as they are for the reflection that replaces them.
        The condensed text is cached: the same log renders the same, without condensing again."""
        limit = spec.observation_limit
        if limit is None or spec.observation_tokens <= limit or not spec.segment_ids:
            return spec, texts
        # the texts as shown are part of the key: retention cuts the same segments differently as entries expire
        key = "c:" + hashlib.blake2b("\x1f".join((str(limit), *spec.segment_ids, *(
            str(hash(texts[i])) for i in spec.segment_ids if i in texts))).encode(), digest_size=16).hexdigest()
        condensed = self.cache.get(key)
        if not isinstance(condensed, str):
            joined = "\n\n".join(texts[i] for i in spec.segment_ids if i in texts)
            condensed = condense(joined, limit, self.count_text).text
            self.cache.put(key, condensed)
        return replace(spec, segment_ids=(key,), segment_boundaries=spec.segment_boundaries[-1:],
                       observation_tokens=self.count_text(condensed), segment_dated_from=(),
                       expire_before=None), {key: condensed}

    async def context(self, spec: ContextSpec, *, now_ms: int) -> ContextRecord:
        """Render the agent's context. Relative dates use the thread's newest message time when it is known. The
        system blocks are the thread's last ones when nothing they are made of changed (``_remembered_blocks``):
        most publications add a message and leave the log, the hints and the day as they were."""
        messages = await self.messages(spec.message_ids, spec.resource_id)
        made = await self._remembered_blocks(spec, now_ms=now_ms)
        rendered = made.rendered
        before = made.expire_before
        return ContextRecord(
            thread_id=spec.thread_id, resource_id=spec.resource_id, version=spec.version,
            through_message_id=spec.through_message_id, observations=observation_log(rendered),
            hints=ContextHints(current_task=spec.current_task, suggested_response=spec.suggested_response),
            messages=[m for m in messages if before is None or m.created_at_ms >= before],
            system_blocks=list(rendered.system_blocks), continuation=rendered.continuation,
            tokens=ContextTokens(messages=spec.message_tokens, observations=made.observation_tokens),
            generation=spec.generation, thread_title=spec.thread_title)

    async def by_reference(self, spec: ContextSpec, *, now_ms: int, previous: Sent | None) -> tuple[ByReference, Sent]:
        """The ``om.context/v2`` records of the context ``context(spec)`` renders, against what the thread's readers
        hold (``previous``), as ``wire.context_refs.by_reference`` makes them from that record, byte for byte, and
        what readers hold after them. Made without the v1 record: the raw messages by id and creation time (read
        once per thread, ``MessageDates``), only the new ones read whole; the system blocks and their digests made
        again only when what they are made of changed (``RenderedThreads``), and then the digests of unchanged
        blocks remembered (``BlockDigests``). So its cost follows what changed, not the length of the context."""
        made = await self._remembered_blocks(spec, now_ms=now_ms)
        rendered = made.rendered
        ids = spec.message_ids
        dates = self.message_dates.of(spec.thread_id, spec.resource_id, self.cache.evictions)
        unread = list(filterfalse(dates.__contains__, ids))
        if unread:
            for message in await self.messages(unread, spec.resource_id):
                dates[message.message_id] = message.created_at_ms
        # the messages as rendered: those the store holds, created at or after the cutoff shown (C-level passes
        # in the usual case, where all of them are)
        before = made.expire_before
        held = ids if not unread else tuple(filter(dates.__contains__, ids))
        created = list(map(dates.__getitem__, held))
        if before is not None and held and min(created) < before:
            held = tuple(i for i, at in zip(held, created, strict=True) if at >= before)
            created = [at for at in created if at >= before]
        self.message_dates.keep_only(spec.thread_id, held)
        pinned = spec.pinned_message_id
        raw = message_run(held, created, pinned_message_id=pinned, expire_before=spec.expire_before,
                          run_ids=ids if pinned is None else tuple(filter(pinned.__ne__, ids)))
        new_from = fresh_from(held, frozenset(previous.messages) if previous is not None else frozenset())
        new = await self.messages(held[new_from:], spec.resource_id) if new_from < len(held) else []
        blocks = rendered.system_blocks
        listed = indexed(spec.thread_id, spec.version, blocks, made.digests,
                         previous.index if previous is not None else None)
        cursor = ContextCursor(
            thread_id=spec.thread_id, resource_id=spec.resource_id, version=spec.version, generation=spec.generation,
            thread_title=spec.thread_title, through_message_id=spec.through_message_id,
            index_version=listed.index_version, raw=raw, new_messages=new,
            hints=ContextHints(current_task=spec.current_task, suggested_response=spec.suggested_response),
            tokens=ContextTokens(messages=spec.message_tokens, observations=made.observation_tokens),
            continuation=rendered.continuation)
        return ByReference(listed.blocks, listed.index, cursor, listed.dropped), Sent(listed.held, held)

    async def _remembered_blocks(self, spec: ContextSpec, *, now_ms: int) -> ThreadBlocks:
        """The context's system blocks (``_render_blocks``) with their digests, made again only when what they are
        made of changed since the thread's last publication (``RenderedThreads``): the segments (their texts never
        change under one id; a purge or an erase evicts from the content cache, and the eviction count is part of
        the key), the cutoff, the hints, the extracted values, the other threads' messages, and the conversation's
        day (relative dates)."""
        now_ms = await self._conversation_now(spec, now_ms)
        extracted = await self._extracted(spec)
        made_of = (spec.resource_id, spec.segment_ids, spec.segment_boundaries, spec.segment_dated_from,
                   spec.expire_before, spec.observation_limit, spec.observation_tokens, spec.current_task,
                   spec.suggested_response, spec.other_threads, spec.obscure_thread_ids, tuple(extracted.items()),
                   now_ms // 86_400_000, self.cache.evictions)
        found = self.rendered_threads.get(spec.thread_id, made_of)
        if found is not None:
            return found
        shown, rendered = await self._render_blocks(spec, now_ms, extracted)
        made = ThreadBlocks(shown.expire_before, shown.observation_tokens, rendered,
                            self.block_digests.of(rendered.system_blocks))
        self.rendered_threads.put(spec.thread_id, made_of, made)
        return made

    async def _conversation_now(self, spec: ContextSpec, now_ms: int) -> int:
        """Relative dates are read against the thread's newest message time when it is known."""
        if spec.through_message_id:
            newest = await self.messages([spec.through_message_id], spec.resource_id)
            if newest:
                return newest[0].created_at_ms
        return now_ms

    async def _extracted(self, spec: ContextSpec) -> dict[str, str]:
        custom = [e for e in self.config.observation_extractors if e.include_previous_extraction and e.inline]
        if not custom or spec.metadata_expired:
            return {}
        metadata = await self.store.get_thread_metadata(spec.thread_id)
        return {e.slug: str(metadata.extracted[e.slug]) for e in custom if e.slug in metadata.extracted}

    async def _render_blocks(self, spec: ContextSpec, now_ms: int,
                             extracted: dict[str, str]) -> tuple[ContextSpec, RenderedBlocks]:
        shown, texts = self._within_bound(spec, visible_texts(spec, await self.texts(spec.segment_ids)))
        headings = await self.group_headings(shown.resource_id, shown.segment_ids) if self.recall_instructions else {}
        others: tuple[tuple[str, str], ...] = ()
        if shown.other_threads:  # resource scope: what the user said in the resource's other threads
            elsewhere = await self.messages([i for _, ids in shown.other_threads for i in ids], shown.resource_id)
            before = shown.expire_before
            others = other_conversation_blocks(shown, [m for m in elsewhere
                                                       if before is None or m.created_at_ms >= before])
        return shown, render_blocks(shown, texts, now_ms=now_ms, hints=self.config.observation_hints,
                                    extracted=extracted, extra_instructions=self.recall_instructions,
                                    instructions_need_observations=self._recall_waits_for_observations,
                                    other_conversations=others, group_headings=headings)


def _message_key(resource_id: str, message_id: str) -> str:
    return f"m:{resource_id}\x1f{message_id}"


def message_prefix(resource_id: str) -> str:
    """The cache keys of a resource's messages start with this."""
    return _message_key(resource_id, "")
