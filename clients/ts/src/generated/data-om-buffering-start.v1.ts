/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-buffering-start/v1: topic om.events (output; key = thread id; ce_type = data-om-buffering-start).
 */
export interface BufferingStartEvent {
  recordId: string;
  threadId: string;
  cycleId: string;
  operationType: "observation" | "reflection";
  startedAt: string;
  tokensToBuffer: number;
  threadIds: string[];
  config: MarkerConfig;
}
/**
 * ``ObservationMarkerConfig``: the thresholds in force when the event was produced.
 */
export interface MarkerConfig {
  messageTokens: number;
  observationTokens: number;
  scope: "thread" | "resource";
  activateAfterIdle?: number | "auto" | null;
}
