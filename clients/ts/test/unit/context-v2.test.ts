// The shared om.context/v2 vectors (../../schemas/vectors/context-v2.json), as tests/contract/
// test_context_v2_vectors.py runs them for the Python client: reading each sequence's records in the order given
// (the three topics interleaved, a cursor before its index or blocks), the client delivers exactly the
// om.context/v1 contexts the vectors say, at the records they say, and nothing else; after an erase's tombstone the
// thread has none. Each context keeps the trace context of the cursor record it came from.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ContextAssembly, createdAtMs, splitBlockKey } from "../../src/assembly.js";
import { ContextView } from "../../src/contexts.js";
import { decode, encodeCanonical, normalize, validate } from "../../src/contract.js";
import type { ContextRecord } from "../../src/generated/om.context.v1.js";
import { spanContextFromHeaders, spanContextOf } from "../../src/tracing.js";

const VECTORS = new URL("../../../../schemas/vectors/", import.meta.url);

interface Step { topic: string; key: string; value: unknown; delivers?: unknown; erased?: boolean }
interface Sequence { name: string; thread_id: string; records: Step[] }

const sequences = (JSON.parse(readFileSync(new URL("context-v2.json", VECTORS), "utf8")) as {
  sequences: Sequence[];
}).sequences;

const text = (value: Uint8Array): string => Buffer.from(value).toString("utf8");
const traceparentOf = (version: number): string =>
  `00-${(version + 1).toString(16).padStart(32, "0")}-${(version + 1).toString(16).padStart(16, "0")}-01`;

describe("the om.context/v2 vectors", () => {
  it("hold four sequences", () => {
    expect(sequences.length).toBeGreaterThanOrEqual(4);
  });

  it.each(sequences.map((s) => [s.name, s] as const))("%s: the client delivers exactly what they say",
    (_name, sequence) => {
      const view = new ContextView();
      let delivered = 0;
      let erased = false;
      sequence.records.forEach((step, i) => {
        const before = view.latestOf(sequence.thread_id);
        let fetch: unknown;
        if (step.topic === "om.context") {
          if (step.value === null) {
            view.tombstone(step.key);
          } else {
            const cursor = decode("om.context/v2", JSON.stringify(step.value));
            fetch = view.cursor(cursor, spanContextFromHeaders({ traceparent: traceparentOf(cursor.version) }));
          }
        } else if (step.topic === "om.context.index") {
          fetch = view.index(step.key,
            step.value === null ? undefined : decode("om.context-index/v1", JSON.stringify(step.value)));
        } else {
          const [threadId, digest] = splitBlockKey(step.key);
          fetch = view.block(threadId, digest,
            step.value === null ? undefined : decode("om.context-block/v1", JSON.stringify(step.value)).text);
        }
        expect(fetch, `step ${i}: a client that read every record asked for a run`).toBeUndefined();
        const after = view.latestOf(sequence.thread_id);
        if (step.erased) {
          expect(after, `step ${i}`).toBeUndefined();
          erased = true;
        } else if (step.delivers !== undefined) {
          expect(after, `step ${i}: no context delivered`).not.toBe(before);
          const got = after as ContextRecord;
          validate("om.context/v1", got);
          const want = decode("om.context/v1", JSON.stringify(step.delivers));
          expect(text(encodeCanonical("om.context/v1", got)), `step ${i}`)
            .toBe(text(encodeCanonical("om.context/v1", want)));
          // the same value a v1 record of these bytes decodes to
          expect(got).toEqual(normalize("om.context/v1", want));
          const span = spanContextOf(got);
          expect(span && `00-${span.traceId}-${span.spanId}-01`).toBe(traceparentOf(got.version));
          delivered++;
        } else {
          expect(after, `step ${i} (${step.topic} ${step.key}) delivered a context the vectors do not`).toBe(before);
        }
      });
      expect(delivered).toBeGreaterThanOrEqual(3);
      expect(erased).toBe(true);
    });
});

describe("the assembly", () => {
  it("asks once for a run it does not hold, and assembles the cursor with the run fetched", () => {
    // the first sequence's last delivered cursor, read by a client that read none before it
    const sequence = sequences.find((s) => s.records.some((r) => {
      const raw = (r.value as { raw?: { count?: number } } | null)?.raw;
      return r.delivers !== undefined && r.topic === "om.context" && (raw?.count ?? 0) > 1;
    })) as Sequence;
    const at = sequence.records.findIndex((r) => r.delivers !== undefined && r.topic === "om.context" &&
      ((r.value as { raw: { count?: number } }).raw.count ?? 0) > 1);
    const cursor = decode("om.context/v2", JSON.stringify(sequence.records[at]?.value));
    const assembly = new ContextAssembly();
    // the index and blocks it names, as a late client reads them from the compacted topics' beginning
    for (const step of sequence.records.slice(0, at)) {
      if (step.topic === "om.context.index" && step.value !== null) {
        assembly.onIndex(step.key, decode("om.context-index/v1", JSON.stringify(step.value)));
      } else if (step.topic === "om.context.blocks" && step.value !== null) {
        const [threadId, digest] = splitBlockKey(step.key);
        assembly.onBlock(threadId, digest, decode("om.context-block/v1", JSON.stringify(step.value)).text);
      }
    }
    const late = { ...cursor, new_messages: (cursor.new_messages ?? []).slice(-1) };
    const outcome = assembly.onCursor(late);
    expect(outcome).toEqual({ fetch: late });
    expect(assembly.step(late.thread_id)).toBeUndefined(); // asked once per cursor
    const want = decode("om.context/v1", JSON.stringify(sequence.records[at]?.delivers));
    expect(assembly.withRun(late, want.messages.slice(1))).toBeUndefined(); // a run short of one: no context
    const again = assembly.onCursor(late);
    expect(again).toEqual({ fetch: late });
    const done = assembly.withRun(late, want.messages);
    expect(done !== undefined && "context" in done && text(encodeCanonical("om.context/v1", done.context)))
      .toBe(text(encodeCanonical("om.context/v1", want)));
  });

  it("computes created_at in milliseconds as the worker does", () => {
    expect(createdAtMs("2026-03-01T09:00:00Z")).toBe(Date.UTC(2026, 2, 1, 9));
    expect(createdAtMs("2026-03-01T09:00:00.123999Z")).toBe(Date.UTC(2026, 2, 1, 9) + 123);
    expect(createdAtMs("2026-03-01T11:00:00.5+02:00")).toBe(Date.UTC(2026, 2, 1, 9) + 500);
    expect(createdAtMs("not a date")).toBeUndefined();
  });
});
