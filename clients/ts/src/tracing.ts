/**
 * W3C Trace Context across Kafka (https://www.w3.org/TR/trace-context/): the trace headers the client writes on
 * every record it publishes, and the span context it reads from the context records the worker publishes.
 *
 * Only the OpenTelemetry API is used here: the application owns the SDK. Without one no span context is ever
 * active, so nothing is written and publishing costs one context lookup more.
 *
 * - Writing: the caller's active context, in W3C Trace Context (`traceparent`, `tracestate`: the headers the worker
 *   reads, whatever propagator the application uses), then through the propagator the application registered
 *   globally, if any: it has the last word on what it writes (its own tracestate, baggage, another format's headers).
 * - Reading: always W3C Trace Context, the format the worker writes, whatever the application registered, so that
 *   every client extracts the same span context from the same headers (`schemas/vectors/trace-headers.json`). Of
 *   several headers of one name the last counts (Java's `Headers.lastHeader`). An invalid `tracestate` is dropped as
 *   a whole and never costs the `traceparent` (as the Go and Python propagators do); a valid one is kept whole,
 *   however long.
 *
 * A context record read by the client keeps the span context it came with (a WeakMap: the record stays the plain
 * `ContextRecord` of the schema): `spanContextOf(record)`, `traceContextOf(record)`.
 */
import {
  context, isSpanContextValid, propagation, trace, type Context, type SpanContext, type TraceState,
} from "@opentelemetry/api";
import type { IHeaders } from "kafkajs";
import { decode } from "./contract.js";
import type { ContextRecord } from "./generated/om.context.v1.js";

export const TRACEPARENT = "traceparent";
export const TRACESTATE = "tracestate";

/** Headers as kafkajs reads them, or as plain strings (`EventEnvelope.headers`). */
export type RecordHeaders = IHeaders | Record<string, string | undefined>;

// -- writing -------------------------------------------------------------------------------------------------------

/** The headers of a record the client publishes: its content type and the trace context of `active`. */
export function recordHeaders(active: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  injectTraceContext(active, carrier);
  return { ...carrier, "content-type": "application/json" };
}

/**
 * Write the trace context of `active` into `carrier`: nothing when it holds no valid span context (no SDK, or no
 * span started); else `traceparent` and `tracestate`, then what the globally registered propagator writes (nothing
 * when none is registered).
 */
export function injectTraceContext(active: Context, carrier: Record<string, string>): void {
  const spanContext = trace.getSpanContext(active);
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return;
  carrier[TRACEPARENT] = formatTraceparent(spanContext);
  const state = spanContext.traceState?.serialize() ?? "";
  if (state !== "") carrier[TRACESTATE] = state;
  propagation.inject(active, carrier);
}

/** `traceparent` of version 00; of the flags only those version 00 defines (sampled, random) are written. */
export function formatTraceparent(spanContext: SpanContext): string {
  const flags = (spanContext.traceFlags & 0x03).toString(16).padStart(2, "0");
  return `00-${spanContext.traceId.toLowerCase()}-${spanContext.spanId.toLowerCase()}-${flags}`;
}

// -- reading -------------------------------------------------------------------------------------------------------

// version 00 is exactly this; a later version may append fields after a dash, which are ignored
const TRACEPARENT_FORMAT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ALL_ZERO = /^0+$/;
const KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/;
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;
const MAX_MEMBERS = 32;
const OWS = /^[ \t]+|[ \t]+$/g;

/** The fields of a valid `traceparent`, or undefined. */
export function parseTraceparent(value: string):
{ traceId: string; spanId: string; traceFlags: number } | undefined {
  const match = TRACEPARENT_FORMAT.exec(value);
  if (match === null) return undefined;
  const [, version = "", traceId = "", spanId = "", flags = "", rest] = match;
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (ALL_ZERO.test(traceId) || ALL_ZERO.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16) };
}

