/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-observation-end/v1: topic om.events (output; key = thread id; ce_type = data-om-observation-end).
 */
export interface ObservationEndEvent {
  recordId: string;
  threadId: string;
  cycleId: string;
  operationType: "observation" | "reflection";
  completedAt: string;
  durationMs: number;
  tokensObserved: number;
  observationTokens: number;
  observations: string;
  currentTask?: string | null;
  suggestedResponse?: string | null;
  extractedValues?: {
    [k: string]: unknown | undefined;
  } | null;
  extractionFailures?: ExtractionFailure[] | null;
  /**
   * set when the offline model observed instead
   */
  fallbackModel?: string | null;
}
export interface ExtractionFailure {
  slug: string;
  error: string;
}
