/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-thread-update/v1: topic om.events (output; key = thread id; ce_type = data-om-thread-update).
 */
export interface ThreadUpdateEvent {
  recordId: string;
  threadId: string;
  cycleId: string;
  oldTitle?: string | null;
  newTitle: string;
  timestamp: string;
}
