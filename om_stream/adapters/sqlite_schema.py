"""The SQLite store's schema: each entry of ``MIGRATIONS`` is one version, applied in order by the connection
(``PRAGMA user_version`` counts those applied; ``sqlite_connection``). An embedded database belongs to the process
that opens it, so there is no separate migrate step: the store creates or upgrades its file when it opens it."""

from __future__ import annotations

from om_stream.adapters import sqlite_erasure, sqlite_retention

__all__ = ["MIGRATIONS"]

# Each entry is one schema version; a database at user_version N gets entries N.. applied, in one transaction each.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE messages (
        resource_id TEXT NOT NULL, message_id TEXT NOT NULL, thread_id TEXT NOT NULL, record_key TEXT NOT NULL,
        created_at INTEGER NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, tokens INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (resource_id, message_id));
    CREATE INDEX messages_by_thread ON messages (resource_id, thread_id, created_at, seq, message_id);
    CREATE INDEX messages_by_id ON messages (message_id);
    CREATE TABLE resource_threads (
        resource_id TEXT NOT NULL, thread_id TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
        PRIMARY KEY (resource_id, thread_id));
    CREATE INDEX resource_threads_by_update ON resource_threads (resource_id, updated_at DESC, thread_id);
    CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY, resource_id TEXT, title TEXT, current_task TEXT, suggested_response TEXT,
        extracted TEXT NOT NULL DEFAULT '{}', last_observed_message_id TEXT);
    CREATE TABLE records (record_key TEXT PRIMARY KEY, resource_id TEXT NOT NULL, epoch INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE segments (
        segment_id TEXT PRIMARY KEY, record_key TEXT NOT NULL, resource_id TEXT NOT NULL, kind TEXT NOT NULL,
        status TEXT NOT NULL, generation INTEGER NOT NULL, text TEXT NOT NULL, tokens INTEGER NOT NULL,
        cycle_id TEXT NOT NULL, thread_ids TEXT NOT NULL, first_message_id TEXT NOT NULL,
        last_message_id TEXT NOT NULL, message_ids TEXT NOT NULL, message_tokens INTEGER NOT NULL,
        boundary_at INTEGER NOT NULL, created_at INTEGER NOT NULL, generations TEXT NOT NULL,
        ranges TEXT NOT NULL, replaced TEXT NOT NULL);
    CREATE INDEX segments_by_record ON segments (record_key, created_at, segment_id);
    CREATE TABLE generations (
        record_key TEXT NOT NULL, generation INTEGER NOT NULL, segment_ids TEXT NOT NULL, reflection_id TEXT NOT NULL,
        replaced_segment_ids TEXT NOT NULL, observation_tokens INTEGER NOT NULL,
        PRIMARY KEY (record_key, generation));
    """,
    # model-call results and the leases of calls in flight (ports.CycleResults): one row per request key, its
    # result and its lease expiring apart; expires_at is the later of the two, when the row holds nothing live
    """
    CREATE TABLE cycle_results (
        request_key TEXT PRIMARY KEY, payload BLOB, result_expires_at REAL NOT NULL DEFAULT 0, owner TEXT,
        lease_expires_at REAL NOT NULL DEFAULT 0, expires_at REAL NOT NULL);
    CREATE INDEX cycle_results_by_expiry ON cycle_results (expires_at);
    """,
    # the thread's working memory (observation.manageWorkingMemory), as JSON: markdown text or an object
    """
    ALTER TABLE threads ADD COLUMN working_memory TEXT;
    """,
    sqlite_erasure.MIGRATION,
    sqlite_retention.MIGRATION,
)
