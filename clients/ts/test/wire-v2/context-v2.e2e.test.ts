// Contexts by reference end to end: a worker with OM_CONTEXT_WIRE=v2 and an API token (started by
// clients/test_clients_e2e.py), real Kafka. The contexts the client assembles from cursors, indexes and blocks equal,
// byte for byte, the worker's own rendering of them (GET /v1/threads/{id}/context), through observations and a
// reflection; a client started late fetches the run it lacks through GET /v1/threads/{id}/messages with the token;
// an erase leaves it no context of the thread.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MessagesApi, OMClient, decode, encodeCanonical, type ClientOptions, type ContextRecord } from "../../src/index.js";
import { env, topicsFromEnv } from "../e2e-env.js";


const WORDS = "we agreed to move the launch to friday because the staging cluster needs a new partition plan";
const API = `http://127.0.0.1:${env("OM_WORKER_WEB_PORT")}`;
const TOKEN = env("OM_WORKER_API_TOKEN");
const thread = `ts-v2-${randomUUID().slice(0, 8)}-ü😀`;
const quiet = `ts-v2-quiet-${randomUUID().slice(0, 8)}`;
const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString("utf8");

function options(extra: Partial<ClientOptions> = {}): ClientOptions {
  return {
    brokers: env("OM_KAFKA_BOOTSTRAP").split(","),
    topics: { ...topicsFromEnv(), contextIndex: env("OM_KAFKA_TOPIC_CONTEXT_INDEX"),
              contextBlocks: env("OM_KAFKA_TOPIC_CONTEXT_BLOCKS") },
    ...extra,
  };
}

/** The worker's own om.context/v1 rendering of the thread's latest context. */
async function served(thread: string): Promise<ContextRecord> {
  const response = await fetch(`${API}/v1/threads/${encodeURIComponent(thread)}/context`,
    { headers: { Authorization: `Bearer ${TOKEN}` } });
  const body = new Uint8Array(await response.arrayBuffer());
  expect(response.status, text(body)).toBe(200);
  return decode("om.context/v1", body);
}

/** The client's context of the worker's latest version: the same bytes (a newer one in between: ask again). */
async function sameAsServed(client: OMClient, thread: string): Promise<ContextRecord> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const want = await served(thread);
    const view = (client as unknown as { view: { await: (t: string, ready: (c: ContextRecord) => boolean,
      ms: number, what: string) => Promise<ContextRecord> } }).view;
    const held = await view.await(thread, (c) => c.version >= want.version, 60_000, `of version ${want.version}`);
    if (held.version > want.version) continue;
    expect(text(encodeCanonical("om.context/v1", held)), `version ${want.version}`)
      .toBe(text(encodeCanonical("om.context/v1", want)));
    expect(held).toEqual(want); // the same value the client returns for a v1 record of these bytes
    return held;
  }
  throw new Error("the thread's context kept changing");
}

const message = (thread: string, index: number, words: string) => ({
  message_id: `${thread}-m${index}`, thread_id: thread, resource_id: "r1",
  role: index % 2 === 0 ? "user" as const : "assistant" as const,
  created_at: new Date(Date.UTC(2026, 2, 1, 9, 0, 30 * index)).toISOString(),
  parts: [{ type: "text" as const, text: words }],
});

describe("the TypeScript client against a worker publishing om.context/v2", () => {
  it("assembles the worker's contexts, fetches a run it lacks, and forgets an erased thread", async () => {
    const turns = 14;
    const quietTurns = 5;
    const early = new OMClient(options()); // no messagesApi: it assembles from what it reads alone
    await early.start();
    let last: ContextRecord | undefined;
    try {
      for (let index = 0; index < turns; index++) {
        const sent = await early.publish(message(thread, index, `turn ${index}: ${WORDS}`));
        await early.awaitContext(thread, sent.messageId, 60_000);
        await early.settled(thread, sent.messageId, { timeoutMs: 60_000 });
        last = await sameAsServed(early, thread);
      }
      // a few short messages under the observation threshold: they stay raw, in every context of the thread
      for (let index = 0; index < quietTurns; index++) {
        const sent = await early.publish(message(quiet, index, `early ${index}`));
        await early.awaitContext(quiet, sent.messageId, 60_000);
      }
    } finally {
      await early.stop();
    }
    expect(last?.observations.startsWith("<observations>")).toBe(true);
    expect(last?.generation, "the conversation reached a reflection").toBeGreaterThan(0);

    const late = new OMClient(options({ messagesApi: new MessagesApi({ baseUrl: API, token: TOKEN }) }));
    await late.start();
    try {
      // its first cursor of the quiet thread carries only the message it publishes: the others are fetched
      const sent = await late.publish(message(quiet, quietTurns, "late"));
      const assembled = await late.awaitContext(quiet, sent.messageId, 60_000);
      expect(assembled.messages.length, "the run holds messages the late client never saw").toBe(quietTurns + 1);
      await sameAsServed(late, quiet);
      const receipt = await late.erase({ threadId: quiet }, { timeoutMs: 60_000 });
      expect(receipt.found).toBe(true);
      expect(late.latestContext(quiet)).toBeUndefined();
    } finally {
      await late.stop();
    }
  });
});
