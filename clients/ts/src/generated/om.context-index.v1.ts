/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.context-index/v1: topic om.context.index (output, compacted; key = thread id) with OM_CONTEXT_WIRE=v2: the thread's system blocks by digest.
 *
 * The thread's system blocks, in order, by digest. ``version``: the context version at which the list last
 * changed (never lower than the previous index's plus one), which the cursors name.
 */
export interface ContextIndex {
  schema: "om.context-index/v1";
  thread_id: string;
  version: number;
  blocks: string[];
}
