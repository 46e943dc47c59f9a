// Trace context end to end against real Kafka and a running om-stream worker (see client.e2e.test.ts): every record
// the client publishes in a span (message, progress command, recall request, erase command) carries that span's
// traceparent and the trace's tracestate, read back raw from the topics; a record published outside a span carries
// none; a context record with trace headers on the context topic comes back from awaitContext with its span context.
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { context, ROOT_CONTEXT, trace, TraceFlags, type SpanContext } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, ParentBasedSampler, SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { Kafka, logLevel, Partitioners, type KafkaMessage } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decode, encodeCanonical, OMClient, parseTracestate, spanContextOf, traceContextOf, type ContextRecord,
} from "../../src/index.js";
import { TopicTail } from "../../src/tail.js";
import { env, topicsFromEnv } from "../e2e-env.js";


const exporter = new InMemorySpanExporter();
const tracer = new BasicTracerProvider({
  sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), spanProcessors: [new SimpleSpanProcessor(exporter)],
}).getTracer("agent");
const kafka = new Kafka({ clientId: "om-e2e-tracing", brokers: env("OM_KAFKA_BOOTSTRAP").split(","),
  logLevel: logLevel.WARN });
let client: OMClient;

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  client = new OMClient({
    brokers: env("OM_KAFKA_BOOTSTRAP").split(","),
    topics: topicsFromEnv(),
  });
  await client.start();
});

afterAll(async () => {
  await client?.stop();
  context.disable();
});

function remoteParent(state: string): SpanContext {
  const parsed = parseTracestate(state);
  return { traceId: randomBytes(16).toString("hex"), spanId: randomBytes(8).toString("hex"),
    traceFlags: TraceFlags.SAMPLED, isRemote: true, ...(parsed === undefined ? {} : { traceState: parsed }) };
}

function text(headers: KafkaMessage["headers"], name: string): string | undefined {
  const value = headers?.[name];
  return value === undefined ? undefined : (Array.isArray(value) ? value.map(String).join("|") : value.toString());
}

describe("trace context through Kafka", () => {
  it("travels on every record published in a span, and on none published outside one", async () => {
    const thread = `ts-trace-${randomUUID().slice(0, 8)}`;
    const resource = `r-${thread}`;
    const read: { topic: string; message: KafkaMessage }[] = [];
    let arrived: () => void = () => undefined;
    const tails = [env("OM_KAFKA_TOPIC_MESSAGES"), env("OM_KAFKA_TOPIC_COMMANDS"),
      env("OM_KAFKA_TOPIC_RECALL_REQUESTS")].map((topic) => new TopicTail(kafka, topic, async (message) => {
      read.push({ topic, message });
      arrived();
    }));
    await Promise.all(tails.map((tail) => tail.start()));
    try {
      const parent = remoteParent("om-test=e2e");
      const message = (id: string, threadId: string) => ({
        message_id: id, thread_id: threadId, resource_id: resource, role: "user" as const,
        created_at: new Date().toISOString(), parts: [{ type: "text" as const, text: `a turn of ${threadId}` }],
      });
      const { agentSpan, progressId, correlationId, eraseId } = await tracer.startActiveSpan("agent turn", {},
        trace.setSpanContext(ROOT_CONTEXT, parent), async (span) => {
          const sent = await client.publish(message(`${thread}-m0`, thread));
          await client.awaitContext(thread, sent.messageId, 60_000);
          const asked = await client.askProgress(thread, sent.messageId);
          const correlation = randomUUID();
          await client.sendRecall({ schema: "om.recall.request/v1", correlation_id: correlation, resource_id: resource,
            thread_id: thread, arguments: { mode: "threads" } }, 30_000);
          const receipt = await client.erase({ threadId: thread }, { timeoutMs: 60_000 });
          span.end();
          return { agentSpan: span.spanContext(), progressId: asked, correlationId: correlation,
            eraseId: receipt.eraseId };
        });
      await client.publish(message(`${thread}-untraced`, `${thread}-untraced`));

      const kinds = ["message", "progress", "recall", "erase", "untraced"];
      const found = new Map<string, KafkaMessage>();
      const deadline = Date.now() + 30_000;
      while (found.size < kinds.length) {
        for (const { topic, message: record } of read.splice(0)) {
          if (record.value === null) continue;
          if (topic === env("OM_KAFKA_TOPIC_MESSAGES")) {
            const id = decode("om.message/v1", record.value).message_id;
            if (id === `${thread}-m0`) found.set("message", record);
            if (id === `${thread}-untraced`) found.set("untraced", record);
          } else if (topic === env("OM_KAFKA_TOPIC_COMMANDS")) {
            const id = decode("om.command/v1", record.value).command_id;
            if (id === progressId) found.set("progress", record);
            if (id === eraseId) found.set("erase", record);
          } else if (decode("om.recall.request/v1", record.value).correlation_id === correlationId) {
            found.set("recall", record);
          }
        }
        if (found.size === kinds.length) break;
        if (Date.now() > deadline) throw new Error(`read back only ${[...found.keys()].join(", ")}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
          arrived = () => { clearTimeout(timer); resolve(); };
        });
      }

      for (const kind of kinds) {
        const headers = found.get(kind)?.headers;
        expect(text(headers, "content-type"), kind).toBe("application/json");
        if (kind === "untraced") {
          expect(Object.keys(headers ?? {})).toEqual(["content-type"]);
          continue;
        }
        expect(text(headers, "traceparent"), kind).toBe(`00-${parent.traceId}-${agentSpan.spanId}-01`);
        expect(text(headers, "tracestate"), kind).toBe("om-test=e2e");
      }
      expect(exporter.getFinishedSpans().map((s) => s.spanContext().spanId)).toContain(agentSpan.spanId);
    } finally {
      await Promise.all(tails.map((tail) => tail.stop()));
    }
  });

  it("comes back with a context record the worker published with trace headers", async () => {
    const thread = `ts-trace-read-${randomUUID().slice(0, 8)}`;
    const through = `${thread}-m3`;
    const vector = decode("om.context/v1", readFileSync(new URL(
      "../../../../schemas/vectors/valid/context-full.canonical.json", import.meta.url)));
    const record: ContextRecord = { ...vector, thread_id: thread, version: 1, through_message_id: through, messages: [] };
    const worker = remoteParent("om=w1");
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    try {
      await producer.send({ topic: env("OM_KAFKA_TOPIC_CONTEXT"), acks: -1, messages: [{
        key: thread, value: Buffer.from(encodeCanonical("om.context/v1", record)),
        headers: { "content-type": "application/json", om_version: "1", om_through_message_id: through,
          traceparent: `00-${worker.traceId}-${worker.spanId}-01`, tracestate: "om=w1" },
      }] });
    } finally {
      await producer.disconnect();
    }

    const got = await client.awaitContext(thread, through, 30_000);
    expect(spanContextOf(got)).toMatchObject({ traceId: worker.traceId, spanId: worker.spanId, isRemote: true,
      traceFlags: TraceFlags.SAMPLED });
    expect(spanContextOf(got)?.traceState?.serialize()).toBe("om=w1");
    const consumer = tracer.startSpan("agent reads its context", {}, traceContextOf(got, ROOT_CONTEXT));
    consumer.end();
    expect(consumer.spanContext().traceId).toBe(worker.traceId);
    const exported = exporter.getFinishedSpans().find((s) => s.spanContext().spanId === consumer.spanContext().spanId);
    expect(exported?.parentSpanContext).toMatchObject({ spanId: worker.spanId, isRemote: true });
  });
});
