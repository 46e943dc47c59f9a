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
  /**
   * the thread's progress; only in the answer of GET /v1/threads/{id}/status, never on the events topic
   */
  progress?: ProgressEvent | null;
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
/**
 * om-stream addition: how far a thread's memory has caught up. Published when it changes (an observation
 * landing, an activation, a cycle starting or ending, a retry or idle activation becoming due or done; a message
 * taken in does not by itself: its context says so), at most once per thread per batch, and in answer to an
 * ``om.commands`` ``progress`` command (with that command's id and the message asked about).
 */
export interface ProgressEvent {
  recordId: string;
  threadId: string;
  /**
   * the thread's newest message taken in
   */
  latestMessage?: MessageMark | null;
  /**
   * the newest message of the thread the active observation log covers (every one before it too)
   */
  observedThrough?: MessageMark | null;
  /**
   * memory has settled through this message: latestMessage when nothing is pending, else observedThrough
   */
  settledThrough?: MessageMark | null;
  unobserved: UnobservedMessages;
  /**
   * chunks covering the thread's messages, waiting for activation
   */
  buffered: BufferedChunk[];
  /**
   * Observer and Reflector calls involving the thread
   */
  inFlight: RunningCycle[];
  /**
   * timers of the record that will observe or activate without new input
   */
  waitingFor: ("idle-activation" | "buffering-retry" | "observation-retry")[];
  /**
   * something in flight or scheduled may still observe the thread's unobserved messages without new input
   */
  pending: boolean;
  generationCount: number;
  /**
   * the id of the progress command this event answers
   */
  requestId?: string | null;
  /**
   * the message the progress command (or the HTTP call) asked about
   */
  through?: ThroughMessage | null;
}
/**
 * A message of the thread and its place in the record: ``seq`` numbers the record's messages in arrival
 * order (temporal markers included), so every message of a thread up to ``seq`` is at or before it.
 */
export interface MessageMark {
  /**
   * null when the record does not name it: in resource scope a log segment covering several threads names only its newest message
   */
  messageId?: string | null;
  seq: number;
}
/**
 * the thread's messages no observation in the log covers
 */
export interface UnobservedMessages {
  messages: number;
  tokens: number;
}
/**
 * An observation chunk computed in the background, waiting for activation (its messages stay unobserved).
 */
export interface BufferedChunk {
  cycleId: string;
  firstMessageId: string;
  lastMessageId: string;
  firstSeq: number;
  lastSeq: number;
  messages: number;
  messageTokens: number;
  observationTokens: number;
}
/**
 * An Observer or Reflector call in flight.
 */
export interface RunningCycle {
  cycleId: string;
  kind: "buffer" | "sync" | "manual";
  operationType: "observation" | "reflection";
  attempt: number;
  startedAt: string;
  /**
   * observation: message tokens it covers; reflection: log tokens it condenses
   */
  tokens: number;
  /**
   * messages it covers (0 for a reflection)
   */
  messages: number;
  firstMessageId?: string | null;
  lastMessageId?: string | null;
  /**
   * contexts wait for it
   */
  blocking: boolean;
}
/**
 * Where one message stands, and whether memory has settled through it (see ``core/progress.py``).
 */
export interface ThroughMessage {
  /**
   * null: the thread has no message yet
   */
  messageId?: string | null;
  /**
   * null when the record does not name it (observed long ago)
   */
  seq?: number | null;
  /**
   * unknown: not ingested (yet); unobserved: nothing covers it yet; observing: an observation in flight covers it; buffered: a buffered chunk covers it, waiting for activation; observed: the active observation log covers it
   */
  status: "unknown" | "unobserved" | "observing" | "buffered" | "observed";
  /**
   * observed, or nothing pending would observe it without new input
   */
  settled: boolean;
}
