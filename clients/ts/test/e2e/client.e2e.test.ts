// End to end against real Kafka and a running om-stream worker, started by clients/test_clients_e2e.py, which
// passes the broker and the topic names in the environment (the worker's own OM_KAFKA_* variables).
import { randomUUID } from "node:crypto";
import { Kafka, logLevel, type KafkaMessage } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  OMClient, partitionFor, validate, type ErasedEvent, type EventEnvelope, type ProgressEvent,
} from "../../src/index.js";
import { TopicTail } from "../../src/tail.js";
import { env, topicsFromEnv } from "../e2e-env.js";


const WORDS = "we agreed to move the launch to friday because the staging cluster needs a new partition plan";
const thread = `ts-e2e-${randomUUID().slice(0, 8)}-ü😀`;
let client: OMClient;

beforeAll(async () => {
  client = new OMClient({
    brokers: env("OM_KAFKA_BOOTSTRAP").split(","),
    topics: topicsFromEnv(),
  });
  await client.start();
});

afterAll(async () => {
  await client?.stop();
});

describe("the TypeScript client against a running worker", () => {
  it("publishes a conversation, reads its own writes, follows the thread's events and calls recall", async () => {
    const partitions = Number(env("OM_KAFKA_PARTITIONS"));
    const events = await client.events(thread);
    try {
      let lastId = "";
      for (let index = 0; index < 10; index++) {
        const role = index % 2 === 0 ? "user" : "assistant";
        const created = new Date(Date.UTC(2026, 2, 1, 9, 0, 30 * index)).toISOString();
        const sent = await client.publish({
          message_id: `${thread}-m${index}`, thread_id: thread, resource_id: "r1", role, created_at: created,
          parts: [{ type: "text", text: `turn ${index}: ${WORDS}` }],
        });
        expect(sent.partition).toBe(partitionFor(thread, partitions));
        lastId = sent.messageId;
        if (role === "user") {
          const context = await client.awaitContext(thread, sent.messageId, 60_000);
          expect(context.through_message_id).toBe(sent.messageId);
        }
      }
      const final = await client.awaitContext(thread, lastId, 60_000);
      validate("om.context/v1", final);
      expect(final.through_message_id).toBe(lastId);
      expect(final.observations.startsWith("<observations>")).toBe(true);

      const seen: EventEnvelope[] = [];
      while (!seen.some((e) => e.type === "data-om-observation-end" || e.type === "data-om-activation")) {
        seen.push(await events.next(60_000));
      }
      for (const event of seen) {
        expect(event.subject).toBe(thread);
        expect(event.specversion).toBe("1.0");
        expect(event.id).not.toBe("");
        expect(event.source.startsWith("om-stream/")).toBe(true);
        expect(event.headers["content-type"]).toBe("application/json");
        expect((event.data as { threadId: string }).threadId).toBe(thread);
        expect(event.partition).toBe(partitionFor(thread, partitions));
      }
      expect(new Set(seen.map((e) => e.id)).size).toBe(seen.length);
    } finally {
      await events.stop();
    }

    const threads = await client.recall("r1", { mode: "threads" }, { threadId: thread, timeoutMs: 30_000 });
    expect(threads.result?.mode).toBe("threads");
    expect(JSON.stringify(threads.result)).toContain(thread.slice(0, 15));
    const page = await client.recall("r1", { threadId: "current", limit: 3 }, { threadId: thread, timeoutMs: 30_000 });
    expect(page.result?.mode).toBe("messages");
    expect(JSON.stringify(page.result)).toContain("turn 0");
    const refused = await client.recall("r1", { partIndex: 1 }, { threadId: thread, timeoutMs: 30_000 });
    expect(refused.error?.code).toBe("invalid_request");
  });

  it("times out a read-your-writes wait for a message that was never sent", async () => {
    await expect(client.awaitContext(thread, "never-sent", 500)).rejects.toThrow(/never-sent/);
  });
});

