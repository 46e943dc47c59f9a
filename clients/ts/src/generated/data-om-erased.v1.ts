/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-erased/v1: topic om.events (output; key = thread id for an erase of a thread, resource id for an erase of a resource; ce_type = data-om-erased).
 *
 * om-stream addition: the receipt of an erase (``om.commands`` ``erase``, ``DELETE /v1/threads/{id}`` or
 * ``/v1/resources/{id}``, ``Memory.erase``). Published once every part is done, the recall index is swept and
 * the stores were read back; keyed by the erased subject (the thread id, or the resource id). Never content.
 */
export interface ErasedEvent {
  recordId: string;
  /**
   * the thread erased (scope thread); null when a whole resource was erased
   */
  threadId?: string | null;
  /**
   * the erase command's id
   */
  eraseId: string;
  scope: "thread" | "resource";
  /**
   * the resource erased, or the erased thread's resource when it was known
   */
  resourceId?: string | null;
  /**
   * false: nothing of the subject was held (erasing it again, or an unknown id, succeeds and says so)
   */
  found: boolean;
  removed: ErasedCounts;
  /**
   * when the erase was requested (ISO 8601, UTC)
   */
  requestedAt: string;
  /**
   * when the receipt was made: everything was removed and read back
   */
  completedAt: string;
  /**
   * the stores and the recall index were read back after the sweep and held nothing of the subject
   */
  verified: boolean;
  /**
   * partitions the erase ran on (a resource in thread scope: all of them)
   */
  parts: number;
}
/**
 * What an erase removed, per store (counts only, never content).
 */
export interface ErasedCounts {
  /**
   * stored messages
   */
  messages: number;
  /**
   * observation chunks, observations and reflections
   */
  observations: number;
  /**
   * reflection generations
   */
  generations: number;
  /**
   * thread records: title, hints, extracted values, working memory, the resource's thread listing
   */
  threads: number;
  /**
   * cached model outputs
   */
  cycleResults: number;
  /**
   * points of the recall index
   */
  recallPoints: number;
  /**
   * records of the state table (a tombstone in its changelog)
   */
  stateRecords: number;
  /**
   * tombstones published on the context topic
   */
  contexts: number;
}
