"""Model-call results and their leases on the SQLite store (``ports.CycleResults``): one row per request key, its
result and its lease expiring apart; ``expires_at`` is the later of the two, when the row holds nothing live. A
claim is one ``BEGIN IMMEDIATE`` transaction, so claims race safely across processes, and every result or lease
write also deletes a few rows that hold nothing live any more. A result row names the record that asked
(``record_key``), so an erase of the record removes its results (``sqlite_erasure``).

Wall-clock expiry (not monotonic): a file database is shared by every process that opens it. Functions of one
connection, each run as one transaction by the store.
"""

from __future__ import annotations

import sqlite3
import time

__all__ = ["claim", "drop_result", "get_result", "put_result"]

_PRUNE_BATCH = 64  # expired result rows deleted per write: an indexed range, so a write never pays for a backlog


def get_result(conn: sqlite3.Connection, key: str) -> bytes | None:
    row = conn.execute("SELECT payload FROM cycle_results WHERE request_key = ? AND payload IS NOT NULL"
                       " AND result_expires_at > ?", (key, time.time())).fetchone()
    return bytes(row[0]) if row else None


def put_result(conn: sqlite3.Connection, key: str, payload: bytes, record_key: str, ttl_s: float) -> None:
    now = time.time()
    until = now + ttl_s
    conn.execute(
        "INSERT INTO cycle_results (request_key, payload, result_expires_at, owner, lease_expires_at, expires_at,"
        " record_key) VALUES (?, ?, ?, NULL, 0, ?, ?) ON CONFLICT (request_key) DO UPDATE SET"
        " payload = excluded.payload, result_expires_at = excluded.result_expires_at,"
        " expires_at = max(excluded.expires_at, cycle_results.lease_expires_at), record_key = excluded.record_key",
        (key, payload, until, until, record_key))
    _prune(conn, now)


def drop_result(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("DELETE FROM cycle_results WHERE request_key = ?", (key,))


def claim(conn: sqlite3.Connection, key: str, owner: str, lease_s: float) -> str | None:
    now = time.time()
    row = conn.execute("SELECT owner, lease_expires_at FROM cycle_results WHERE request_key = ?", (key,)).fetchone()
    if row is not None and row[0] is not None and row[0] != owner and row[1] > now:
        return str(row[0])
    until = now + lease_s
    conn.execute(
        "INSERT INTO cycle_results (request_key, owner, lease_expires_at, expires_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (request_key) DO UPDATE SET owner = excluded.owner,"
        " lease_expires_at = excluded.lease_expires_at,"
        " expires_at = max(cycle_results.result_expires_at, excluded.lease_expires_at)",
        (key, owner, until, until))
    _prune(conn, now)
    return None


def _prune(conn: sqlite3.Connection, now: float) -> None:
    conn.execute("DELETE FROM cycle_results WHERE request_key IN (SELECT request_key FROM cycle_results"
                 " WHERE expires_at <= ? LIMIT ?)", (now, _PRUNE_BATCH))
