// A TypeScript agent whose traces go to a real Jaeger, run by clients/test_clients_tracing.py against a worker that
// traces into the same Jaeger: the agent publishes a message under a span of its own, waits for its context, and
// starts a consumer span from the context's trace (`traceContextOf`). Its own SDK (the OTLP/HTTP exporter) sends
// its spans to `OM_OTLP_ENDPOINT`; it writes the trace's id to `OM_TRACE_REPORT`, and the Python side reads the
// trace back from Jaeger's API and checks the whole tree.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { expect, it } from "vitest";
import { OMClient, spanContextOf, traceContextOf } from "../../src/index.js";
import { env, topicsFromEnv } from "../e2e-env.js";


it("publishes under its own span and reads its context in a consumer span of the same trace", async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const provider = new BasicTracerProvider({
    sampler: new AlwaysOnSampler(),
    resource: resourceFromAttributes({ "service.name": env("OM_AGENT_SERVICE") }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${env("OM_OTLP_ENDPOINT")}/v1/traces` }),
      { scheduledDelayMillis: 100 })],
  });
  const tracer = provider.getTracer("agent");
  const client = new OMClient({
    brokers: env("OM_KAFKA_BOOTSTRAP").split(","),
    topics: topicsFromEnv(),
  });
  await client.start();
  try {
    const thread = `ts-jaeger-${randomUUID().slice(0, 8)}`;
    const messageId = `${thread}-m0`;
    const turn = await tracer.startActiveSpan("agent turn", async (span) => {
      await client.publish({ message_id: messageId, thread_id: thread, resource_id: env("OM_TRACE_RESOURCE"),
        role: "user", created_at: new Date().toISOString(), parts: [{ type: "text", text: env("OM_TRACE_TEXT") }] });
      span.end();
      return span.spanContext();
    });
    const record = await client.awaitContext(thread, messageId, 60_000);
    const worker = spanContextOf(record);
    expect(worker?.traceId).toBe(turn.traceId); // the context came under the worker's span of the agent's trace
    const consumer = tracer.startSpan("agent reads context", {}, traceContextOf(record));
    consumer.end();
    expect(consumer.spanContext().traceId).toBe(turn.traceId);
    await provider.forceFlush();
    writeFileSync(env("OM_TRACE_REPORT"), JSON.stringify({ trace_id: turn.traceId, thread, message_id: messageId,
      consumer_span_id: consumer.spanContext().spanId }));
  } finally {
    await client.stop();
    await provider.shutdown();
    context.disable();
  }
});
