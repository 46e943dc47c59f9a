// End to end against real Kafka and a running om-stream worker, started by clients/test_clients_e2e.py, which
// passes the broker and the topic names in the environment (the worker's own OM_KAFKA_* variables).
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OMClient, partitionFor, validate, type EventEnvelope } from "../../src/index.js";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run this suite through clients/test_clients_e2e.py`);
  return value;
}

const WORDS = "we agreed to move the launch to friday because the staging cluster needs a new partition plan";
const thread = `ts-e2e-${randomUUID().slice(0, 8)}-ü😀`;
let client: OMClient;

beforeAll(async () => {
  client = new OMClient({
    brokers: env("OM_KAFKA_BOOTSTRAP").split(","),
    topics: {
      messages: env("OM_KAFKA_TOPIC_MESSAGES"), events: env("OM_KAFKA_TOPIC_EVENTS"),
      context: env("OM_KAFKA_TOPIC_CONTEXT"), recallRequests: env("OM_KAFKA_TOPIC_RECALL_REQUESTS"),
      recallResponses: env("OM_KAFKA_TOPIC_RECALL_RESPONSES"),
    },
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
