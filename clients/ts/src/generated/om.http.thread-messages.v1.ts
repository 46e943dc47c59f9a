/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.http.thread-messages/v1: GET /v1/threads/{id}/messages?from=<message id>&through=<message id>.
 *
 * ``GET /v1/threads/{id}/messages?from=&through=``: the thread's messages from ``from`` through ``through``,
 * in the order they reached the memory (a cursor's run, for a reader that does not hold it; the reader then
 * applies the cursor's ``expire_before`` and ``excluded`` as to any run it holds).
 */
export interface ThreadMessages {
  thread_id: string;
  messages: Message[];
}
export interface Message {
  message_id: string;
  thread_id: string;
  resource_id: string;
  role: "user" | "assistant" | "system" | "tool";
  created_at: string;
  parts: (TextPart | ImagePart | FilePart | ToolCallPart | ToolResultPart | ReasoningPart)[];
  model?: string | null;
  /**
   * The prompt-cache retention the actor asked of OpenAI on the call of `model` (`prompt_cache_retention`; the AI SDK's `providerOptions.openai.promptCacheRetention`). With `activateAfterIdle: 'auto'` and an OpenAI actor it sets the idle time: '24h' -> 1 h, 'in_memory' -> 5 min. Absent: the model's default.
   */
  prompt_cache_retention?: ("in_memory" | "24h") | null;
  metadata?: {
    [k: string]: unknown | undefined;
  } | null;
  /**
   * Who wrote the message, in a thread several people or agents write to. Absent: the thread's user (role user) or its assistant, as before.
   */
  author?: Author | null;
}
export interface TextPart {
  type: "text";
  text: string;
}
/**
 * An image by URL or inline base64 ``data``. Width/height/size help the token estimate when known.
 */
export interface ImagePart {
  type: "image";
  url?: string | null;
  data?: string | null;
  mime_type?: string;
  filename?: string | null;
  width?: number | null;
  height?: number | null;
  size_bytes?: number | null;
  detail?: ("low" | "high" | "auto") | null;
}
export interface FilePart {
  type: "file";
  url?: string | null;
  data?: string | null;
  mime_type?: string;
  filename?: string | null;
  size_bytes?: number | null;
}
export interface ToolCallPart {
  type: "tool-call";
  tool_call_id: string;
  tool_name: string;
  args?: unknown;
}
export interface ToolResultPart {
  type: "tool-result";
  tool_call_id: string;
  tool_name: string;
  result?: unknown;
  is_error?: boolean;
}
export interface ReasoningPart {
  type: "reasoning";
  text: string;
}
/**
 * Who wrote a message in a shared thread: a person of a support channel, a sub-agent of a supervisor.
 *
 * ``id`` is stable (the recall tool filters by it); ``name`` is what the Observer's transcript shows, the id
 * when there is none. Neither may hold a line break or another control character: the transcript prints the
 * name in a message's header line, and a name with a line break could write lines of its own there.
 */
export interface Author {
  /**
   * The author's stable id (a user id, an agent's name); the recall tool filters by it
   */
  id: string;
  /**
   * The name the Observer's transcript and observations use; the id when absent
   */
  name?: string | null;
  /**
   * human, agent or tool
   */
  kind: "human" | "agent" | "tool";
}
