/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.http.command-accepted/v1: 202 answer of POST /v1/threads/{id}/observe|reflect|override.
 *
 * ``202`` answer to observe/reflect/override: the command was queued on the commands topic under
 * ``command_id``.
 */
export interface CommandAccepted {
  accepted: true;
  command_id: string;
}
