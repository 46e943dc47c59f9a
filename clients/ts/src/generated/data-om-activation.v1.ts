/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-activation/v1: topic om.events (output; key = thread id; ce_type = data-om-activation).
 */
export interface ActivationEvent {
  recordId: string;
  threadId: string;
  cycleId: string;
  operationType: "observation" | "reflection";
  activatedAt: string;
  chunksActivated: number;
  tokensActivated: number;
  observationTokens: number;
  messagesActivated: number;
  generationCount: number;
  observations: string;
  triggeredBy: "threshold" | "ttl" | "provider_change" | "manual";
  bufferCycleIds: string[];
  lastActivityAt?: number | null;
  ttlExpiredMs?: number | null;
  previousModel?: string | null;
  currentModel?: string | null;
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
