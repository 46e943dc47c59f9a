"""Erasure on the SQLite store: removing a subject's rows for good, reading back that none is left, and the
erasure ledger (``ports.ErasableStore``). Functions of one connection, each run as one transaction by the store.

"For good" on SQLite means more than ``DELETE``: a deleted row's bytes stay in the freed page, and in the WAL,
until they are overwritten. The store's connection runs with ``secure_delete`` on (SQLite overwrites what it
deletes with zeros), and after an erase the store checkpoints and truncates the WAL
(``SqliteConnection.scrub``), so the file holds no copy of the erased text afterwards.

Every removal is scoped by the tenant: thread and record keys are the agents' ids, so a row is removed only when
it belongs to the resource erased.
"""

from __future__ import annotations

import json
import sqlite3
import time

from om_stream.core.erasure import ErasureCounts, PartRecord, StrayWrites

__all__ = ["MIGRATION", "erase_record", "erase_resource", "erase_thread", "erase_writes", "erased_through",
           "erasure_part",
           "holds", "mark_erased", "put_erasure_part", "resource_of"]

# the store's fourth schema version: results by the record that asked, and the ledger
MIGRATION = """
    ALTER TABLE cycle_results ADD COLUMN record_key TEXT;
    CREATE INDEX cycle_results_by_record ON cycle_results (record_key);
    CREATE TABLE erasure_parts (
        erase_id TEXT NOT NULL, part INTEGER NOT NULL, offsets TEXT NOT NULL, counts TEXT, found INTEGER NOT NULL,
        completed_at INTEGER, expires_at REAL NOT NULL, PRIMARY KEY (erase_id, part));
    CREATE TABLE erased_records (record_digest TEXT PRIMARY KEY, epoch_through INTEGER NOT NULL,
        expires_at REAL NOT NULL);
"""


def erase_thread(conn: sqlite3.Connection, resource_id: str, thread_id: str) -> ErasureCounts:
    messages = conn.execute("DELETE FROM messages WHERE resource_id = ? AND thread_id = ?",
                            (resource_id, thread_id)).rowcount
    listed = conn.execute("DELETE FROM resource_threads WHERE resource_id = ? AND thread_id = ?",
                          (resource_id, thread_id)).rowcount
    metadata = conn.execute("DELETE FROM threads WHERE thread_id = ? AND (resource_id = ? OR resource_id IS NULL)",
                            (thread_id, resource_id)).rowcount
    return ErasureCounts(messages=messages, threads=max(listed, metadata))


def _owner(conn: sqlite3.Connection, record_key: str) -> str:
    row = conn.execute("SELECT resource_id FROM records WHERE record_key = ?", (record_key,)).fetchone()
    if row is not None and row[0]:
        return str(row[0])
    row = conn.execute("SELECT resource_id FROM segments WHERE record_key = ? AND resource_id != '' LIMIT 1",
                       (record_key,)).fetchone()
    return str(row[0]) if row is not None else ""


def erase_record(conn: sqlite3.Connection, record_key: str, resource_id: str) -> ErasureCounts:
    owner = _owner(conn, record_key)
    if owner and owner != resource_id:
        return ErasureCounts()  # another tenant's record under the same key
    segments = conn.execute("DELETE FROM segments WHERE record_key = ?", (record_key,)).rowcount
    generations = conn.execute("DELETE FROM generations WHERE record_key = ?", (record_key,)).rowcount
    results = conn.execute("SELECT count(*) FROM cycle_results WHERE record_key = ? AND payload IS NOT NULL",
                           (record_key,)).fetchone()[0]
    conn.execute("DELETE FROM cycle_results WHERE record_key = ?", (record_key,))
    conn.execute("DELETE FROM records WHERE record_key = ?", (record_key,))
    return ErasureCounts(observations=segments, generations=generations, cycle_results=int(results))


def erase_writes(conn: sqlite3.Connection, writes: StrayWrites) -> ErasureCounts:
    resource_id = writes.resource_id
    threads = {row[0] for row in conn.execute(f"SELECT DISTINCT thread_id FROM messages WHERE resource_id = ? AND"
                                              f" message_id IN ({_marks(writes.message_ids)})",
                                              (resource_id, *writes.message_ids))}
    messages = conn.execute(f"DELETE FROM messages WHERE resource_id = ? AND message_id IN"
                            f" ({_marks(writes.message_ids)})", (resource_id, *writes.message_ids)).rowcount
    for thread_id in threads:  # a thread left with no message is not listed any more
        conn.execute("DELETE FROM resource_threads WHERE resource_id = ? AND thread_id = ? AND NOT EXISTS"
                     " (SELECT 1 FROM messages WHERE resource_id = ? AND thread_id = ?)",
                     (resource_id, thread_id, resource_id, thread_id))
    segments = generations = 0
    owner = _owner(conn, writes.record_key)
    if not owner or owner == resource_id:  # not another tenant's record under the same key
        segments = conn.execute(f"DELETE FROM segments WHERE record_key = ? AND resource_id = ? AND segment_id IN"
                                f" ({_marks(writes.segment_ids)})",
                                (writes.record_key, resource_id, *writes.segment_ids)).rowcount
        generations = conn.execute(f"DELETE FROM generations WHERE record_key = ? AND generation IN"
                                   f" ({_marks(writes.generations)})",
                                   (writes.record_key, *writes.generations)).rowcount
    metadata = conn.execute(f"DELETE FROM threads WHERE thread_id IN ({_marks(writes.thread_ids)}) AND"
                            " (resource_id = ? OR resource_id IS NULL)", (*writes.thread_ids, resource_id)).rowcount
    return ErasureCounts(messages=messages, observations=segments, generations=generations, threads=metadata)


