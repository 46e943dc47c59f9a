"""Rendering of the recall tool's ``threads`` and ``search`` modes.

Threads::

    - **Trip to Porto** ← current
      id: thread-7
      updated: 2026-03-10 09:15:02Z | created: 2026-03-01 18:02:11Z

Search results are grouped by thread (the thread with the best hit first), each hit with its score, a preview and
the cursor id that opens the messages around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from om_stream.core.recall.records import RecallHit, ThreadSummary
from om_stream.core.recall.render import (
    RESULT_BUDGET_TOKENS,
    Budgeted,
    TokenCount,
    fit_budget,
    format_timestamp,
    truncate_tokens,
)

__all__ = ["NO_THREADS", "SEARCH_UNAVAILABLE", "SearchItem", "render_search", "render_threads"]

NO_THREADS = "No threads found matching the criteria."
NO_MATCHES = "No matching messages or observations found."
SEARCH_UNAVAILABLE = ('Search is not configured for this memory: mode="search" needs retrieval with vector: true and '
                      'a recall index. Use mode="threads" to list conversations and mode="messages" to read them.')
MESSAGE_PREVIEW_TOKENS = 80
GROUP_PREVIEW_TOKENS = 160


def _title(thread: ThreadSummary | None) -> str:
    return (thread.title if thread and thread.title else None) or "(untitled)"


def render_threads(threads: Sequence[ThreadSummary], current_thread_id: str | None, count: TokenCount,
                   budget: int = RESULT_BUDGET_TOKENS) -> Budgeted:
    if not threads:
        return Budgeted(NO_THREADS, False, 0)
    lines: list[str] = []
    for thread in threads:
        marker = " ← current" if thread.thread_id == current_thread_id else ""
        lines.append(f"- **{_title(thread)}**{marker}")
        lines.append(f"  id: {thread.thread_id}")
        lines.append(f"  updated: {format_timestamp(thread.updated_at)} | "
                     f"created: {format_timestamp(thread.created_at)}")
    return fit_budget("\n".join(lines), count, budget)


@dataclass(frozen=True)
class SearchItem:
    hit: RecallHit
    thread: ThreadSummary | None
    role: str | None = None  # message hits: who wrote it
    at: int | None = None  # message hits: when


def _preview(text: str, tokens: int, count: TokenCount) -> str:
    cut = truncate_tokens(" ".join(text.split()), tokens, count)
    shown = cut if len(cut) == len(" ".join(text.split())) else f"{cut.rstrip()}…"
    return shown or "(no text)"


def _hit_lines(item: SearchItem, count: TokenCount) -> list[str]:
    hit = item.hit
    if hit.kind == "message":
        who = f" from {item.role}" if item.role else ""
        when = f" at {format_timestamp(item.at)}" if item.at is not None else ""
        head = f'- score {hit.score:.2f} · message{who}{when} · cursor="{hit.source_id}"'
        return [head, f"  > {_preview(hit.text, MESSAGE_PREVIEW_TOKENS, count)}"]
    span = f" · raw messages (first:last) {hit.range}" if hit.range else ""
    cursor = f' · cursor="{hit.cursor}"' if hit.cursor else ""
    head = f"- score {hit.score:.2f} · observation group {hit.source_id}{span}{cursor}"
    return [head, f"  > {_preview(hit.text, GROUP_PREVIEW_TOKENS, count)}"]


def render_search(query: str, items: Sequence[SearchItem], current_thread_id: str | None, count: TokenCount,
                  budget: int = RESULT_BUDGET_TOKENS) -> Budgeted:
    """``items`` best first; they are shown grouped by thread, threads ordered by their best hit."""
    if not items:
        return Budgeted(NO_MATCHES, False, 0)
    by_thread: dict[str, list[SearchItem]] = {}
    for item in items:
        by_thread.setdefault(item.hit.thread_id, []).append(item)
    lines = [f'{len(items)} result(s) for "{query}", grouped by thread. To read the raw messages around a result, '
             'call recall with mode="messages", its cursor, and the threadId shown.']
    for thread_id, hits in by_thread.items():
        thread = hits[0].thread
        where = "Current thread" if thread_id == current_thread_id else "Another thread"
        lines.append("")
        lines.append(f'### {where}: "{_title(thread)}" (threadId: {thread_id})')
        if thread is not None:
            lines.append(f"updated: {format_timestamp(thread.updated_at)} | created: "
                         f"{format_timestamp(thread.created_at)}")
        for item in hits:
            lines.extend(_hit_lines(item, count))
    return fit_budget("\n".join(lines), count, budget)
