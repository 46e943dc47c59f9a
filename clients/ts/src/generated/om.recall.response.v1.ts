/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.recall.response/v1: topic om.recall.responses (output; key = resource id).
 *
 * Exactly one of ``result`` and ``error``.
 */
export interface RecallResponse {
  schema: "om.recall.response/v1";
  correlation_id: string;
  result?: (RecallMessagesResult | RecallThreadsResult | RecallSearchResult) | null;
  error?: RecallFailure | null;
}
export interface RecallMessagesResult {
  mode: "messages";
  messages: string;
  count: number;
  cursor: string;
  page: number;
  limit: number;
  detail: "low" | "high";
  hasNextPage: boolean;
  hasPrevPage: boolean;
  truncated?: true | null;
  tokenOffset?: number | null;
  threadId?: string | null;
  partIndex?: number | null;
  nextCharOffset?: number | null;
  note?: string | null;
}
export interface RecallThreadsResult {
  mode: "threads";
  threads: string;
  count: number;
  page: number;
  hasMore: boolean;
  truncated?: true | null;
  tokenOffset?: number | null;
}
export interface RecallSearchResult {
  mode: "search";
  results: string;
  count: number;
  truncated?: true | null;
  tokenOffset?: number | null;
}
/**
 * Why a call was not answered: ``invalid_request`` (the agent can fix the call; ``message`` says how),
 * ``unavailable`` (the store, index or embedder failed: retry later).
 */
export interface RecallFailure {
  code: "invalid_request" | "unavailable";
  message: string;
}
