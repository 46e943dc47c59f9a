/**
 * Has memory caught up? The `progress` command and the rules of `OMClient.settled` (the Python client's
 * `OMClient.settled`, step for step), pure, so the unit tests feed them the events the worker publishes.
 *
 * The worker answers a `progress` command (`om.commands`) with a `data-om-progress` event carrying the command's id
 * as `requestId` and where the message stands (`through`: its `seq`, its status, whether memory has settled through
 * it). After that answer, every change of the thread's progress is published too (at most once per batch), so the
 * client needs nothing from before it asked:
 *
 * 1. follow the thread's partition of `om.events` from its end, *then* ask (nothing published after the question
 *    can be missed, and the answer reflects everything the worker took in before it);
 * 2. the answer settled: done. The message taken in but not settled: remember its `seq`, and wait for a progress
 *    event whose `settledThrough.seq` reaches it (settled through a message means settled through every earlier
 *    one). The message not taken in yet (it travels another topic than the question, so the question may overtake
 *    it): wait for a context of the thread that includes it, received after the question, and ask again.
 *
 * Every claim is about a state the worker committed: a progress event is published after its state is written. A
 * worker that dies while a client waits publishes nothing: the wait ends with a timeout.
 */
import { randomUUID } from "node:crypto";
import { normalize, validate } from "./contract.js";
import type { ProgressEvent } from "./generated/data-om-progress.v1.js";
import type { CommandRecord } from "./generated/om.command.v1.js";

/**
 * The `progress` command asking where `throughMessageId` (absent: the thread's newest message) stands; `resourceId`
 * is needed when the worker runs in resource scope. Validated against the schema and in its normal form.
 */
export function progressCommand(threadId: string, throughMessageId?: string | null, resourceId?: string | null,
                                commandId: string = randomUUID()): CommandRecord {
  const record: CommandRecord = {
    schema: "om.command/v1", command_id: commandId, command: "progress", thread_id: threadId,
    resource_id: resourceId ?? null, through_message_id: throughMessageId ?? null,
  };
  return normalize("om.command/v1", validate("om.command/v1", record));
}

/** What one progress event means for a wait: go on, done, or wait for a context including `wanted` and ask again. */
export type SettleStep = { step: "wait" } | { step: "settled" } | { step: "ask-again"; wanted: string };

/** Where a `settled` call stands: the question it asked last and, once an answer placed the message, its seq. */
export class Settling {
  private target: number | undefined;

  constructor(readonly threadId: string, readonly throughMessageId: string | null, public requestId: string) {}

  /** The seq the answer gave the message (undefined before an answer placed it). */
  get seq(): number | undefined { return this.target; }

  /** Read one progress event of the thread's partition. */
  take(progress: ProgressEvent): SettleStep {
    if (progress.threadId !== this.threadId) return { step: "wait" };
    if (progress.requestId !== undefined && progress.requestId !== null) {
      const through = progress.through;
      if (progress.requestId !== this.requestId || through === undefined || through === null) {
        return { step: "wait" }; // another client's answer
      }
      if (through.settled) return { step: "settled" };
      if (through.status !== "unknown" && through.seq !== undefined && through.seq !== null) {
        this.target = through.seq;
        return { step: "wait" };
      }
      const wanted = this.throughMessageId ?? through.messageId;
      // the thread had no message: an answer says settled, so this is not reached
      if (wanted === undefined || wanted === null) return { step: "wait" };
      return { step: "ask-again", wanted };
    }
    const settledThrough = progress.settledThrough;
    if (this.target !== undefined && settledThrough !== undefined && settledThrough !== null
        && settledThrough.seq >= this.target) {
      return { step: "settled" };
    }
    return { step: "wait" };
  }
}
