/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-expired/v1: topic om.events (output; key = thread id, the record's primary thread in resource scope; ce_type = data-om-expired).
 *
 * om-stream addition: the receipt of a retention purge (``OM_LIFECYCLE_RETENTION_DAYS``, or a record's
 * ``retention_days`` override). Published when a record's purge has run, keyed by its thread (the primary one in
 * resource scope). What it counts is already unreadable before it: contexts, recall and events leave out what is
 * past the window as soon as it is. The recall index is purged by whoever holds it (counted in
 * ``om_expired_items_total{store="recall_points"}``). Never content.
 */
export interface ExpiredEvent {
  recordId: string;
  threadId: string;
  /**
   * the purge's id (deterministic: a purge replayed after a crash has the same)
   */
  expiryId: string;
  /**
   * the record's threads
   */
  threadIds: string[];
  /**
   * the window in force: the deployment's, or the record's shorter override
   */
  retentionDays: number;
  /**
   * ISO 8601, UTC: what was created (an observation entry: dated) before this is gone
   */
  cutoff: string;
  /**
   * when the purge ran (ISO 8601, UTC)
   */
  expiredAt: string;
  removed: ExpiredCounts;
  /**
   * when the record's next purge is due (null: nothing left that will expire)
   */
  nextPurgeAt?: string | null;
}
/**
 * What a retention purge removed, per store (counts only, never content).
 */
export interface ExpiredCounts {
  /**
   * stored messages created before the cutoff
   */
  messages: number;
  /**
   * observation segments removed whole (every entry, or every message they cover, past the window)
   */
  observations: number;
  /**
   * observation segments written again without their expired entries
   */
  rewritten: number;
  /**
   * observation entries (a line and its details) cut from the segments written again
   */
  entries: number;
  /**
   * threads whose derived metadata (title, hints, extracted values, working memory) went with their last message
   */
  threads: number;
  /**
   * cached model outputs
   */
  cycleResults: number;
}
