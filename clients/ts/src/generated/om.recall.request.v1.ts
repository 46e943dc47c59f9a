/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.recall.request/v1: topic om.recall.requests (input; key = resource id).
 *
 * A recall call on behalf of an agent. ``resource_id`` is the tenant: nothing of another resource is ever
 * returned. ``thread_id`` is the agent's current thread (what ``threadId: "current"`` means).
 */
export interface RecallRequest {
  schema: "om.recall.request/v1";
  correlation_id: string;
  resource_id: string;
  thread_id?: string | null;
  retrieval?: RetrievalConfig;
  arguments?: RecallArguments;
}
export interface RetrievalConfig {
  vector?: boolean;
  scope?: "thread" | "resource";
  instructions?: string | null;
}
/**
 * One call of the recall tool. Unknown arguments are refused (a typo must not silently widen a query).
 */
export interface RecallArguments {
  mode?: "messages" | "threads" | "search";
  query?: string | null;
  cursor?: string | null;
  threadId?: string | null;
  anchor?: "start" | "end";
  page?: number | null;
  limit?: number | null;
  detail?: "low" | "high";
  partType?: ("text" | "tool-call" | "tool-result" | "reasoning" | "image" | "file") | null;
  toolName?: string | null;
  partIndex?: number | null;
  charOffset?: number | null;
  before?: string | null;
  after?: string | null;
  author?: string | null;
}
