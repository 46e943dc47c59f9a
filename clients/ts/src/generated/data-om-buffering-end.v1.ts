/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-buffering-end/v1: topic om.events (output; key = thread id; ce_type = data-om-buffering-end).
 */
export interface BufferingEndEvent {
  recordId: string;
  threadId: string;
  cycleId: string;
  operationType: "observation" | "reflection";
  completedAt: string;
  durationMs: number;
  tokensBuffered: number;
  bufferedTokens: number;
  observations: string;
  extractedValues?: {
    [k: string]: unknown | undefined;
  } | null;
  extractionFailures?: ExtractionFailure[] | null;
}
export interface ExtractionFailure {
  slug: string;
  error: string;
}