/** A short conversation on `threadId` of `resourceId`, until its context includes the last message; its ids. */
async function converse(threadId: string, resourceId: string, turns: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < turns; index++) {
    const sent = await client.publish({
      message_id: `${threadId}-m${index}`, thread_id: threadId, resource_id: resourceId,
      role: index % 2 === 0 ? "user" : "assistant", created_at: new Date(Date.UTC(2026, 2, 1, 9, 0, 30 * index)).toISOString(),
      parts: [{ type: "text", text: `turn ${index}: ${WORDS}` }],
    });
    ids.push(sent.messageId);
  }
  const context = await client.awaitContext(threadId, ids[ids.length - 1] as string, 60_000);
  expect(context.through_message_id).toBe(ids[ids.length - 1]);
  return ids;
}

/** What the worker's context topic holds for `threads` (read from its beginning): resolves once each has a
 * tombstone, with every value read for it, in order (null: a tombstone). */
async function tombstonesOf(threads: string[], timeoutMs = 30_000): Promise<Map<string, (string | null)[]>> {
  const kafka = new Kafka({ clientId: "om-e2e-context-log", brokers: env("OM_KAFKA_BOOTSTRAP").split(","),
    logLevel: logLevel.WARN });
  const seen = new Map<string, (string | null)[]>(threads.map((t) => [t, []]));
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => { done = resolve; });
  const onRecord = async (message: KafkaMessage): Promise<void> => {
    const values = seen.get(message.key?.toString() ?? "");
    if (values === undefined) return;
    values.push(message.value === null ? null : message.value.toString());
    if ([...seen.values()].every((v) => v.includes(null))) done();
  };
  const tail = new TopicTail(kafka, env("OM_KAFKA_TOPIC_CONTEXT"), onRecord, { fromBeginning: true });
  await tail.start();
  try {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      const read = (): string => JSON.stringify([...seen].map(([t, v]) => [t, v.map((x) => (x === null ? "tombstone" : "context"))]));
      timer = setTimeout(() => reject(new Error(`no tombstone on the context topic: ${read()}`)), timeoutMs);
    });
    await Promise.race([all, late]).finally(() => clearTimeout(timer));
  } finally {
    await tail.stop();
  }
  return seen;
}

function expectReceipt(receipt: ErasedEvent, scope: "thread" | "resource", found: boolean): void {
  validate("data-om-erased/v1", receipt);
  expect(receipt.scope).toBe(scope);
  expect(receipt.found).toBe(found);
  expect(receipt.verified).toBe(true);
  expect(receipt.parts).toBe(scope === "thread" ? 1 : Number(env("OM_KAFKA_PARTITIONS")));
  const removed = Object.values(receipt.removed);
  if (found) expect(removed.some((n) => n > 0)).toBe(true);
  else expect(removed.every((n) => n === 0)).toBe(true);
}

