/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-observation-failed/v1: topic om.events (output; key = thread id; ce_type = data-om-observation-failed).
 */
export interface ObservationFailedEvent {
  recordId: string;
  threadId: string;
  cycleId: string;
  operationType: "observation" | "reflection";
  failedAt: string;
  durationMs: number;
  tokensAttempted: number;
  error: string;
  observations?: string | null;
  /**
   * what om-stream does next (retry, offline fallback, ...)
   */
  nextAction?: string | null;
}
