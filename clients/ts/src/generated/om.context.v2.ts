/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.context/v2: topic om.context (output, compacted; key = thread id) with OM_CONTEXT_WIRE=v2: a context by reference.
 *
 * One context by reference. A reader waits until it holds the index of version ``index_version`` and every
 * block it names, and the run of ``raw`` (its messages, the previous cursors' ``new_messages``, or
 * ``GET /v1/threads/{id}/messages?from=&through=``), then rebuilds the ``om.context/v1`` record.
 */
export interface ContextCursor {
  schema: "om.context/v2";
  thread_id: string;
  resource_id: string;
  version: number;
  generation: number;
  thread_title?: string | null;
  through_message_id: string | null;
  index_version: number;
  raw: MessageRun;
  /**
   * the messages that entered the run (or the pin) since the previous cursor, in run order; when they do not all follow the messages sent before, the whole pin and run
   */
  new_messages?: Message[];
  hints: ContextHints;
  tokens: ContextTokens;
  continuation?: string | null;
}
/**
 * The raw messages of a context: ``pinned_message_id`` first when set (the open turn's question, observed
 * but still raw), then the thread's messages from ``first_message_id`` through ``through_message_id`` in the
 * order they reached the memory, less those created before ``expire_before`` (the retention cutoff: a message
 * stamped out of order can expire inside the run) and the ``excluded`` ids; ``count`` of them. No raw message:
 * the ids null and the count 0.
 */
export interface MessageRun {
  first_message_id?: string | null;
  through_message_id?: string | null;
  count?: number;
  pinned_message_id?: string | null;
  /**
   * epoch milliseconds: run messages created before it are not in the context
   */
  expire_before?: number | null;
  excluded?: string[];
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
export interface ContextHints {
  current_task?: string | null;
  suggested_response?: string | null;
}
export interface ContextTokens {
  messages: number;
  observations: number;
}
