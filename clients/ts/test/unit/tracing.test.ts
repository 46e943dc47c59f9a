// Trace context across Kafka without a broker: the headers the client writes for the caller's active span (a real
// SDK tracer provider, its spans exported in memory), the span context it reads from a context record's headers,
// and the shared vector of header sets every client must read alike.
import { readFileSync } from "node:fs";
import {
  context, INVALID_SPAN_CONTEXT, propagation, ROOT_CONTEXT, trace, TraceFlags, type Context, type SpanContext, type TextMapPropagator,
  type TextMapSetter,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator,
} from "@opentelemetry/core";
import {
  AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, ParentBasedSampler, SimpleSpanProcessor,
  type Sampler,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ContextView } from "../../src/contexts.js";
import {
  decodeContextRecord, parseTracestate, recordHeaders, spanContextFromHeaders, spanContextOf, traceContextOf,
  W3CTraceState,
} from "../../src/tracing.js";

const VECTORS = new URL("../../../../schemas/vectors/", import.meta.url);
const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();

function tracerWith(sampler: Sampler) {
  return new BasicTracerProvider({ sampler, spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer("agent");
}

const tracer = tracerWith(new ParentBasedSampler({ root: new AlwaysOnSampler() }));

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});

afterAll(() => {
  context.disable();
});

afterEach(() => {
  exporter.reset();
  propagation.disable(); // back to no registered propagator
});

/** Another format's propagator, which also writes a tracestate of its own. */
class VendorPropagator implements TextMapPropagator {
  inject(active: Context, carrier: unknown, setter: TextMapSetter): void {
    const spanContext = trace.getSpanContext(active) ?? trace.wrapSpanContext(INVALID_SPAN_CONTEXT).spanContext();
    setter.set(carrier, "x-vendor-trace", spanContext.traceId);
    setter.set(carrier, "tracestate", "vendor=1");
  }

  extract(active: Context): Context {
    return active;
  }

  fields(): string[] {
    return ["x-vendor-trace", "tracestate"];
  }
}

/** A traceparent header taken apart (and checked to be the format of version 00). */
function traceparent(headers: Record<string, string>): { traceId: string; spanId: string; sampled: boolean } {
  const value = headers["traceparent"];
  expect(value).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]$/);
  const [, traceId = "", spanId = "", flags = ""] = (value ?? "").split("-");
  return { traceId, spanId, sampled: (Number.parseInt(flags, 16) & 1) === 1 };
}

/** Run `body` in a span of `tracerToUse` (under `parent`); the span's context and what `body` returned. */
function inSpan<T>(body: () => T, tracerToUse = tracer, parent: Context = context.active()):
{ spanContext: SpanContext; value: T } {
  return tracerToUse.startActiveSpan("agent turn", {}, parent, (span) => {
    try {
      return { spanContext: span.spanContext(), value: body() };
    } finally {
      span.end();
    }
  });
}