describe("erasure through the TypeScript client", () => {
  it("erases a thread: the receipt, a tombstone on the context topic, no old context, a fresh conversation after", async () => {
    const resource = `ts-erase-${randomUUID().slice(0, 8)}`;
    const erased = `${resource}-thread-é`;
    const kept = `${resource}-kept`;
    const ids = await converse(erased, resource, 4);
    await converse(kept, resource, 2);

    const receipt = await client.erase({ threadId: erased }, { timeoutMs: 60_000 });
    expectReceipt(receipt, "thread", true);
    expect(receipt.threadId).toBe(erased);
    expect(receipt.resourceId).toBe(resource);
    expect(receipt.removed.messages).toBe(4);
    expect(receipt.removed.stateRecords).toBe(1);
    expect(receipt.removed.contexts).toBe(1);
    expect(receipt.recordId).toContain(erased);

    const log = await tombstonesOf([erased]);
    expect((log.get(erased) ?? []).at(-1)).toBeNull(); // nothing after the tombstone: no context came back
    expect(client.latestContext(erased)).toBeUndefined();
    await expect(client.awaitContext(erased, ids[3] as string, 1_500)).rejects.toThrow(ids[3]);
    expect(client.latestContext(kept)?.thread_id).toBe(kept); // the other thread of the resource is untouched

    // the same thread id again: a fresh conversation, nothing of the erased one in its context
    const fresh = await client.publish({
      message_id: `${erased}-again`, thread_id: erased, resource_id: resource, role: "user",
      created_at: new Date(Date.UTC(2026, 2, 2, 9)).toISOString(), parts: [{ type: "text", text: "hello again" }],
    });
    const context = await client.awaitContext(erased, fresh.messageId, 60_000);
    expect(context.messages.map((m) => m.message_id)).toEqual([fresh.messageId]);
    expect(context.observations).not.toContain("turn 0");
    const page = await client.recall(resource, { threadId: "current", limit: 10 }, { threadId: erased, timeoutMs: 30_000 });
    const text = page.result?.mode === "messages" ? page.result.messages : JSON.stringify(page);
    expect(text).toContain("hello again");
    expect(text).not.toContain("turn 0");
  });

  it("erases a whole resource: every thread of it goes, on every partition, and no other resource's", async () => {
    const resource = `ts-res-${randomUUID().slice(0, 8)}`;
    const other = `${resource}-other`;
    const partitions = Number(env("OM_KAFKA_PARTITIONS"));
    const threads: string[] = []; // a thread on every partition (the erase has a part on each), and one more
    const homes = new Set<number>();
    for (let i = 0; homes.size < partitions; i++) {
      const thread = `${resource}-t${i}`;
      if (!homes.has(partitionFor(thread, partitions))) { homes.add(partitionFor(thread, partitions)); threads.push(thread); }
    }
    threads.push(`${resource}-more`);
    for (const thread of threads) await converse(thread, resource, 2);
    await converse(`${other}-t`, other, 2);
    const before = await client.recall(resource, { mode: "threads" }, { timeoutMs: 30_000 });
    for (const thread of threads) expect(JSON.stringify(before.result)).toContain(thread);

    const receipt = await client.erase({ resourceId: resource }, { timeoutMs: 90_000 });
    expectReceipt(receipt, "resource", true);
    expect(receipt.threadId ?? null).toBeNull();
    expect(receipt.resourceId).toBe(resource);
    expect(receipt.removed.messages).toBe(2 * threads.length);
    expect(receipt.removed.stateRecords).toBe(threads.length);
    expect(receipt.removed.contexts).toBe(threads.length);

    const log = await tombstonesOf(threads);
    for (const thread of threads) {
      expect((log.get(thread) ?? []).at(-1)).toBeNull();
      expect(client.latestContext(thread)).toBeUndefined();
      await expect(client.awaitContext(thread, `${thread}-m1`, 500)).rejects.toThrow(`${thread}-m1`);
    }
    expect(client.latestContext(`${other}-t`)?.resource_id).toBe(other);
    const after = await client.recall(resource, { mode: "threads" }, { timeoutMs: 30_000 });
    for (const thread of threads) expect(JSON.stringify(after.result ?? after.error)).not.toContain(thread);
    const untouched = await client.recall(other, { mode: "threads" }, { timeoutMs: 30_000 });
    expect(JSON.stringify(untouched.result)).toContain(`${other}-t`);
  });

  it("erases what it does not know: the receipt says found false", async () => {
    const unknown = `ts-nobody-${randomUUID().slice(0, 8)}`;
    const thread = await client.erase({ threadId: unknown }, { timeoutMs: 60_000 });
    expectReceipt(thread, "thread", false);
    expect(thread.threadId).toBe(unknown);
    const resource = await client.erase({ resourceId: unknown }, { timeoutMs: 90_000 });
    expectReceipt(resource, "resource", false);
    expect(resource.resourceId).toBe(unknown);
  });

  it("times out an erase whose receipt does not come in time", async () => {
    await expect(client.erase({ threadId: `ts-quick-${randomUUID().slice(0, 8)}` }, { timeoutMs: 1 }))
      .rejects.toThrow(/no receipt for erase/);
  });
});

