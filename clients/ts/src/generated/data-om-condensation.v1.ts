/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-condensation/v1: topic om.events (output; key = thread id; ce_type = data-om-condensation).
 *
 * om-stream addition: the engine condensed the observation log itself, without a model, to keep it within its
 * bound (``reflection.observationTokens`` x ``reflection.blockAfter``). The folded observations' conversation
 * stays in the content store, where the recall tool reaches it.
 */
export interface CondensationEvent {
  recordId: string;
  threadId: string;
  /**
   * the reflection cycle whose answer was condensed; null when a context was condensed as it was rendered
   */
  cycleId?: string | null;
  condensedAt: string;
  /**
   * over_target: the Reflector's best answer was not under its target; unusable / failed: the offline Reflector's answers were unusable, or its call failed; context_over_bound: a context was published while the log was over its bound (a reflection still running or failed), so it was condensed as rendered
   */
  reason: "over_target" | "unusable" | "failed" | "context_over_bound";
  /**
   * tokens of what was condensed (for context_over_bound: the whole log)
   */
  tokensBefore: number;
  /**
   * tokens of the condensed text (null for context_over_bound)
   */
  tokensAfter?: number | null;
  /**
   * the target it had to come under: the Reflector's target, or the bound
   */
  targetTokens: number;
  /**
   * observation entries folded under the marker line (null for context_over_bound: counted as rendered)
   */
  observationsFolded?: number | null;
}