describe("the headers of a published record", () => {
  it("carry the active span's trace id, span id and sampled flag", () => {
    const { spanContext, value: headers } = inSpan(() => recordHeaders());
    const [exported] = exporter.getFinishedSpans();
    expect(exported?.spanContext().spanId).toBe(spanContext.spanId);
    expect(traceparent(headers)).toEqual({ traceId: spanContext.traceId, spanId: spanContext.spanId, sampled: true });
    expect(headers["content-type"]).toBe("application/json");
    expect("tracestate" in headers).toBe(false); // the span has none
  });

  it("carry a span that is not sampled too, flagged so", () => {
    const { spanContext, value: headers } = inSpan(() => recordHeaders(), tracerWith(new AlwaysOffSampler()));
    expect(exporter.getFinishedSpans()).toHaveLength(0);
    expect(traceparent(headers)).toEqual({ traceId: spanContext.traceId, spanId: spanContext.spanId, sampled: false });
  });

  it("pass the tracestate of the trace on, in a child span of a remote parent", () => {
    const remote: SpanContext = {
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: TraceFlags.SAMPLED,
      isRemote: true, traceState: parseTracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
    };
    const { spanContext, value: headers } = inSpan(() => recordHeaders(), tracer,
      trace.setSpanContext(ROOT_CONTEXT, remote));
    expect(spanContext.spanId).not.toBe(remote.spanId);
    expect(traceparent(headers)).toEqual({ traceId: remote.traceId, spanId: spanContext.spanId, sampled: true });
    expect(headers["tracestate"]).toBe("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    expect(exporter.getFinishedSpans()[0]?.parentSpanContext?.spanId).toBe(remote.spanId);
  });

  it("carry nothing of a trace when no span is active", () => {
    expect(recordHeaders()).toEqual({ "content-type": "application/json" });
    // a tracer of the API with no SDK registered: its spans are not valid, so nothing travels
    expect(inSpan(() => recordHeaders(), trace.getTracer("no sdk")).value)
      .toEqual({ "content-type": "application/json" });
    inSpan(() => 0); // a span ended is no longer active
    expect(recordHeaders()).toEqual({ "content-type": "application/json" });
  });

  it("carry what the propagator the application registered writes too", () => {
    propagation.setGlobalPropagator(new CompositePropagator({
      propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
    }));
    const withBaggage = propagation.setBaggage(context.active(),
      propagation.createBaggage({ tenant: { value: "acme" } }));
    const { spanContext, value: headers } = inSpan(() => recordHeaders(), tracer, withBaggage);
    expect(traceparent(headers).spanId).toBe(spanContext.spanId);
    expect(headers["baggage"]).toBe("tenant=acme");
  });

  it("carry the traceparent the worker reads whatever the application's propagator writes, which has the last word",
    () => {
      propagation.setGlobalPropagator(new VendorPropagator());
      const { spanContext, value: headers } = inSpan(() => recordHeaders());
      expect(traceparent(headers)).toEqual({ traceId: spanContext.traceId, spanId: spanContext.spanId, sampled: true });
      expect(headers["x-vendor-trace"]).toBe(spanContext.traceId);
      expect(headers["tracestate"]).toBe("vendor=1");
      // without a span the propagator is not asked (this one would write a header of an invalid trace)
      expect(recordHeaders()).toEqual({ "content-type": "application/json" });
    });

  it("are what the SDK's own W3C propagator writes and reads, for many span contexts", () => {
    const official = new W3CTraceContextPropagator();
    let seed = 7;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    const hex = (length: number): string =>
      Array.from({ length }, () => "0123456789abcdef"[next() % 16]).join("").replace(/^0+$/, "1".repeat(length));
    for (let i = 0; i < 500; i++) {
      const spanContext: SpanContext = {
        traceId: hex(32), spanId: hex(16), traceFlags: next() % 2, isRemote: true,
        ...(i % 3 === 0 ? { traceState: parseTracestate(`k${i}=v${next() % 1000},other=x`) } : {}),
      };
      const active = trace.setSpanContext(ROOT_CONTEXT, spanContext);
      const ours = recordHeaders(active);
      const theirs: Record<string, string> = {};
      official.inject(active, theirs, { set: (carrier, key, value) => { carrier[key] = value; } });
      expect({ traceparent: ours["traceparent"], tracestate: ours["tracestate"] }).toEqual(theirs);
      const read = spanContextFromHeaders(ours);
      expect(read).toMatchObject({ traceId: spanContext.traceId, spanId: spanContext.spanId,
        traceFlags: spanContext.traceFlags, isRemote: true });
      expect(read?.traceState?.serialize()).toBe(spanContext.traceState?.serialize());
    }
  });
});

interface TraceVector {
  name: string;
  headers: [string, string][];
  expect: { trace_id: string; span_id: string; sampled: boolean; tracestate: string } | null;
}
const traceVectors = (JSON.parse(readFileSync(new URL("trace-headers.json", VECTORS), "utf8")) as
  { cases: TraceVector[] }).cases;

/** Headers as kafkajs hands them over: Buffers, the values of a name that occurs more than once in an array. */
function kafkaHeaders(pairs: [string, string][]): Record<string, Buffer | Buffer[]> {
  const out: Record<string, Buffer | Buffer[]> = {};
  for (const [key, text] of pairs) {
    const value = Buffer.from(text, "utf8");
    const prior = out[key];
    out[key] = prior === undefined ? value : [...(Array.isArray(prior) ? prior : [prior]), value];
  }
  return out;
}

describe("the shared trace header vectors", () => {
  it("are many, of both outcomes", () => {
    expect(traceVectors.filter((v) => v.expect !== null).length).toBeGreaterThan(15);
    expect(traceVectors.filter((v) => v.expect === null).length).toBeGreaterThan(10);
  });

  it.each(traceVectors.map((v) => [v.name, v] as const))("%s", (_name, vector) => {
    const read = spanContextFromHeaders(kafkaHeaders(vector.headers));
    const got = read === undefined ? null : {
      trace_id: read.traceId, span_id: read.spanId, sampled: (read.traceFlags & TraceFlags.SAMPLED) === 1,
      tracestate: read.traceState?.serialize() ?? "",
    };
    expect(got).toEqual(vector.expect);
    if (read !== undefined) expect(read.isRemote).toBe(true);
    // the SDK's own propagator agrees on the traceparent (it is laxer with tracestate, which is not compared), given
    // the last header of each name
    const official = trace.getSpanContext(new W3CTraceContextPropagator().extract(ROOT_CONTEXT,
      Object.fromEntries(vector.headers), { get: (c, k) => c[k], keys: (c) => Object.keys(c) }));
    expect(official === undefined ? null : [official.traceId, official.spanId, official.traceFlags & 1])
      .toEqual(read === undefined ? null : [read.traceId, read.spanId, read.traceFlags & 1]);
  });
});

const CONTEXT_BYTES = readFileSync(new URL("valid/context-full.canonical.json", VECTORS));
const WORKER_HEADERS = {
  "content-type": Buffer.from("application/json"), om_version: Buffer.from("7"),
  traceparent: Buffer.from("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
  tracestate: Buffer.from("om=w1,rojo=00f067aa0ba902b7"),
};

describe("a context record read with trace headers", () => {
  it("yields the worker's span context, remote, beside the record", () => {
    const record = decodeContextRecord(CONTEXT_BYTES, WORKER_HEADERS);
    const spanContext = spanContextOf(record);
    expect(spanContext).toMatchObject({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331",
      traceFlags: TraceFlags.SAMPLED, isRemote: true });
    expect(spanContext?.traceState?.get("om")).toBe("w1");
    // the record itself is the schema's, unchanged
    expect(Object.keys(record)).toEqual(Object.keys(decodeContextRecord(CONTEXT_BYTES)));
  });

  it("stays with the record the client's view hands back", () => {
    const view = new ContextView();
    const record = decodeContextRecord(CONTEXT_BYTES, WORKER_HEADERS);
    view.received(record);
    const latest = view.latestOf(record.thread_id);
    expect(latest === undefined ? undefined : spanContextOf(latest)?.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
  });

  it("continues the trace: a span started in its trace context is a child of the worker's span", () => {
    const record = decodeContextRecord(CONTEXT_BYTES, WORKER_HEADERS);
    const { spanContext } = inSpan(() => 0, tracer, traceContextOf(record, ROOT_CONTEXT));
    expect(spanContext.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    const [consumer] = exporter.getFinishedSpans();
    expect(consumer?.parentSpanContext).toMatchObject({ spanId: "b7ad6b7169203331", isRemote: true });
    expect(consumer?.spanContext().traceState?.serialize()).toBe("om=w1,rojo=00f067aa0ba902b7");
  });

  it("without trace headers yields none, and its trace context is the parent given", () => {
    const record = decodeContextRecord(CONTEXT_BYTES, { "content-type": Buffer.from("application/json") });
    expect(spanContextOf(record)).toBeUndefined();
    const parent = ROOT_CONTEXT.setValue(Symbol.for("om-stream.test"), 1);
    expect(traceContextOf(record, parent)).toBe(parent);
    // a record decoded twice is two records: the trace belongs to the one read with it
    expect(spanContextOf(decodeContextRecord(CONTEXT_BYTES))).toBeUndefined();
  });
});

describe("W3CTraceState", () => {
  it("puts an updated member first and keeps the rest in order", () => {
    const state = parseTracestate("a=1,b=2,c=3") ?? new W3CTraceState([]);
    expect(state.set("b", "9").serialize()).toBe("b=9,a=1,c=3");
    expect(state.unset("a").serialize()).toBe("b=2,c=3");
    expect(state.get("c")).toBe("3");
    expect(state.serialize()).toBe("a=1,b=2,c=3");
  });
});
