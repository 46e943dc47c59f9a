/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.export/v1: each line of an export (JSON Lines): om-stream export, GET /v1/resources/{id}/export; read by om-stream import.
 *
 * One line of an ``om.export/v1`` file.
 */
export type ExportLine =
  | HeaderLine
  | StateLine
  | ThreadLine
  | MessageLine
  | RecordLine
  | SegmentLine
  | GenerationLine
  | RecallPointLine
  | EndLine;

/**
 * The first line.
 */
export interface HeaderLine {
  type: "header";
  schema: "om.export/v1";
  resource_id: string;
  /**
   * The exporting deployment's scope: records are threads, or the resource
   */
  scope: "thread" | "resource";
  /**
   * The tokenizer the token counts were made with
   */
  token_encoding: string;
  exported_at: string;
  /**
   * What wrote the file (om-stream and its version)
   */
  generator: string;
}
/**
 * A record's control state, as its state table holds it.
 */
export interface StateLine {
  type: "state";
  record_key: string;
  /**
   * The record's state (RecordState.to_dict): ids, token counts, times, hints and overrides; no message or observation text
   */
  state: {
    [k: string]: unknown | undefined;
  };
}
export interface ThreadLine {
  type: "thread";
  thread_id: string;
  /**
   * Epoch ms of the thread's first message
   */
  created_at?: number | null;
  /**
   * Epoch ms of its newest message
   */
  updated_at?: number | null;
  title?: string | null;
  current_task?: string | null;
  suggested_response?: string | null;
  /**
   * Extracted values, by extractor slug
   */
  extracted?: {
    [k: string]: unknown | undefined;
  };
  last_observed_message_id?: string | null;
  /**
   * The working memory: markdown text, or an object
   */
  working_memory?: unknown;
}
export interface MessageLine {
  type: "message";
  /**
   * The record that took the message in (the thread, or the resource)
   */
  record_key: string;
  /**
   * Its place in that record's arrival order
   */
  seq: number;
  tokens: number;
  message: Message;
}
/**
 * The message: the fields of om.message/v1, without its schema tag
 */
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
export interface RecordLine {
  type: "record";
  record_key: string;
  /**
   * How many times its observations were cleared
   */
  epoch: number;
}
export interface SegmentLine {
  type: "segment";
  record_key: string;
  segment_id: string;
  kind: "observation" | "reflection";
  /**
   * The generation it was computed in
   */
  generation: number;
  text: string;
  tokens: number;
  cycle_id: string;
  thread_ids: string[];
  first_message_id: string;
  last_message_id: string;
  message_ids: string[];
  message_tokens: number;
  /**
   * Epoch ms of the newest message it covers
   */
  boundary_at: number;
  created_at: number;
  /**
   * The generations whose log holds it; empty: buffered
   */
  generations: number[];
  ranges: RangeItem[];
  /**
   * A committed reflection: the segments it condensed
   */
  replaced?: string[];
}
/**
 * A run of one thread's messages a segment covers (``first_seq``/``last_seq``: their record sequence
 * numbers, when known).
 */
export interface RangeItem {
  thread_id: string;
  first_message_id: string;
  last_message_id: string;
  first_seq?: number | null;
  last_seq?: number | null;
}
export interface GenerationLine {
  type: "generation";
  record_key: string;
  generation: number;
  /**
   * Its log: the reflection that started it, then the segments kept
   */
  segment_ids: string[];
  reflection_id: string;
  replaced_segment_ids: string[];
  observation_tokens: number;
}
/**
 * A point of the recall index without its vector: the chunk of text it was embedded from.
 */
export interface RecallPointLine {
  type: "recall-point";
  record_key: string;
  thread_id: string;
  kind: "message" | "group";
  /**
   * The message id, or the observation group (segment) id
   */
  source_id: string;
  chunk: number;
  text: string;
  observed_at: number;
  range?: string | null;
  cursor?: string | null;
  /**
   * A message's author, as a search by author matches it (its id and the name shown for it); absent: no author
   */
  author_keys?: string[] | null;
}
/**
 * The last line: how many lines of each type came before it.
 */
export interface EndLine {
  type: "end";
  counts: LineCounts;
  /**
   * Records whose state could not be read: their rows are exported, their memory is not
   */
  records_without_state?: string[];
}
/**
 * How many lines of each type an export holds.
 */
export interface LineCounts {
  states: number;
  threads: number;
  messages: number;
  records: number;
  segments: number;
  generations: number;
  recall_points: number;
}
