/* Generated from schemas/ by `npm run sync` (scripts/codegen.mjs). Do not edit. */

/**
 * om.command/v1: topic om.commands (input; key = thread id, or resource id for an erase of a whole resource).
 *
 * ``observe`` (``force``: whatever the message threshold) / ``reflect`` (optional ``guidance``) / ``override``
 * (threshold overrides and a retention window, merged into the thread's; ``replace``: exactly these) / ``clear``
 * / ``erase`` / ``progress`` (a question: answered on the events topic with a ``data-om-progress`` event carrying
 * ``requestId`` = this ``command_id``, and where ``through_message_id``, or the thread's newest message, stands).
 *
 * ``observe`` observes only once the thread's unobserved messages reach the message threshold, as the
 * reference's ``observe()``; below it nothing happens. An ``override`` for a thread no message reached is
 * dead-lettered (``unknown_thread``). ``clear`` forgets the observations, not the conversation: the thread's
 * stored messages are unobserved again. ``erase`` removes a thread (``scope: thread``, keyed by the thread id)
 * or a resource with every thread of it (``scope: resource``, keyed by the resource id, ``thread_id`` left out)
 * from every store, for good; its receipt is a ``data-om-erased`` event. ``command_id`` is the erase's id.
 */
export interface CommandRecord {
  schema: "om.command/v1";
  command_id: string;
  /**
   * the thread; left out only by an erase of a whole resource
   */
  thread_id?: string | null;
  resource_id?: string | null;
  command: "observe" | "reflect" | "override" | "clear" | "erase" | "progress";
  /**
   * erase: a thread, or a whole resource
   */
  scope?: ("thread" | "resource") | null;
  /**
   * erase: when it was requested (the receipt says so); the record's time when left out
   */
  requested_at?: string | null;
  guidance?: string | null;
  message_tokens?: number | null;
  observation_tokens?: number | null;
  /**
   * override: the thread's retention window in days, no longer than the deployment's (messages and observations older are removed)
   */
  retention_days?: number | null;
  /**
   * observe: observe now, whatever the message threshold
   */
  force?: boolean | null;
  /**
   * override: the thread's overrides become exactly these (a threshold or window left out loses its override) instead of merging
   */
  replace?: boolean | null;
  /**
   * progress: the message asked about (default: the thread's newest)
   */
  through_message_id?: string | null;
}
