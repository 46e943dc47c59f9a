"""Retention on the SQLite store (``ports.ExpiringStore``): what a record's purge reads, the purge itself, and each
record's own window. Functions of one connection, each run as one transaction by the store.

As for an erase (``sqlite_erasure``), removed means gone from the file: the connection runs with ``secure_delete``
on, and the store scrubs the file (``VACUUM``, then the WAL truncated) after a purge that removed anything. Every
removal is scoped by the tenant.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from om_stream.core.commands import ExpireStored, PersistRetention
from om_stream.core.retention import ExpiryCounts, SegmentText

__all__ = ["MIGRATION", "expire", "next_message_at", "put_retention", "retention_of", "segment_texts_of"]

# the store's fifth schema version: a record's own retention window
MIGRATION = """
    ALTER TABLE records ADD COLUMN retention_days INTEGER;
"""
_MAX_VARIABLES = 500


def _chunks(items: Sequence[str]) -> list[Sequence[str]]:
    return [items[i:i + _MAX_VARIABLES] for i in range(0, len(items), _MAX_VARIABLES)]


def _of_tenant(conn: sqlite3.Connection, record_key: str, resource_id: str) -> bool:
    row = conn.execute("SELECT resource_id FROM records WHERE record_key = ?", (record_key,)).fetchone()
    return row is None or not row[0] or row[0] == resource_id


def segment_texts_of(conn: sqlite3.Connection, record_key: str, resource_id: str) -> list[SegmentText]:
    if not _of_tenant(conn, record_key, resource_id):
        return []
    rows = conn.execute("SELECT segment_id, text, boundary_at FROM segments WHERE record_key = ? AND"
                        " resource_id IN (?, '')", (record_key, resource_id)).fetchall()
    return [SegmentText(str(r[0]), str(r[1]), int(r[2])) for r in rows]


def next_message_at(conn: sqlite3.Connection, resource_id: str, thread_ids: Sequence[str],
                    at_or_after: int) -> int | None:
    found: list[int] = []
    for chunk in _chunks(list(dict.fromkeys(thread_ids))):
        row = conn.execute(f"SELECT min(created_at) FROM messages WHERE resource_id = ? AND thread_id IN"
                           f" ({','.join('?' * len(chunk))}) AND created_at >= ?",
                           [resource_id, *chunk, at_or_after]).fetchone()
        if row is not None and row[0] is not None:
            found.append(int(row[0]))
    return min(found, default=None)


def expire(conn: sqlite3.Connection, command: ExpireStored) -> ExpiryCounts:
    if not _of_tenant(conn, command.record_key, command.resource_id):
        return ExpiryCounts()
    resource, threads = command.resource_id, list(dict.fromkeys(command.thread_ids))
    messages = 0
    for chunk in _chunks(threads):
        messages += conn.execute(f"DELETE FROM messages WHERE resource_id = ? AND thread_id IN"
                                 f" ({','.join('?' * len(chunk))}) AND created_at < ?",
                                 [resource, *chunk, command.before]).rowcount
    for thread_id in threads:
        # the listing's first-message time follows the oldest message left; a thread with none left is not listed
        left = conn.execute("SELECT min(created_at) FROM messages WHERE resource_id = ? AND thread_id = ?",
                            (resource, thread_id)).fetchone()[0]
        if left is None:
            conn.execute("DELETE FROM resource_threads WHERE resource_id = ? AND thread_id = ?", (resource, thread_id))
        else:
            conn.execute("UPDATE resource_threads SET created_at = max(created_at, ?) WHERE resource_id = ? AND"
                         " thread_id = ?", (left, resource, thread_id))
    rewritten = 0
    for rewrite in command.rewrites:
        rewritten += conn.execute(
            "INSERT INTO segments (segment_id, record_key, resource_id, kind, status, generation, text, tokens,"
            " cycle_id, thread_ids, first_message_id, last_message_id, message_ids, message_tokens, boundary_at,"
            " created_at, generations, ranges, replaced) SELECT ?, record_key, resource_id, kind, status, generation,"
            " ?, ?, cycle_id, thread_ids, first_message_id, last_message_id, message_ids, message_tokens,"
            " boundary_at, created_at, generations, ranges, replaced FROM segments WHERE segment_id = ? AND"
            " record_key = ? AND NOT EXISTS (SELECT 1 FROM segments WHERE segment_id = ?)",
            (rewrite.new_id, rewrite.text, rewrite.tokens, rewrite.old_id, command.record_key,
             rewrite.new_id)).rowcount
        conn.execute("DELETE FROM segments WHERE segment_id = ? AND record_key = ?", (rewrite.old_id,
                                                                                     command.record_key))
    observations = 0
    for chunk in _chunks(list(command.deletes)):
        observations += conn.execute(f"DELETE FROM segments WHERE record_key = ? AND segment_id IN"
                                     f" ({','.join('?' * len(chunk))})", [command.record_key, *chunk]).rowcount
    metadata = 0
    for thread_id in command.threads:
        metadata += conn.execute("DELETE FROM threads WHERE thread_id = ? AND (resource_id = ? OR resource_id IS"
                                 " NULL)", (thread_id, resource)).rowcount
    keep = tuple(f"{cycle}#" for cycle in command.keep_cycles)
    keys = [str(r[0]) for r in conn.execute("SELECT request_key FROM cycle_results WHERE record_key = ?",
                                            (command.record_key,)) if not (keep and str(r[0]).startswith(keep))]
    results = 0
    for key in keys:
        results += conn.execute("DELETE FROM cycle_results WHERE request_key = ? AND payload IS NOT NULL",
                                (key,)).rowcount
    return ExpiryCounts(messages=messages, observations=observations, rewritten=rewritten, threads=metadata,
                        cycle_results=results)


def put_retention(conn: sqlite3.Connection, command: PersistRetention) -> None:
    conn.execute("INSERT INTO records (record_key, resource_id, retention_days) VALUES (?, ?, ?) ON CONFLICT"
                 " (record_key) DO UPDATE SET retention_days = excluded.retention_days",
                 (command.record_key, command.resource_id, command.days))


def retention_of(conn: sqlite3.Connection, record_key: str) -> int | None:
    row = conn.execute("SELECT retention_days FROM records WHERE record_key = ?", (record_key,)).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else None
