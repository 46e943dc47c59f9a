/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-temporal-marker/v1: topic om.events (output; key = thread id; ce_type = data-om-temporal-marker).
 *
 * The gap reminder inserted before a user message when ``temporalMarkers`` is on.
 */
export interface TemporalMarkerEvent {
  recordId: string;
  threadId: string;
  messageId: string;
  precedesMessageId: string;
  gapMs: number;
  gapText: string;
  text: string;
}
