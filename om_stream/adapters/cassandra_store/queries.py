"""Every CQL statement the Cassandra store prepares, by name (tables: ``migrations/``).

Writes carry ``USING TTL ?`` (0: no expiry). The lightweight transactions (:data:`CAS`) are ``commit_generation``,
once per reflection, and the model-call leases, once or twice per model call: never one per message.
"""

from __future__ import annotations

__all__ = ["BUCKET_MS", "CAS", "READS", "WRITES", "thread_page"]

BUCKET_MS = 10 * 24 * 3600 * 1000  # a thread's messages are partitioned in 10-day buckets
# Cell timestamps for the first-message time of a thread: the earliest message must win last-write-wins, so its
# timestamp is the highest. Far above any real write time, which only ever writes this column through here.
CREATED_TS_BASE = 2**62

WRITES: dict[str, str] = {
    "put_message": (
        "INSERT INTO messages (resource_id, thread_id, bucket, created_at, seq, message_id, record_key, role, tokens,"
        " body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"),
    "put_message_by_id": (
        "INSERT INTO messages_by_id (message_id, resource_id, thread_id, bucket, created_at, seq, record_key, role,"
        " tokens, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"),
    "put_bucket": "INSERT INTO message_buckets (resource_id, thread_id, bucket) VALUES (?, ?, ?) USING TTL ?",
    "thread_updated": ("UPDATE resource_threads USING TIMESTAMP ? AND TTL ? SET updated_at = ?"
                       " WHERE resource_id = ? AND thread_id = ?"),
    "thread_created": ("UPDATE resource_threads USING TIMESTAMP ? AND TTL ? SET created_at = ?"
                       " WHERE resource_id = ? AND thread_id = ?"),
    "thread_title": "UPDATE resource_threads USING TTL ? SET title = ? WHERE resource_id = ? AND thread_id = ?",
    "thread_metadata": (
        "UPDATE threads USING TTL ? SET resource_id = ?, title = ?, current_task = ?, suggested_response = ?,"
        " last_observed_message_id = ?, extracted = extracted + ?, working_memory = ? WHERE thread_id = ?"),
    "record_resource": "UPDATE records SET resource_id = ? WHERE record_key = ?",
    "record_epoch": "UPDATE records USING TIMESTAMP ? SET epoch = ? WHERE record_key = ?",
    "put_observation": (
        "INSERT INTO segments (segment_id, record_key, resource_id, kind, generation, text, tokens, cycle_id,"
        " thread_ids, first_message_id, last_message_id, message_ids, message_tokens, boundary_at, created_at,"
        " ranges) VALUES (?, ?, ?, 'observation', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"),
    # a reflection's ranges are written by commit_generation only: a replayed put must not reset them
    "put_reflection": (
        "INSERT INTO segments (segment_id, record_key, resource_id, kind, generation, text, tokens, cycle_id,"
        " thread_ids, first_message_id, last_message_id, message_ids, message_tokens, boundary_at, created_at)"
        " VALUES (?, ?, ?, 'reflection', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"),
    "record_segment": "INSERT INTO record_segments (record_key, segment_id, created_at) VALUES (?, ?, ?) USING TTL ?",
    "segment_active": "UPDATE segments USING TTL ? SET generations = generations + ? WHERE segment_id = ?",
    "reflection_ranges": "UPDATE segments USING TTL ? SET ranges = ?, replaced = ? WHERE segment_id = ?",
    "commit_generation": (
        "INSERT INTO generations (record_key, epoch, generation, segment_ids, reflection_id, replaced_segment_ids,"
        " observation_tokens, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ?"),
    "delete_segment": "DELETE FROM segments WHERE segment_id = ?",
    "delete_record_segments": "DELETE FROM record_segments WHERE record_key = ?",
    "delete_generations": "DELETE FROM generations WHERE record_key = ? AND epoch = ?",
    "put_cycle_result": "INSERT INTO cycle_results (request_key, payload) VALUES (?, ?) USING TTL ?",
    "cycle_result_of_record": ("INSERT INTO cycle_results_by_record (record_key, request_key) VALUES (?, ?)"
                               " USING TTL ?"),
    "drop_cycle_result": "DELETE FROM cycle_results WHERE request_key = ?",
    # erasure (``erasure.py``): the conversation's tables are deleted at the present time; cells that were
    # written with a timestamp of their own (first/newest message times, the clear epoch) are deleted with exactly
    # that timestamp, so the tombstone removes what was written and nothing written afterwards
    "erase_bucket": "DELETE FROM messages WHERE resource_id = ? AND thread_id = ? AND bucket = ?",
    "erase_message_by_id": "DELETE FROM messages_by_id WHERE message_id = ? AND resource_id = ?",
    "erase_buckets": "DELETE FROM message_buckets WHERE resource_id = ? AND thread_id = ?",
    "erase_thread_created": ("DELETE created_at FROM resource_threads USING TIMESTAMP ?"
                             " WHERE resource_id = ? AND thread_id = ?"),
    "erase_thread_updated": ("DELETE updated_at FROM resource_threads USING TIMESTAMP ?"
                             " WHERE resource_id = ? AND thread_id = ?"),
    "erase_thread_title": "DELETE title FROM resource_threads WHERE resource_id = ? AND thread_id = ?",
    "erase_thread_metadata": "DELETE FROM threads WHERE thread_id = ?",
    # what a refused batch wrote of an erased record (``CassandraErasure.erase_writes``), row by row
    "erase_message": ("DELETE FROM messages WHERE resource_id = ? AND thread_id = ? AND bucket = ? AND created_at = ?"
                      " AND seq = ? AND message_id = ?"),
    "erase_generation": "DELETE FROM generations WHERE record_key = ? AND epoch = ? AND generation = ?",
    "erase_record_resource": "DELETE resource_id, retention_days FROM records WHERE record_key = ?",
    "erase_record_epoch": "DELETE epoch FROM records USING TIMESTAMP ? WHERE record_key = ?",
    "erase_record_results": "DELETE FROM cycle_results_by_record WHERE record_key = ?",
    "put_erasure_part": ("INSERT INTO erasure_parts (erase_id, part, offsets, counts, found, completed_at)"
                         " VALUES (?, ?, ?, ?, ?, ?) USING TTL ?"),
    "mark_erased": "UPDATE erased_records USING TIMESTAMP ? AND TTL ? SET epoch_through = ? WHERE record_digest = ?",
    # retention (``retention.py``): a thread's expired messages (whole buckets, or the part of one before the cutoff),
    # a segment copied under a new id, the rows of removed segments and results; a record's own window
    "expire_bucket_before": ("DELETE FROM messages WHERE resource_id = ? AND thread_id = ? AND bucket = ?"
                             " AND created_at < ?"),
    "expire_bucket_row": "DELETE FROM message_buckets WHERE resource_id = ? AND thread_id = ? AND bucket = ?",
    "copy_segment": (
        "INSERT INTO segments (segment_id, record_key, resource_id, kind, generation, text, tokens, cycle_id,"
        " thread_ids, first_message_id, last_message_id, message_ids, message_tokens, boundary_at, created_at,"
        " generations, ranges, replaced) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"),
    "expire_record_segment": "DELETE FROM record_segments WHERE record_key = ? AND segment_id = ?",
    "expire_record_result": "DELETE FROM cycle_results_by_record WHERE record_key = ? AND request_key = ?",
    "record_retention": "UPDATE records SET retention_days = ? WHERE record_key = ?",
    "take_lease": "INSERT INTO cycle_leases (request_key, owner) VALUES (?, ?) IF NOT EXISTS USING TTL ?",
    "renew_lease": "UPDATE cycle_leases USING TTL ? SET owner = ? WHERE request_key = ? IF owner = ?",
}
CAS = frozenset({"commit_generation", "take_lease", "renew_lease"})  # compare-and-set: not idempotent

