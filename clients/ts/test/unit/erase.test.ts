// Erasure without Kafka: the command the client publishes (and its key), and what the client's view of contexts
// does with tombstones and receipts, whichever of the two topics is read first.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ContextView } from "../../src/contexts.js";
import { ContractError, decode, encodeCanonical, validate } from "../../src/contract.js";
import { commandKey, eraseCommand } from "../../src/erase.js";
import type { ErasedEvent } from "../../src/generated/data-om-erased.v1.js";
import type { ContextRecord } from "../../src/generated/om.context.v1.js";
import { partitionFor } from "../../src/partition.js";

const VECTORS = new URL("../../../../schemas/vectors/", import.meta.url);
const AT = new Date("2026-03-01T09:00:00.250Z");

describe("the erase command", () => {
  it("of a thread names the thread (and its resource when given), is keyed by the thread, and is valid", () => {
    const command = eraseCommand({ threadId: "thread-1", resourceId: "user-1" }, AT, "erase-1");
    expect(command).toEqual({
      schema: "om.command/v1", command_id: "erase-1", command: "erase", scope: "thread", thread_id: "thread-1",
      resource_id: "user-1", requested_at: "2026-03-01T09:00:00.250000Z",
    });
    expect(commandKey(command)).toBe("thread-1");
    const alone = eraseCommand({ threadId: "thread-1" }, AT, "erase-3");
    expect(alone.scope).toBe("thread");
    expect("resource_id" in alone).toBe(false); // optional and null: left out of the normal form
  });

  it("of a resource leaves the thread out and is keyed (so partitioned) by the resource", () => {
    const command = eraseCommand({ resourceId: "user-1" }, AT, "erase-2");
    expect("thread_id" in command).toBe(false);
    expect(command.scope).toBe("resource");
    expect(commandKey(command)).toBe("user-1");
    for (const partitions of [1, 3, 12]) {
      expect(partitionFor(commandKey(command), partitions)).toBe(partitionFor("user-1", partitions));
    }
  });

  it("writes the bytes of the shared vectors, with the time it was requested", () => {
    for (const [name, subject, id] of [
      ["command-erase-resource", { resourceId: "user-1" }, "erase-2"],
      ["command-erase-thread", { threadId: "thread-1", resourceId: "user-1" }, "erase-1"],
    ] as const) {
      const vector = decode("om.command/v1", readFileSync(new URL(`valid/${name}.json`, VECTORS)));
      const expected = encodeCanonical("om.command/v1", { ...vector, requested_at: AT.toISOString() });
      expect(Buffer.from(encodeCanonical("om.command/v1", eraseCommand(subject, AT, id))).toString())
        .toBe(Buffer.from(expected).toString());
    }
  });

  it("is refused when it names nothing, or an id the schema refuses", () => {
    expect(() => eraseCommand({}, AT)).toThrow(ContractError);
    expect(() => eraseCommand({ threadId: "" }, AT)).toThrow(ContractError);
    expect(() => eraseCommand({ resourceId: "x".repeat(257) }, AT)).toThrow(ContractError);
    expect(() => commandKey({ schema: "om.command/v1", command_id: "c", command: "erase" })).toThrow(ContractError);
  });

  it("gets a fresh id each time", () => {
    expect(eraseCommand({ threadId: "t" }).command_id).not.toBe(eraseCommand({ threadId: "t" }).command_id);
  });
});

function context(thread: string, version: number, through: string, resource = "user-1"): ContextRecord {
  return validate("om.context/v1", {
    schema: "om.context/v1", thread_id: thread, resource_id: resource, version, through_message_id: through,
    observations: "", hints: {}, messages: [], system_blocks: [], tokens: { messages: 0, observations: 0 },
    generation: 0,
  });
}

function receipt(scope: "thread" | "resource", contexts: number): ErasedEvent {
  const removed = { messages: contexts * 3, observations: 0, generations: 0, threads: contexts, cycleResults: 0,
    recallPoints: 0, stateRecords: contexts, contexts };
  return validate("data-om-erased/v1", {
    recordId: "thread:t", threadId: scope === "thread" ? "t" : null, eraseId: "e", scope, resourceId: "user-1",
    found: contexts > 0, removed, requestedAt: "2026-03-01T09:00:00Z", completedAt: "2026-03-01T09:00:01Z",
    verified: true, parts: 1,
  });
}

describe("the client's view of contexts", () => {
  it("forgets a thread on its tombstone, and takes the next conversation's context", async () => {
    const view = new ContextView();
    view.received(context("t", 4, "m4"));
    view.tombstone("t");
    expect(view.latestOf("t")).toBeUndefined();
    await expect(view.awaitIncluding("t", "m4", 30)).rejects.toThrow(/m4/);
    view.received(context("t", 1, "n1")); // a fresh conversation: its versions start again
    expect(view.latestOf("t")?.through_message_id).toBe("n1");
  });

  it("drops the erased contexts read after the receipt and before the tombstone", async () => {
    const view = new ContextView();
    view.received(context("t", 3, "m3"));
    const watch = view.beginErase();
    view.erased({ threadId: "t" }, receipt("thread", 1), watch);
    view.endErase(watch);
    expect(view.latestOf("t")).toBeUndefined();
    view.received(context("t", 4, "m4")); // published before the erase, read late
    expect(view.latestOf("t")).toBeUndefined();
    await expect(view.awaitIncluding("t", "m4", 30)).rejects.toThrow(/m4/);
    const fresh = view.awaitIncluding("t", "n1", 1000);
    view.tombstone("t");
    view.received(context("t", 1, "n1"));
    expect((await fresh).through_message_id).toBe("n1");
  });

  it("keeps a fresh conversation's context read between the tombstone and the receipt", () => {
    const view = new ContextView();
    view.received(context("t", 3, "m3"));
    const watch = view.beginErase();
    view.tombstone("t");
    view.received(context("t", 1, "n1"));
    view.erased({ threadId: "t" }, receipt("thread", 1), watch);
    view.endErase(watch);
    expect(view.latestOf("t")?.through_message_id).toBe("n1");
  });

  it("waits for no tombstone when the worker published none (nothing found)", () => {
    const view = new ContextView();
    const watch = view.beginErase();
    view.erased({ threadId: "t" }, receipt("thread", 0), watch);
    view.endErase(watch);
    view.received(context("t", 1, "n1"));
    expect(view.latestOf("t")?.through_message_id).toBe("n1");
  });

  it("forgets every thread of an erased resource and no other", () => {
    const view = new ContextView();
    view.received(context("a", 2, "a2"));
    view.received(context("b", 5, "b5"));
    view.received(context("c", 7, "c7", "user-2"));
    const watch = view.beginErase();
    view.erased({ resourceId: "user-1" }, receipt("resource", 2), watch);
    view.endErase(watch);
    expect(view.latestOf("a")).toBeUndefined();
    expect(view.latestOf("b")).toBeUndefined();
    expect(view.latestOf("c")?.version).toBe(7);
    view.received(context("a", 3, "a3")); // read late: erased
    expect(view.latestOf("a")).toBeUndefined();
    view.tombstone("a");
    view.received(context("a", 1, "x1"));
    expect(view.latestOf("a")?.through_message_id).toBe("x1");
  });

  it("forgets the order of the messages it published to an erased thread", () => {
    const view = new ContextView();
    view.published("t", "m1");
    view.published("t", "m2");
    expect(view.includes(context("t", 2, "m2"), "m1")).toBe(true);
    view.tombstone("t");
    // a fresh conversation reusing the id m2 does not include the erased m1
    expect(view.includes(context("t", 1, "m2"), "m1")).toBe(false);
  });
});