/**
 * A `tracestate` list, or undefined when it is empty or invalid anywhere (a key or value out of the grammar, a
 * duplicate key, more than 32 members): the W3C rules, with optional white space around members.
 */
export function parseTracestate(value: string): W3CTraceState | undefined {
  const members: [string, string][] = [];
  const keys = new Set<string>();
  for (const raw of value.split(",")) {
    const member = raw.replace(OWS, "");
    if (member === "") continue;
    const at = member.indexOf("=");
    if (at < 0) return undefined;
    const key = member.slice(0, at);
    const memberValue = member.slice(at + 1);
    if (!KEY.test(key) || !VALUE.test(memberValue) || keys.has(key)) return undefined;
    keys.add(key);
    members.push([key, memberValue]);
    if (members.length > MAX_MEMBERS) return undefined;
  }
  return members.length === 0 ? undefined : new W3CTraceState(members);
}

/**
 * A parsed `tracestate`, kept whole (the API's own `createTraceState` drops a list longer than 512 characters, which
 * the Go and Python clients pass on). Immutable: `set` puts the member first, as W3C asks of an updated vendor.
 */
export class W3CTraceState implements TraceState {
  constructor(private readonly members: readonly (readonly [string, string])[]) {}

  set(key: string, value: string): TraceState {
    return new W3CTraceState([[key, value], ...this.members.filter(([k]) => k !== key)]);
  }

  unset(key: string): TraceState {
    return new W3CTraceState(this.members.filter(([k]) => k !== key));
  }

  get(key: string): string | undefined {
    return this.members.find(([k]) => k === key)?.[1];
  }

  serialize(): string {
    return this.members.map(([k, v]) => `${k}=${v}`).join(",");
  }
}

// kafkajs hands the values of a header name that occurs more than once as an array, in record order
function lastValue(headers: RecordHeaders, name: string): string | undefined {
  const value = headers[name];
  const last = Array.isArray(value) ? value[value.length - 1] : value;
  return last === undefined ? undefined : last.toString();
}

/**
 * The remote span context in a record's `traceparent` and `tracestate` headers (names exact; the last header of
 * each name), or undefined when there is none or it is invalid.
 */
export function spanContextFromHeaders(headers: RecordHeaders): SpanContext | undefined {
  const parent = parseTraceparent(lastValue(headers, TRACEPARENT) ?? "");
  if (parent === undefined) return undefined;
  const traceState = parseTracestate(lastValue(headers, TRACESTATE) ?? "");
  return { ...parent, isRemote: true, ...(traceState === undefined ? {} : { traceState }) };
}

const traces = new WeakMap<ContextRecord, SpanContext>();

/**
 * Decode an `om.context/v1` record value and keep the span context of its headers with it (what the client does
 * with every context it reads; for an agent that reads the context topic with a consumer of its own).
 */
export function decodeContextRecord(value: Uint8Array | string, headers: RecordHeaders = {}): ContextRecord {
  const record = decode("om.context/v1", value);
  const spanContext = spanContextFromHeaders(headers);
  if (spanContext !== undefined) traces.set(record, spanContext);
  return record;
}

/** Keep `spanContext` with a context assembled from an `om.context/v2` cursor (the trace of the cursor's record). */
export function keepSpanContext(record: ContextRecord, spanContext: SpanContext | undefined): ContextRecord {
  if (spanContext !== undefined) traces.set(record, spanContext);
  return record;
}

/**
 * The span context a context record was published under (the worker's span that handled the message), remote; or
 * undefined when its record carried none (tracing off in the worker) or it was not read by this package.
 */
export function spanContextOf(record: ContextRecord): SpanContext | undefined {
  return traces.get(record);
}

/**
 * `parent` (default: the active context) with the record's span context as the remote parent: a span started in it
 * continues the trace the agent's message began. `parent` itself when the record carried none.
 */
export function traceContextOf(record: ContextRecord, parent: Context = context.active()): Context {
  const spanContext = traces.get(record);
  return spanContext === undefined ? parent : trace.setSpanContext(parent, spanContext);
}
