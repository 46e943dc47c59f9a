/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * data-om-status/v1: topic om.events (output; key = thread id; ce_type = data-om-status); GET /v1/threads/{id}/status.
 */
export interface StatusEvent {
  recordId: string;
  threadId: string;
  windows: _Windows;
  stepNumber: number;
  generationCount: number;
}
export interface _Windows {
  active: _ActiveWindows;
  buffered: _BufferedWindows;
}
export interface _ActiveWindows {
  messages: _Window;
  observations: _Window;
}
export interface _Window {
  tokens: number;
  threshold: number;
}
export interface _BufferedWindows {
  observations: _BufferedObservations;
  reflection: _BufferedReflection;
}
export interface _BufferedObservations {
  chunks: number;
  messageTokens: number;
  projectedMessageRemoval: number;
  observationTokens: number;
  status: "idle" | "running" | "complete";
}
export interface _BufferedReflection {
  inputObservationTokens: number;
  observationTokens: number;
  status: "idle" | "running" | "complete";
}
