/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-activation/v1: topic om.events (output; key = thread id; ce_type = data-om-activation).
 *
 * One buffered chunk (or the buffered reflection) moved into the active log: one event per chunk, under the
 * ``cycleId`` of the buffering cycle that produced it, so a client pairs it with that cycle's
 * ``data-om-buffering-start`` and ``-end``.
 */
export interface ActivationEvent {
  recordId: string;
  threadId: string;
  /**
   * the cycleId of the buffering cycle that produced the activated content
   */
  cycleId: string;
  operationType: "observation" | "reflection";
  activatedAt: string;
  /**
   * always 1: each activated chunk has an event of its own
   */
  chunksActivated: number;
  /**
   * observation: message tokens the chunk removes from the context; reflection: log tokens it replaces
   */
  tokensActivated: number;
  /**
   * observation: tokens of the chunk; reflection: log tokens after
   */
  observationTokens: number;
  messagesActivated: number;
  generationCount: number;
  observations: string;
  triggeredBy: "threshold" | "ttl" | "provider_change" | "manual";
  /**
   * om-stream addition: the buffering cycleId again (one entry)
   */
  bufferCycleIds: string[];
  /**
   * ttl only: time of the last activity (the newest assistant message), epoch milliseconds
   */
  lastActivityAt?: number | null;
  /**
   * ttl only: milliseconds since the last activity (as the reference reports it), not the excess over the idle time
   */
  ttlExpiredMs?: number | null;
  previousModel?: string | null;
  currentModel?: string | null;
  config: MarkerConfig;
}
/**
 * thresholds in force; when a ttl trigger activates observations, activateAfterIdle is the idle time it resolved to, in milliseconds (also for 'auto')
 */
export interface MarkerConfig {
  messageTokens: number;
  observationTokens: number;
  scope: "thread" | "resource";
  activateAfterIdle?: number | "auto" | null;
}
