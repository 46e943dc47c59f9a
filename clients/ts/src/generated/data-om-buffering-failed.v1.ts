/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-buffering-failed/v1: topic om.events (output; key = thread id; ce_type = data-om-buffering-failed).
 */
export interface BufferingFailedEvent {
  recordId: string;
  threadId: string;
  cycleId: string;
  operationType: "observation" | "reflection";
  failedAt: string;
  durationMs: number;
  tokensAttempted: number;
  error: string;
  observations?: string | null;
}