describe("settled through the TypeScript client", () => {
  it("returns once memory has settled through a message: under the threshold, overtaken, past it, the newest", async () => {
    const settledThread = `ts-settled-${randomUUID().slice(0, 8)}`;
    const messageId = (index: number): string => `${settledThread}-m${index}`;
    const publish = async (index: number): Promise<string> => (await client.publish({
      message_id: messageId(index), thread_id: settledThread, resource_id: "r1",
      role: index % 2 === 0 ? "user" : "assistant", created_at: new Date(Date.UTC(2026, 2, 1, 9, 0, 30 * index)).toISOString(),
      parts: [{ type: "text", text: `turn ${index}: ${WORDS}` }],
    })).messageId;
    const named = (p: ProgressEvent): string | null | undefined => p.through?.messageId;
    // what settled resolves to once memory has settled through `id`, the newest message: the answer to its question
    // saying so, or a progress event after an answer that placed the message, settled through it
    const expectSettles = (p: ProgressEvent, id: string): void => {
      validate("data-om-progress/v1", p);
      expect(p.threadId).toBe(settledThread);
      if (p.through !== undefined && p.through !== null) {
        expect([named(p), p.through.settled, p.through.status === "unknown", typeof p.requestId])
          .toEqual([id, true, false, "string"]);
      } else {
        expect([p.requestId ?? null, p.settledThrough?.messageId]).toEqual([null, id]);
      }
    };

    // under the message threshold: settled as soon as it is taken in, with nothing observed
    const first = await publish(0);
    const quiet = await client.settled(settledThread, first, { timeoutMs: 60_000 });
    expect([typeof quiet.requestId, named(quiet), quiet.through?.status, quiet.through?.settled, quiet.observedThrough ?? null])
      .toEqual(["string", first, "unobserved", true, null]);

    // a message not sent yet: the worker answers "unknown" and the client waits; once the message is published, the
    // client asks again and resolves
    const watch = await client.events(settledThread);
    try {
      let outcome: "pending" | "resolved" | "rejected" = "pending";
      const waiter = client.settled(settledThread, messageId(1), { timeoutMs: 120_000 });
      waiter.then(() => { outcome = "resolved"; }, () => { outcome = "rejected"; });
      for (;;) {
        const event = await watch.next(60_000);
        if (event.type !== "data-om-progress") continue;
        const answer = event.data as ProgressEvent;
        if (named(answer) !== messageId(1)) continue;
        expect([answer.through?.status, answer.through?.settled]).toEqual(["unknown", false]);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(outcome).toBe("pending"); // not settled through a message that is not there
      await publish(1);
      expectSettles(await waiter, messageId(1));
    } finally {
      await watch.stop();
    }

    // past the threshold: settled once an observation covers the messages
    let last = "";
    for (let index = 2; index < 10; index++) last = await publish(index);
    expectSettles(await client.settled(settledThread, last, { timeoutMs: 120_000 }), last);
    // settled stays settled without new input: asked again (about the newest message), the answer says so at once,
    // and an observation has landed
    const newest = await client.settled(settledThread, undefined, { timeoutMs: 60_000 });
    expect([named(newest), newest.through?.settled, newest.latestMessage?.messageId]).toEqual([last, true, last]);
    expect(newest.observedThrough).toBeTruthy();
    const context = await client.awaitContext(settledThread, last, 60_000);
    expect(context.observations.startsWith("<observations>")).toBe(true);
  });

  it("rejects after its timeout, not before, when the message never comes", async () => {
    const began = Date.now();
    await expect(client.settled(thread, "never-sent", { timeoutMs: 2_000 }))
      .rejects.toThrow(/has not settled through never-sent after 2000ms/);
    expect(Date.now() - began).toBeGreaterThanOrEqual(2_000);
  });
});
