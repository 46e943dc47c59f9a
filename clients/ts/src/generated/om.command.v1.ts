/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.command/v1: topic om.commands (input; key = thread id).
 *
 * ``observe`` (``force``: whatever the message threshold) / ``reflect`` (optional ``guidance``) / ``override``
 * (threshold overrides, merged into the thread's; ``replace``: exactly these) / ``clear``.
 *
 * ``observe`` observes only once the thread's unobserved messages reach the message threshold, as the
 * reference's ``observe()``; below it nothing happens. An ``override`` for a thread no message reached is
 * dead-lettered (``unknown_thread``). ``clear`` forgets the observations, not the conversation: the thread's
 * stored messages are unobserved again.
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
  /**
   * observe: observe now, whatever the message threshold
   */
  force?: boolean | null;
  /**
   * override: the thread's overrides become exactly these (a threshold left out loses its override) instead of merging
   */
  replace?: boolean | null;
}