def _marks(values: tuple[object, ...]) -> str:
    return ", ".join("?" * len(values))


def erase_resource(conn: sqlite3.Connection, resource_id: str) -> ErasureCounts:
    threads = {row[0] for row in conn.execute(
        "SELECT thread_id FROM resource_threads WHERE resource_id = ? UNION SELECT thread_id FROM threads"
        " WHERE resource_id = ? UNION SELECT DISTINCT thread_id FROM messages WHERE resource_id = ?",
        (resource_id, resource_id, resource_id))}
    records = {row[0] for row in conn.execute(
        "SELECT record_key FROM records WHERE resource_id = ? UNION SELECT DISTINCT record_key FROM messages"
        " WHERE resource_id = ? UNION SELECT DISTINCT record_key FROM segments WHERE resource_id = ?",
        (resource_id, resource_id, resource_id))}
    counts = ErasureCounts()
    for thread_id in sorted(threads):
        counts += erase_thread(conn, resource_id, thread_id)
    for record_key in sorted(records):
        counts += erase_record(conn, record_key, resource_id)
    return counts


def resource_of(conn: sqlite3.Connection, record_key: str) -> str | None:
    owner = _owner(conn, record_key)
    if owner:
        return owner
    row = conn.execute("SELECT resource_id FROM threads WHERE thread_id = ? AND resource_id IS NOT NULL UNION"
                       " SELECT resource_id FROM messages WHERE thread_id = ? LIMIT 1",
                       (record_key, record_key)).fetchone()
    return str(row[0]) if row is not None else None


def holds(conn: sqlite3.Connection, resource_id: str, thread_id: str | None) -> bool:
    queries: list[tuple[str, tuple[str, ...]]]
    if thread_id is not None:
        queries = [("SELECT 1 FROM messages WHERE resource_id = ? AND thread_id = ? LIMIT 1", (resource_id, thread_id)),
                   ("SELECT 1 FROM resource_threads WHERE resource_id = ? AND thread_id = ?", (resource_id, thread_id)),
                   ("SELECT 1 FROM threads WHERE thread_id = ? AND resource_id = ?", (thread_id, resource_id))]
    else:
        queries = [("SELECT 1 FROM messages WHERE resource_id = ? LIMIT 1", (resource_id,)),
                   ("SELECT 1 FROM resource_threads WHERE resource_id = ? LIMIT 1", (resource_id,)),
                   ("SELECT 1 FROM threads WHERE resource_id = ? LIMIT 1", (resource_id,)),
                   ("SELECT 1 FROM segments WHERE resource_id = ? LIMIT 1", (resource_id,)),
                   ("SELECT 1 FROM records WHERE resource_id = ? LIMIT 1", (resource_id,))]
    return any(conn.execute(sql, params).fetchone() is not None for sql, params in queries)


# -- the ledger ------------------------------------------------------------------------------------------------------


def erasure_part(conn: sqlite3.Connection, erase_id: str, part: int) -> PartRecord | None:
    row = conn.execute("SELECT offsets, counts, found, completed_at FROM erasure_parts WHERE erase_id = ? AND"
                       " part = ? AND expires_at > ?", (erase_id, part, time.time())).fetchone()
    if row is None:
        return None
    offsets = tuple((int(p), int(o)) for p, o in json.loads(row[0]))
    counts = ErasureCounts.from_dict(json.loads(row[1])) if row[1] is not None else None
    return PartRecord(erase_id, part, offsets, counts, bool(row[2]), row[3])


def put_erasure_part(conn: sqlite3.Connection, record: PartRecord, ttl_s: int) -> None:
    now = time.time()
    conn.execute("DELETE FROM erasure_parts WHERE expires_at <= ?", (now,))
    conn.execute(
        "INSERT INTO erasure_parts (erase_id, part, offsets, counts, found, completed_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (erase_id, part) DO UPDATE SET offsets = excluded.offsets,"
        " counts = excluded.counts, found = excluded.found, completed_at = excluded.completed_at,"
        " expires_at = excluded.expires_at",
        (record.erase_id, record.part, json.dumps([list(o) for o in record.offsets]),
         None if record.counts is None else json.dumps(record.counts.as_dict()), int(record.found),
         record.completed_at, now + ttl_s))


def mark_erased(conn: sqlite3.Connection, record_digest: str, epoch_through: int, ttl_s: int) -> None:
    now = time.time()
    conn.execute("DELETE FROM erased_records WHERE expires_at <= ?", (now,))
    conn.execute(
        "INSERT INTO erased_records (record_digest, epoch_through, expires_at) VALUES (?, ?, ?)"
        " ON CONFLICT (record_digest) DO UPDATE SET epoch_through = max(epoch_through, excluded.epoch_through),"
        " expires_at = excluded.expires_at", (record_digest, epoch_through, now + ttl_s))


def erased_through(conn: sqlite3.Connection, record_digest: str) -> int | None:
    row = conn.execute("SELECT epoch_through FROM erased_records WHERE record_digest = ? AND expires_at > ?",
                       (record_digest, time.time())).fetchone()
    return int(row[0]) if row is not None else None
