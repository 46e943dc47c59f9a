"""The recall tool's I/O half: runs a recall call against a content store, a recall index and an embedder.

Access control lives here and in the stores' signatures: every read names the tenant (``scope.resource_id``), so a
store only ever answers with that resource's rows; ids a caller passes (cursor, threadId) are looked up *within*
the tenant, and an id of another tenant reads exactly like an id that does not exist. Search hits are re-checked
against the store before they are shown (the index may hold points of forgotten observations).

Retention (``core.retention``): nothing past the window of the thread read is ever returned, whether or not its
record's purge has run. A thread's window is the deployment's, or its record's shorter one (the store keeps it:
``ExpiringStore.retention_of``); what is older than its cutoff reads as if it did not exist: a message, a thread
whose newest message is, an observation group whose newest message is, and each expired entry of a group's text.

The rules and the rendering are pure (``om_stream.core.recall``); this module only fetches what they need. Also
here: indexing an observation group and the messages it covers (``IndexForRecall``), and the index's side of a
purge (``ExpireIndex``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from om_stream.core.commands import ExpireIndex, IndexForRecall
from om_stream.core.config import RetrievalConfig
from om_stream.core.erasure import record_digest
from om_stream.core.messages import author_mark
from om_stream.core.recall.indexing import embedding_chunks, message_search_text
from om_stream.core.recall.instructions import recall_instructions
from om_stream.core.recall.listing import SEARCH_UNAVAILABLE, SearchItem, render_search, render_threads
from om_stream.core.recall.paging import (
    PagePlan,
    looks_like_range,
    page_flags,
    plan_page,
    range_candidates,
    range_hint,
    slice_page,
)
from om_stream.core.recall.params import CURRENT_THREAD, PartType, RecallArguments, RecallScope, parse_arguments
from om_stream.core.recall.render import (
    RESULT_BUDGET_TOKENS,
    TokenCount,
    indent_part,
    message_header,
    part_text,
    render_parts,
    truncate_tokens,
    visible_parts,
)
from om_stream.core.recall.results import MessagesResult, RecallResult, SearchResult, ThreadsResult
from om_stream.core.retention import cut_text, cutoff, segment_expired
from om_stream.errors import ModelError, RecallError
from om_stream.ports import (
    Embedder,
    MessagePosition,
    MessageRange,
    RecallHit,
    RecallIndex,
    RecallPoint,
    RecallStore,
    StoredMessage,
    ThreadSummary,
)
from om_stream.runtime.recall_retention import Cutoffs, RecallRetention, within_window

__all__ = ["RecallRetention", "RecallService"]

log = logging.getLogger(__name__)

MAX_SCAN = 5_000  # messages read to fill one page when filters skip most of them
_BATCH = 100
_SEARCH_OVERFETCH = 3


_LAST_SEQ = 2**62  # above any sequence number: a position just before a time, whatever message sorts at it


@dataclass
class _Window:
    messages: list[StoredMessage]  # visible messages in reading order
    exhausted: bool  # the thread has nothing more in this direction (False: stopped at MAX_SCAN)
    # the last message read when the scan stopped at MAX_SCAN before it found enough: where a caller reads on
    stopped_at: StoredMessage | None = None


class RecallService:
    """Answers recall calls for one memory deployment.

    ``count_tokens`` is the deployment's tokenizer (the 2,000-token budget is measured with it). Without ``index``
    and ``embedder``, ``mode="search"`` answers that search is not configured (never an error).
    """

    def __init__(self, store: RecallStore, count_tokens: TokenCount, *, index: RecallIndex | None = None,
                 embedder: Embedder | None = None, budget_tokens: int = RESULT_BUDGET_TOKENS,
                 retention: RecallRetention | None = None) -> None:
        self.store = store
        self.count = count_tokens
        self.index = index
        self.embedder = embedder
        self.budget = budget_tokens
        self.retention = retention

    @property
    def search_available(self) -> bool:
        return self.index is not None and self.embedder is not None

    def instructions(self, retrieval: RetrievalConfig | None) -> str:
        """The usage instructions for an agent's prompt (they only offer search when it works)."""
        return recall_instructions(retrieval, search_available=self.search_available)

    async def recall(self, scope: RecallScope, arguments: RecallArguments | Mapping[str, Any]) -> RecallResult:
        """Run one recall call. Raises :class:`RecallError` for a call that cannot be answered as asked,
        :class:`~om_stream.errors.StorageError` when the store fails."""
        args = parse_arguments(dict(arguments) if isinstance(arguments, Mapping) else arguments)
        cutoffs = Cutoffs(self.store, self.retention, scope.resource_id)
        if args.mode == "threads":
            return await self._threads(scope, args, cutoffs)
        if args.mode == "search":
            return await self._search(scope, args, cutoffs)
        return await self._messages(scope, args, cutoffs)

    # -- threads -------------------------------------------------------------------------------------------------

    def _current(self, scope: RecallScope) -> str:
        if not scope.current_thread_id:
            raise RecallError('there is no current thread in this call: pass a threadId (see mode="threads")')
        return scope.current_thread_id

    async def _owned_thread(self, scope: RecallScope, thread_id: str, cutoffs: Cutoffs) -> ThreadSummary:
        thread = await self.store.get_thread(scope.resource_id, thread_id)
        if thread is None or await cutoffs.expired(thread):
            raise RecallError(f'no thread "{thread_id}" was found for this user; mode="threads" lists them')
        return thread

    def _target_thread(self, scope: RecallScope, args: RecallArguments) -> str | None:
        """The thread a call names (``"current"`` resolved), checked against the scope; None if it names none."""
        named = args.thread_id
        if named == CURRENT_THREAD:
            return self._current(scope)
        if scope.thread_only:
            current = self._current(scope)
            if named is not None and named != current:
                raise RecallError("recall is limited to the current thread in this memory (retrieval scope "
                                  '"thread"); omit threadId')
            return current if named is not None else None
        return named

    async def _threads(self, scope: RecallScope, args: RecallArguments, cutoffs: Cutoffs) -> ThreadsResult:
        page, limit = args.effective_page(), args.effective_limit()
        after, before = args.after_ms, args.before_ms
        named = self._target_thread(scope, args)
        if scope.thread_only or named is not None:
            thread_id = named or self._current(scope)
            thread = await self.store.get_thread(scope.resource_id, thread_id)
            keep = (thread is not None and page == 0 and (after is None or thread.created_at > after)
                    and (before is None or thread.created_at < before) and not await cutoffs.expired(thread))
            threads: Sequence[ThreadSummary] = [thread] if keep and thread is not None else []
            has_more = False
        else:
            listing = await self.store.list_threads(scope.resource_id, offset=page * limit, limit=limit,
                                                    created_after=after, created_before=before)
            threads = [t for t in listing.threads if not await cutoffs.expired(t)]
            has_more = listing.has_more
        rendered = render_threads(threads, scope.current_thread_id, self.count, self.budget)
        return ThreadsResult(threads=rendered.text, count=len(threads), page=page, has_more=has_more,
                             truncated=True if rendered.truncated else None,
                             token_offset=rendered.token_offset if rendered.truncated else None)

    # -- messages ------------------------------------------------------------------------------------------------

    async def _messages(self, scope: RecallScope, args: RecallArguments, cutoffs: Cutoffs) -> MessagesResult:
        limit = args.effective_limit()
        page = args.effective_page()
        target = self._target_thread(scope, args)
        if target is not None and not scope.thread_only and target != scope.current_thread_id:
            # another thread must be the tenant's (the current one may not have a message stored yet; its reads
            # are keyed by the tenant like every other, so a current thread id of someone else reads as empty)
            await self._owned_thread(scope, target, cutoffs)
        if args.cursor is None:
            if args.part_index is not None:
                raise RecallError("partIndex needs a cursor: the id of the message whose part you want")
            notes = []
            if target is None:
                target = self._current(scope)
                side = "start" if args.anchor == "start" else "end"
                notes.append(f"No cursor or threadId was given: reading the current thread from its {side}.")
            plan = plan_page(page, limit, from_cursor=False, anchor=args.anchor)
            if args.anchor == "end":
                notes.append("Pages count back from the newest message: page 2 holds the messages before these.")
            return await self._page(scope, args, target, plan, None, notes, cutoffs)
        cursor = await self._resolve_cursor(scope, args.cursor, cutoffs)
        if isinstance(cursor, str):  # a hint instead of a message
            return MessagesResult(messages=cursor, count=0, cursor=args.cursor, page=page, limit=limit,
                                  detail=args.detail, has_next_page=False, has_prev_page=False)
        cursor_thread = cursor.message.thread_id
        if target is not None and cursor_thread != target:
            text = (f'The cursor "{args.cursor}" belongs to thread "{cursor_thread}", not to "{target}". Pass '
                    f'threadId="{cursor_thread}" to browse that thread, or leave threadId out.')
            return MessagesResult(messages=text, count=0, cursor=args.cursor, page=page, limit=limit,
                                  detail=args.detail, has_next_page=False, has_prev_page=False)
        if args.part_index is not None:
            return await self._part(scope, args, cursor, args.part_index, cutoffs)
        return await self._page(scope, args, cursor_thread, plan_page(page, limit, from_cursor=True), cursor, [],
                                cutoffs)

    async def _resolve_cursor(self, scope: RecallScope, cursor: str, cutoffs: Cutoffs) -> StoredMessage | str:
        """The cursor's message (of this tenant, and of the current thread in thread scope), or a hint."""
        value = cursor.strip()
        found = await self.store.get_message(scope.resource_id, value)
        if found is not None and ((scope.thread_only and found.message.thread_id != self._current(scope))
                                  or await cutoffs.message_expired(found)):
            found = None
        if found is not None:
            return found
        if looks_like_range(value):
            candidates = range_candidates(value)
            start = await self._first_existing(scope, candidates.starts, cutoffs)
            end = await self._first_existing(scope, candidates.ends, cutoffs)
            if start is not None or end is not None:
                return range_hint(cursor, start or candidates.starts[0], end or candidates.ends[-1])
        raise RecallError(f'no message "{cursor}" was found. Use a message id from an observation group\'s range, '
                          'or browse with threadId and no cursor')

    async def _first_existing(self, scope: RecallScope, ids: Sequence[str], cutoffs: Cutoffs) -> str | None:
        for message_id in ids:
            found = await self.store.get_message(scope.resource_id, message_id)
            if found is not None and (not scope.thread_only or found.message.thread_id == scope.current_thread_id) \
                    and not await cutoffs.message_expired(found):
                return message_id
        return None

    async def _window(self, resource_id: str, thread_id: str, *, forward: bool, start: MessagePosition | None,
                      need: int, part_type: PartType | None, tool_name: str | None,
                      cutoffs: Cutoffs, author: str | None = None) -> _Window:
        """Up to ``need`` visible messages from ``start`` (exclusive) in reading order; none past the window.
        ``author``: only the messages it wrote (``Message.written_by``)."""
        found: list[StoredMessage] = []
        scanned = 0
        position = start
        before = await cutoffs.of(thread_id)
        if before is not None and forward and (position is None or position.created_at < before):
            position = MessagePosition(before - 1, _LAST_SEQ, "")  # reading forward starts at the cutoff
        last: StoredMessage | None = None
        while len(found) < need:
            if scanned >= MAX_SCAN:
                return _Window(found, exhausted=False, stopped_at=last)
            filtered = part_type or tool_name or author
            batch = min(max(need - len(found), 1) * 2 if filtered else need - len(found), _BATCH)
            batch = max(batch, 1)
            page = await self.store.list_thread_messages(
                resource_id, thread_id, limit=batch, after=position if forward else None,
                before=None if forward else position, newest_first=not forward)
            scanned += len(page.messages)
            for stored in page.messages:
                if before is not None and stored.message.created_at_ms < before:
                    return _Window(found, exhausted=True)  # reading back: everything older is past the window
                if _shown(stored, part_type, tool_name, author):
                    found.append(stored)
            if not page.messages or not page.has_more:
                return _Window(found, exhausted=True)
            last = page.messages[-1]
            position = last.position
        return _Window(found[:need], exhausted=False)

    async def _page(self, scope: RecallScope, args: RecallArguments, thread_id: str, plan: PagePlan,
                    cursor: StoredMessage | None, notes: list[str], cutoffs: Cutoffs) -> MessagesResult:
        part_type, tool_name, author = args.part_type, args.tool_name, args.author
        window: list[StoredMessage] = []
        if cursor is not None and _shown(cursor, part_type, tool_name, author):
            window.append(cursor)  # the cursor opens both page 1 and page -1
        reading = self._window(scope.resource_id, thread_id, forward=plan.forward,
                               start=cursor.position if cursor else None, need=plan.need - len(window),
                               part_type=part_type, tool_name=tool_name, cutoffs=cutoffs, author=author)
        if cursor is None:
            found, beyond = await reading, False
        else:  # is there anything on the other side of the cursor? (asked at the same time)
            probe = self._window(scope.resource_id, thread_id, forward=not plan.forward, start=cursor.position,
                                 need=1, part_type=part_type, tool_name=tool_name, cutoffs=cutoffs, author=author)
            found, other_side = await asyncio.gather(reading, probe)
            beyond = bool(other_side.messages)
        window += found.messages
        sliced = slice_page(plan, window)
        has_next, has_prev = page_flags(plan, sliced, beyond_anchor=beyond)
        stopped = found.stopped_at
        if stopped is not None:
            # the filters skipped every message of a long stretch: say so, and where to read on, rather than let
            # "nothing more" stand for "nothing more among what was read"
            has_next, has_prev = (True, has_prev) if plan.forward else (has_next, True)
            notes.append(f"{MAX_SCAN} messages were read without filling this page; the thread goes on. To read "
                         f'on, call again with cursor="{stopped.message.message_id}" and page '
                         f"{1 if plan.forward else -1}.")
        items = sliced.items
        first_id = cursor.message.message_id if cursor else (items[0].message.message_id if items else "")
        note = " ".join(notes) or None
        if not items:
            empty = "(no messages on this page)" if window or cursor or stopped else "(no messages in this thread)"
            if author is not None and not window and not stopped:
                empty = f'(no messages by "{author}" in this thread)'  # an author id or name, both the caller's
            return MessagesResult(messages=self._with_note(note, empty), count=0, cursor=first_id,
                                  page=plan.page, limit=plan.limit, detail=args.detail, has_next_page=has_next,
                                  has_prev_page=has_prev, thread_id=thread_id, note=note)
        if args.detail == "high":
            return self._high_detail(args, items, plan, thread_id, first_id, has_next, has_prev, note)
        rendered = render_parts([s.message for s in items], self.count, detail="low", budget=self.budget,
                                part_type=part_type, tool_name=tool_name)
        return MessagesResult(messages=self._with_note(note, rendered.text), count=len(items), cursor=first_id,
                              page=plan.page, limit=plan.limit, detail="low", has_next_page=has_next,
                              has_prev_page=has_prev, truncated=True if rendered.truncated else None,
                              token_offset=rendered.token_offset if rendered.truncated else None,
                              thread_id=thread_id, note=note)

    @staticmethod
    def _with_note(note: str | None, text: str) -> str:
        return f"Note: {note}\n\n{text}" if note else text

    def _chunk(self, header: str, index: int, full: str, offset: int) -> tuple[str, int | None]:
        """``header`` and part ``index`` from character ``offset``, within the budget; and where it stops."""
        room = self.budget - self.count(header) - 8
        piece = truncate_tokens(full[offset:], room, self.count)
        end = offset + len(piece)
        lead = f"(from character {offset}) " if offset else ""
        return f"{header}\n  [p{index}] {lead}{indent_part(piece)}", (end if end < len(full) else None)

    def _high_detail(self, args: RecallArguments, items: list[StoredMessage], plan: PagePlan, thread_id: str,
                     cursor_id: str, has_next: bool, has_prev: bool, note: str | None) -> MessagesResult:
        first = items[0].message
        parts = visible_parts(first, args.part_type, args.tool_name)
        index, part = parts[0]
        text, next_offset = self._chunk(message_header(first), index, part_text(part), 0)
        hints: list[str] = []
        if next_offset is not None:
            hints.append(f'the rest of this part: partIndex={index} charOffset={next_offset} on '
                         f'cursor="{first.message_id}"')
        if len(parts) > 1:
            hints.append(f'next part: partIndex={parts[1][0]} on cursor="{first.message_id}"')
        if len(items) > 1:
            following = items[1].message
            following_index = visible_parts(following, args.part_type, args.tool_name)[0][0]
            hints.append(f'next message: partIndex={following_index} on cursor="{following.message_id}"')
        elif has_next and plan.forward:
            hints.append(f"more messages on page {plan.page + 1}")
        if hints:
            text += "\n\nHigh detail shows one part per call. To continue: " + ", or ".join(hints) + "."
        truncated = next_offset is not None
        return MessagesResult(
            messages=self._with_note(note, text), count=1, cursor=cursor_id, page=plan.page, limit=plan.limit,
            detail="high", has_next_page=len(items) > 1 or has_next, has_prev_page=has_prev,
            truncated=True if truncated else None,
            token_offset=self.count(part_text(part)[next_offset:]) if next_offset is not None else None,
            thread_id=thread_id, part_index=index, next_char_offset=next_offset, note=note)

    async def _part(self, scope: RecallScope, args: RecallArguments, cursor: StoredMessage,
                    part_index: int, cutoffs: Cutoffs) -> MessagesResult:
        message = cursor.message
        parts = visible_parts(message)
        chosen = next(((i, p) for i, p in parts if i == part_index), None)
        prefix = ""
        thread_id = message.thread_id
        if chosen is None:
            if parts and part_index <= parts[-1][0]:
                available = ", ".join(f"p{i}" for i, _ in parts)
                raise RecallError(f"message {message.message_id} has no part {part_index} to show; its parts are "
                                  f"{available}")
            following = await self._window(scope.resource_id, thread_id, forward=True, start=cursor.position,
                                           need=1, part_type=None, tool_name=None, cutoffs=cutoffs)
            if not following.messages:
                raise RecallError(f"message {message.message_id} has no part {part_index}, and it is the last "
                                  "message of its thread")
            nxt = following.messages[0]
            prefix = (f"Message {message.message_id} has no part {part_index}; showing the first part of the next "
                      f"message, {nxt.message.message_id}.\n\n")
            cursor, message = nxt, nxt.message
            chosen = visible_parts(message)[0]
        index, part = chosen
        full = part_text(part)
        offset = args.char_offset or 0
        if offset and offset >= len(full):
            raise RecallError(f"charOffset {offset} is past the end of part p{index} of {message.message_id} "
                              f"({len(full)} characters)")
        text, next_offset = self._chunk(message_header(message), index, full, offset)
        note = None
        if next_offset is not None:
            note = (f'This part continues: recall cursor="{message.message_id}" partIndex={index} '
                    f"charOffset={next_offset}")
            text += f"\n\n{note}"
        later_parts = any(i > index for i, _ in visible_parts(message))
        earlier_parts = any(i < index for i, _ in visible_parts(message))
        after = later_parts or bool((await self._window(scope.resource_id, thread_id, forward=True,
                                                        start=cursor.position, need=1, part_type=None,
                                                        tool_name=None, cutoffs=cutoffs)).messages)
        before = earlier_parts or bool((await self._window(scope.resource_id, thread_id, forward=False,
                                                           start=cursor.position, need=1, part_type=None,
                                                           tool_name=None, cutoffs=cutoffs)).messages)
        return MessagesResult(
            messages=prefix + text, count=1, cursor=message.message_id, page=1, limit=args.effective_limit(),
            detail="high", has_next_page=after, has_prev_page=before,
            truncated=True if next_offset is not None else None,
            token_offset=self.count(full[next_offset:]) if next_offset is not None else None,
            thread_id=thread_id, part_index=index, next_char_offset=next_offset, note=note)

    # -- search --------------------------------------------------------------------------------------------------

    async def _search(self, scope: RecallScope, args: RecallArguments, cutoffs: Cutoffs) -> SearchResult:
        if not scope.retrieval.vector or self.index is None or self.embedder is None:
            return SearchResult(results=SEARCH_UNAVAILABLE, count=0)
        query = (args.query or "").strip()
        thread_id = self._target_thread(scope, args)
        if scope.thread_only:
            thread_id = self._current(scope)
        elif thread_id is not None:
            await self._owned_thread(scope, thread_id, cutoffs)
        limit = args.effective_limit()
        try:
            vector = (await self.embedder.embed([query]))[0]
        except ModelError as exc:
            raise RecallError(f"search is unavailable right now: {exc}") from exc
        hits = await self.index.query(vector, resource_id=scope.resource_id, limit=limit * _SEARCH_OVERFETCH + 10,
                                      thread_id=thread_id, observed_after=args.after_ms,
                                      observed_before=args.before_ms, author=args.author)
        items = await self._verified(scope, hits, thread_id, cutoffs, args.author)
        items = items[:limit]
        rendered = render_search(query, items, scope.current_thread_id, self.count, self.budget)
        return SearchResult(results=rendered.text, count=len(items),
                            truncated=True if rendered.truncated else None,
                            token_offset=rendered.token_offset if rendered.truncated else None)

    async def _verified(self, scope: RecallScope, hits: Sequence[RecallHit], thread_id: str | None,
                        cutoffs: Cutoffs, author: str | None = None) -> list[SearchItem]:
        """The best hit per message / group, kept only if the store still holds it for this tenant, and it (or,
        for a group, the part of its text the hit shows) is inside the window. With ``author``, only the
        messages that author wrote: an observation group sums up everyone's messages, so none is kept."""
        best: dict[tuple[str, str, str], RecallHit] = {}
        for hit in hits:
            if hit.resource_id != scope.resource_id or (thread_id is not None and hit.thread_id != thread_id):
                continue
            if author is not None and hit.kind != "message":
                continue
            key = (hit.kind, hit.source_id, hit.thread_id if hit.kind == "group" else "")
            if key not in best or hit.score > best[key].score:
                best[key] = hit
        group_ids = [h.source_id for h in best.values() if h.kind == "group"]
        groups = await self.store.get_groups(scope.resource_id, group_ids) if group_ids else {}
        threads: dict[str, ThreadSummary | None] = {}
        items: list[SearchItem] = []
        seen_groups: set[str] = set()
        for found_hit in sorted(best.values(), key=lambda h: -h.score):
            hit = found_hit  # a group's hit shows only the part of its excerpt still inside the window
            role: str | None = None
            at: int | None = None
            if hit.kind == "message":
                stored = await self.store.get_message(scope.resource_id, hit.source_id)
                if stored is None or stored.message.thread_id != hit.thread_id or \
                        await cutoffs.message_expired(stored):
                    continue
                if author is not None and not stored.message.written_by(author):
                    continue
                role, at = stored.message.role + author_mark(stored.message), stored.message.created_at_ms
            else:
                group = groups.get(hit.source_id)
                if group is None or hit.source_id in seen_groups or hit.thread_id not in group.thread_ids:
                    continue
                shown = within_window(hit.text, group.text, group.observed_at, await cutoffs.of(hit.thread_id))
                if shown is None:
                    continue
                seen_groups.add(hit.source_id)
                hit = replace(hit, text=shown)
            if hit.thread_id not in threads:
                found = await self.store.get_thread(scope.resource_id, hit.thread_id)
                threads[hit.thread_id] = None if await cutoffs.expired(found) else found
            if threads[hit.thread_id] is None:
                continue
            items.append(SearchItem(hit, threads[hit.thread_id], role, at))
        return items

    # -- indexing ------------------------------------------------------------------------------------------------

    async def index_segment(self, command: IndexForRecall) -> int:
        """Embed and index an observation group and the messages it covers; returns the points written.

        Idempotent: point ids derive from (tenant, record, kind, source, thread, chunk), so indexing again
        overwrites the same points."""
        if self.index is None or self.embedder is None or await self._erased(command):
            return 0
        group = (await self.store.get_groups(command.resource_id, [command.segment_id])).get(command.segment_id)
        if group is None:
            return 0  # forgotten (clear) or not this tenant's: nothing to index
        # retention: what passed the record's window by now (a queue that lagged) is not indexed
        before = cutoff(self._now(), command.retention_ms)
        if segment_expired(group.observed_at, before):
            return 0
        text = cut_text(group.text, before, group.observed_at).text
        pending: list[tuple[RecallPoint, str]] = []
        for chunk_index, chunk in enumerate(embedding_chunks(text, self.count)):
            for item in group.ranges:
                pending.append((RecallPoint(
                    resource_id=group.resource_id, record_key=group.record_key, thread_id=item.thread_id,
                    kind="group", source_id=group.group_id, chunk=chunk_index, text=chunk,
                    observed_at=group.observed_at, vector=(), range=group.range_text,
                    cursor=item.first_message_id), chunk))
        for item in group.ranges if command.messages else ():
            for stored in await self._messages_in(group.resource_id, item):
                if before is not None and stored.message.created_at_ms < before:
                    continue
                text = message_search_text(stored.message)
                for chunk_index, chunk in enumerate(embedding_chunks(text, self.count)):
                    pending.append((RecallPoint(
                        resource_id=group.resource_id, record_key=group.record_key, thread_id=item.thread_id,
                        kind="message", source_id=stored.message.message_id, chunk=chunk_index, text=chunk,
                        observed_at=stored.message.created_at_ms, vector=(), cursor=stored.message.message_id,
                        author_keys=stored.message.author.keys if stored.message.author else ()), chunk))
        if not pending:
            return 0
        try:
            vectors = await self.embedder.embed([text for _, text in pending])
        except ModelError:
            log.warning("embedding for recall failed for segment %s", command.segment_id)
            raise
        points = [_with_vector(point, vector) for (point, _), vector in zip(pending, vectors, strict=True)]
        await self.index.upsert(points)
        if before is not None and not await self.store.get_groups(command.resource_id, [command.segment_id]):
            # a purge removed (or rewrote) the group while it was read and embedded: what was just written goes
            await self.index.delete_points(points)
            return 0
        if await self._erased(command):
            # the record was erased while its texts were read and embedded: the erase's sweep may have run before
            # this upsert, so what was just written is removed again (the erase wrote its ledger note first)
            await self.index.delete_points(points)
            log.info("segment %s of an erased record was indexed during its erase; its points are removed",
                     command.segment_id)
            return 0
        return len(points)

    async def _erased(self, command: IndexForRecall) -> bool:
        """The record's incarnation that asked for this indexing was erased (``core.erasure``)."""
        through = await self.store.erased_through(record_digest(command.record_key))
        return through is not None and command.epoch <= through

    async def erase(self, resource_id: str, thread_id: str | None = None) -> tuple[int, int]:
        """Delete every point of a resource, or of one of its threads: (points removed, points found after)."""
        if self.index is None:
            return 0, 0
        removed = await self.index.erase(resource_id, thread_id)
        return removed, await self.index.count(resource_id, thread_id)

    async def expire(self, command: ExpireIndex) -> int:
        """A retention purge's side of the index: the record's points past the cutoff, and those of the groups it
        removed or rewrote; how many went."""
        if self.index is None:
            return 0
        return await self.index.expire(command.resource_id, command.record_key, command.before, command.source_ids)

    def _now(self) -> int:
        return self.retention.now_ms() if self.retention is not None else int(time.time() * 1000)

    async def _messages_in(self, resource_id: str, item: MessageRange, cap: int = 2_000) -> list[StoredMessage]:
        first = await self.store.get_message(resource_id, item.first_message_id)
        last = await self.store.get_message(resource_id, item.last_message_id)
        if first is None:
            return []
        if last is None or last.message.message_id == first.message.message_id:
            return [first]
        inner: list[StoredMessage] = []
        position = first.position
        while len(inner) < cap:
            page = await self.store.list_thread_messages(resource_id, item.thread_id, limit=_BATCH, after=position,
                                                         before=last.position)
            inner += page.messages
            if not page.has_more or not page.messages:
                break
            position = page.messages[-1].position
        return [first, *inner[:cap], last]

    async def forget(self, resource_id: str, record_key: str) -> None:
        """Drop a record's points from the index (after ``clear``)."""
        if self.index is not None:
            await self.index.delete_record(resource_id, record_key)


def _shown(stored: StoredMessage, part_type: PartType | None, tool_name: str | None, author: str | None) -> bool:
    """A message a page shows: one of its parts passes the part filters, and it is the author's if one is asked."""
    if author is not None and not stored.message.written_by(author):
        return False
    return bool(visible_parts(stored.message, part_type, tool_name))


def _with_vector(point: RecallPoint, vector: Sequence[float]) -> RecallPoint:
    return replace(point, vector=tuple(vector))

