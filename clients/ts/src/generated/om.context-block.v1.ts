/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.context-block/v1: topic om.context.blocks (output, compacted; key = <thread id>/<digest>) with OM_CONTEXT_WIRE=v2: one system block.
 *
 * One system block's text, keyed ``<thread id>/<digest>``.
 */
export interface BlockRecord {
  schema: "om.context-block/v1";
  thread_id: string;
  digest: string;
  text: string;
}
