// `settled` without Kafka: the progress command the client publishes, and its rules fed the progress events the
// worker publishes (the Python client's settle, step for step).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ContractError, encodeCanonical } from "../../src/contract.js";
import type { ProgressEvent, ThroughMessage } from "../../src/generated/data-om-progress.v1.js";
import { progressCommand, Settling } from "../../src/settled.js";

const VECTORS = new URL("../../../../schemas/vectors/", import.meta.url);

function progress(threadId: string, fields: { requestId?: string; through?: ThroughMessage; settledThrough?: number }):
ProgressEvent {
  return {
    recordId: threadId, threadId, unobserved: { messages: 0, tokens: 0 }, buffered: [], inFlight: [], waitingFor: [],
    pending: false, generationCount: 0, requestId: fields.requestId ?? null, through: fields.through ?? null,
    settledThrough: fields.settledThrough === undefined ? null : { seq: fields.settledThrough },
  };
}

describe("the progress command", () => {
  it("writes the bytes of the shared vector, keyed by its thread", () => {
    const command = progressCommand("thread-1", "m-7", undefined, "cmd-7");
    const canonical = readFileSync(new URL("valid/command-progress.canonical.json", VECTORS), "utf8");
    expect(Buffer.from(encodeCanonical("om.command/v1", command)).toString("utf8")).toBe(canonical);
  });

  it("asks about the newest message when none is named, and names the resource when given", () => {
    const command = progressCommand("thread-1", null, "user-1", "cmd-8");
    expect("through_message_id" in command).toBe(false);
    expect(command.resource_id).toBe("user-1");
  });

  it("is refused without a thread", () => {
    expect(() => progressCommand("", "m-7")).toThrow(ContractError);
  });
});

describe("settling", () => {
  it("ends on the answer to its own question that says settled, and on nothing else", () => {
    const s = new Settling("t", "m-3", "q1");
    const settled = { messageId: "m-3", seq: 3, status: "unobserved", settled: true } as const;
    expect(s.take(progress("other", { requestId: "q1", through: settled }))).toEqual({ step: "wait" });
    expect(s.take(progress("t", { requestId: "q0", through: settled }))).toEqual({ step: "wait" });
    expect(s.take(progress("t", { requestId: "q1" }))).toEqual({ step: "wait" });
    expect(s.take(progress("t", { settledThrough: 99 }))).toEqual({ step: "wait" }); // no seq to reach yet
    expect(s.take(progress("t", { requestId: "q1", through: settled }))).toEqual({ step: "settled" });
  });

  it("waits, once the answer placed the message, for settledThrough to reach its seq", () => {
    const s = new Settling("t", null, "q1");
    const observing = { messageId: "m-7", seq: 7, status: "observing", settled: false } as const;
    expect(s.take(progress("t", { requestId: "q1", through: observing, settledThrough: 2 }))).toEqual({ step: "wait" });
    expect(s.seq).toBe(7);
    expect(s.take(progress("t", { settledThrough: 6 }))).toEqual({ step: "wait" });
    expect(s.take(progress("t", {}))).toEqual({ step: "wait" });
    expect(s.take(progress("other", { settledThrough: 9 }))).toEqual({ step: "wait" });
    expect(s.take(progress("t", { settledThrough: 7 }))).toEqual({ step: "settled" });
    expect(s.take(progress("t", { settledThrough: 12 }))).toEqual({ step: "settled" });
  });

  it("asks again, once a context shows it, for a message not taken in when it asked", () => {
    const unknown = { messageId: "m-9", status: "unknown", settled: false } as const;
    expect(new Settling("t", "m-9", "q1").take(progress("t", { requestId: "q1", through: unknown })))
      .toEqual({ step: "ask-again", wanted: "m-9" });
    // the newest message asked about: the one the answer names
    expect(new Settling("t", null, "q1").take(progress("t", { requestId: "q1", through: unknown })))
      .toEqual({ step: "ask-again", wanted: "m-9" });
    expect(new Settling("t", null, "q1").take(progress("t", { requestId: "q1",
      through: { status: "unknown", settled: false } }))).toEqual({ step: "wait" });
  });
});