_MESSAGE_COLUMNS = "resource_id, thread_id, record_key, seq, tokens, body"
_SEGMENT_COLUMNS = ("segment_id, record_key, resource_id, kind, generation, text, tokens, thread_ids, ranges,"
                    " boundary_at, created_at, generations, replaced")

READS: dict[str, str] = {
    "message_by_id": f"SELECT {_MESSAGE_COLUMNS} FROM messages_by_id WHERE message_id = ?",
    "message_of_resource": f"SELECT {_MESSAGE_COLUMNS} FROM messages_by_id WHERE message_id = ? AND resource_id = ?",
    "buckets": "SELECT bucket FROM message_buckets WHERE resource_id = ? AND thread_id = ?",
    "count_bucket": "SELECT count(*) FROM messages WHERE resource_id = ? AND thread_id = ? AND bucket = ?",
    "thread": ("SELECT thread_id, created_at, updated_at, title FROM resource_threads"
               " WHERE resource_id = ? AND thread_id = ?"),
    "threads": "SELECT thread_id, created_at, updated_at, title FROM resource_threads WHERE resource_id = ?",
    "thread_metadata_row": ("SELECT resource_id, title, current_task, suggested_response, extracted,"
                        " last_observed_message_id, working_memory FROM threads WHERE thread_id = ?"),
    "record": "SELECT resource_id, epoch FROM records WHERE record_key = ?",
    "segment": f"SELECT {_SEGMENT_COLUMNS} FROM segments WHERE segment_id = ?",
    "record_segments": "SELECT segment_id FROM record_segments WHERE record_key = ?",
    "generation": ("SELECT segment_ids, reflection_id, replaced_segment_ids, observation_tokens FROM generations"
                   " WHERE record_key = ? AND epoch = ? AND generation = ?"),
    "cycle_result": "SELECT payload FROM cycle_results WHERE request_key = ?",
    "bucket_message_ids": "SELECT message_id FROM messages WHERE resource_id = ? AND thread_id = ? AND bucket = ?",
    "thread_listing": ("SELECT writetime(created_at) AS created_ts, writetime(updated_at) AS updated_ts, title"
                       " FROM resource_threads WHERE resource_id = ? AND thread_id = ?"),
    "thread_owner": "SELECT resource_id FROM threads WHERE thread_id = ?",
    "message_place": ("SELECT thread_id, bucket, created_at, seq FROM messages_by_id WHERE message_id = ?"
                      " AND resource_id = ?"),
    "record_results": "SELECT request_key FROM cycle_results_by_record WHERE record_key = ?",
    "generations_of": "SELECT generation FROM generations WHERE record_key = ? AND epoch = ?",
    "resource_thread_ids": "SELECT thread_id FROM resource_threads WHERE resource_id = ?",
    "erasure_part": "SELECT offsets, counts, found, completed_at FROM erasure_parts WHERE erase_id = ? AND part = ?",
    "record_owner": "SELECT resource_id FROM records WHERE record_key = ?",
    "erased_through": "SELECT epoch_through FROM erased_records WHERE record_digest = ?",
    "bucket_ids_before": ("SELECT message_id FROM messages WHERE resource_id = ? AND thread_id = ? AND bucket = ?"
                          " AND created_at < ?"),
    "bucket_first_from": ("SELECT created_at FROM messages WHERE resource_id = ? AND thread_id = ? AND bucket = ?"
                          " AND created_at >= ? LIMIT 1"),
    "segment_row": ("SELECT segment_id, record_key, resource_id, kind, generation, text, tokens, cycle_id, thread_ids,"
                    " first_message_id, last_message_id, message_ids, message_tokens, boundary_at, created_at,"
                    " generations, ranges, replaced FROM segments WHERE segment_id = ?"),
    "record_retention_of": "SELECT retention_days FROM records WHERE record_key = ?",
    "migrations": "SELECT version, checksum FROM schema_migrations",
}


def thread_page(*, after: bool, before: bool, newest_first: bool) -> str:
    """One bucket of a thread, strictly between optional bounds, from the oldest or newest end."""
    sql = [f"SELECT {_MESSAGE_COLUMNS}, message_id FROM messages",
           "WHERE resource_id = ? AND thread_id = ? AND bucket = ?"]
    if after:
        sql.append("AND (created_at, seq, message_id) > (?, ?, ?)")
    if before:
        sql.append("AND (created_at, seq, message_id) < (?, ?, ?)")
    if newest_first:
        sql.append("ORDER BY created_at DESC, seq DESC, message_id DESC")
    sql.append("LIMIT ?")
    return " ".join(sql)
