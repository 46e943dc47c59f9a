/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.command/v1: topic om.commands (input; key = thread id).
 *
 * ``observe`` / ``reflect`` (optional ``guidance``) / ``override`` (threshold overrides) / ``clear``.
 */
export interface CommandRecord {
  schema: "om.command/v1";
  command_id: string;
  thread_id: string;
  resource_id?: string | null;
  command: "observe" | "reflect" | "override" | "clear";
  guidance?: string | null;
  message_tokens?: number | null;
  observation_tokens?: number | null;
}
