/**
 * Erasure as data: the `erase` command an agent publishes (`om.command/v1`, `command: "erase"`) and the key it goes
 * under. Pure, so the client's `erase()` and the unit tests build exactly the same record.
 */
import { randomUUID } from "node:crypto";
import { ContractError, normalize, validate } from "./contract.js";
import type { CommandRecord } from "./generated/om.command.v1.js";

/**
 * What to erase: a thread (`threadId`; add its `resourceId` when the worker runs in resource scope), or a whole
 * resource with every thread of it (`resourceId` alone).
 */
export interface EraseSubject {
  threadId?: string;
  resourceId?: string;
}

/** The erase command for `subject`, requested at `now`, validated against the schema and in its normal form. */
export function eraseCommand(subject: EraseSubject, now: Date = new Date(), commandId: string = randomUUID()):
CommandRecord {
  const { threadId, resourceId } = subject;
  if (threadId === undefined && resourceId === undefined) {
    throw new ContractError("invalid_fields", ["an erase names a threadId, a resourceId, or both"]);
  }
  const record: CommandRecord = {
    schema: "om.command/v1", command_id: commandId, command: "erase",
    scope: threadId !== undefined ? "thread" : "resource",
    thread_id: threadId ?? null, resource_id: resourceId ?? null, requested_at: now.toISOString(),
  };
  return normalize("om.command/v1", validate("om.command/v1", record));
}

/** The key a command is published under: its thread, or its resource for an erase of a whole resource. */
export function commandKey(command: CommandRecord): string {
  const key = command.thread_id ?? command.resource_id;
  if (key === null || key === undefined) {
    throw new ContractError("invalid_fields", ["a command names its thread (or, erasing a resource, the resource)"]);
  }
  return key;
}
