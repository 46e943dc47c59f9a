/**
 * Assembling `om.context/v2` contexts (contexts by reference, `OM_CONTEXT_WIRE=v2`) into the `ContextRecord` an
 * `om.context/v1` record is: the cursors of the context topic, the block index (`om.context.index`) and the blocks
 * (`om.context.blocks`), read apart, since Kafka keeps order within a topic-partition, not across topics. The rules
 * are those of the worker's `om_stream/wire/context_refs.py` and the Python client's `om_stream/client/assembly.py`;
 * the shared vectors (`schemas/vectors/context-v2.json`) hold all three clients to the same deliveries.
 *
 * Per thread it holds the latest index, the blocks (until tombstoned), the newest cursor not yet assembled, and the
 * messages it knows in position order (those of the last context it assembled, then every cursor's `new_messages`
 * since). A cursor waits until the index it names and all of its blocks are held; a newer cursor replaces it (it
 * covers every message the older one did). When the run of messages does not check out (the client started late,
 * or compaction removed a cursor), the cursor is handed back once (`{ fetch: cursor }`), for its run to be fetched
 * from the worker (`GET /v1/threads/{id}/messages`), instead of giving a wrong context. No I/O here: `ContextView`
 * holds it, the client reads the topics and fetches.
 */
import type { SpanContext } from "@opentelemetry/api";
import { normalDateTime, normalize } from "./contract.js";
import type { BlockRecord } from "./generated/om.context-block.v1.js";
import type { ContextIndex } from "./generated/om.context-index.v1.js";
import type { ContextRecord } from "./generated/om.context.v1.js";
import type { ContextCursor } from "./generated/om.context.v2.js";

export type { BlockRecord, ContextCursor, ContextIndex };

/** A message of a thread, as cursors and contexts carry it. */
export type ThreadMessage = ContextRecord["messages"][number];

/** Threads whose index and blocks are held (the ones heard from last). */
export const THREADS_HELD = 16_384;

const OPEN = "<observations>";
const CLOSE = "</observations>";

/** What a record read makes available: a context assembled (with its cursor's trace context), or a run to fetch. */
export type Assembled =
  | { context: ContextRecord; spanContext: SpanContext | undefined }
  | { fetch: ContextCursor }
  | undefined;

interface ThreadState {
  index: ContextIndex | undefined;
  blocks: Map<string, string>;
  pending: ContextCursor | undefined;
  spanContext: SpanContext | undefined; // the pending cursor's record's trace context
  asked: boolean; // the pending cursor's run was handed back for fetching already (once per cursor)
  known: ThreadMessage[];
}

/** The split of a block key `<thread id>/<digest>` (the digest has a fixed length, so a `/` in the id is fine). */
export function splitBlockKey(key: string): [string, string] {
  return [key.slice(0, -23), key.slice(-22)];
}

export class ContextAssembly {
  private readonly threads = new Map<string, ThreadState>();

  constructor(readonly limit = THREADS_HELD) {}

  private thread(threadId: string): ThreadState {
    const state = this.threads.get(threadId) ?? {
      index: undefined, blocks: new Map(), pending: undefined, spanContext: undefined, asked: false, known: [],
    };
    this.threads.delete(threadId);
    this.threads.set(threadId, state); // to the end: the threads heard from last are kept
    while (this.threads.size > this.limit) this.threads.delete(this.threads.keys().next().value as string);
    return state;
  }

  /** A cursor read from the context topic (`spanContext`: its record's trace context). */
  onCursor(cursor: ContextCursor, spanContext?: SpanContext): Assembled {
    const state = this.thread(cursor.thread_id);
    if (state.pending !== undefined && state.pending.version > cursor.version) {
      return undefined; // an older cursor read again (at-least-once): the pending one covers it
    }
    state.known = knownMessages(state.known, cursor);
    state.pending = cursor;
    state.spanContext = spanContext;
    state.asked = false;
    return this.step(cursor.thread_id);
  }

  /** A record of the index topic (`undefined`: its tombstone). */
  onIndex(threadId: string, index: ContextIndex | undefined): Assembled {
    this.thread(threadId).index = index;
    return this.step(threadId);
  }

  /** A record of the blocks topic (`undefined`: its tombstone). */
  onBlock(threadId: string, digest: string, text: string | undefined): Assembled {
    const state = this.thread(threadId);
    if (text === undefined) {
      state.blocks.delete(digest);
      return undefined;
    }
    state.blocks.set(digest, text);
    return this.step(threadId);
  }

  /** The thread's pending cursor assembled, once the index and blocks are held. */
  step(threadId: string): Assembled {
    const state = this.threads.get(threadId);
    if (state?.pending === undefined || !ready(state.pending, state.index, state.blocks)) return undefined;
    const run = resolveRun(state.pending, state.known);
    if (run === undefined) {
      if (state.asked) return undefined;
      state.asked = true;
      return { fetch: state.pending };
    }
    return this.assembled(state, run);
  }

  /**
   * `cursor` assembled with the messages fetched for it (pin, then the run `first`..`through`); undefined when it is
   * no longer the thread's pending cursor, or the fetched run does not check out either.
   */
  withRun(cursor: ContextCursor, fetched: readonly ThreadMessage[]): Assembled {
    const state = this.threads.get(cursor.thread_id);
    if (state === undefined || state.pending !== cursor || !ready(cursor, state.index, state.blocks)) return undefined;
    const run = resolveRun(cursor, fetched);
    return run === undefined ? undefined : this.assembled(state, run);
  }

  private assembled(state: ThreadState, run: ThreadMessage[]): Assembled {
    const cursor = state.pending as ContextCursor;
    const context = rebuild(cursor, state.index as ContextIndex, state.blocks, run);
    const spanContext = state.spanContext;
    state.pending = undefined;
    state.spanContext = undefined;
    state.known = run;
    return { context, spanContext };
  }

  /** The thread was erased. */
  forget(threadId: string): void {
    this.threads.delete(threadId);
  }
}

// -- the algorithm (om_stream/wire/context_refs.py) -----------------------------------------------------------------

/**
 * The messages a reader knows for a thread once it reads `cursor`, in position order: those of the context it
 * rebuilt before that the cursor does not send again, then the cursor's `new_messages`.
 */
export function knownMessages(previous: readonly ThreadMessage[], cursor: ContextCursor): ThreadMessage[] {
  const fresh = (cursor.new_messages ?? []) as ThreadMessage[];
  const again = new Set(fresh.map((m) => m.message_id));
  return [...previous.filter((m) => !again.has(m.message_id)), ...fresh];
}

/**
 * `created_at` in epoch milliseconds, as the worker computes it (`int(datetime.timestamp() * 1000)`: microseconds
 * over 1e6, times 1000, truncated); undefined when it is not a date-time.
 */
export function createdAtMs(text: string): number | undefined {
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{6}))?(Z|[+-]\d{2}:\d{2})$/.exec(normalDateTime(text));
  if (match === null) return undefined;
  const [, seconds, micros = "000000", zone] = match;
  const ms = Date.parse(`${seconds}${zone}`);
  if (Number.isNaN(ms)) return undefined;
  return Math.trunc(((ms * 1000 + Number(micros)) / 1e6) * 1000);
}

/**
 * The raw messages of `cursor` (pin, then run) found in `known` (a thread's messages in position order), or
 * undefined when they are not all there: the reader fetches the run instead.
 */
export function resolveRun(cursor: ContextCursor, known: readonly ThreadMessage[]): ThreadMessage[] | undefined {
  const raw = cursor.raw;
  const byId = new Map(known.map((m) => [m.message_id, m]));
  const out: ThreadMessage[] = [];
  const pinnedId = raw.pinned_message_id ?? undefined;
  if (pinnedId !== undefined) {
    const pinned = byId.get(pinnedId);
    if (pinned === undefined) return undefined;
    out.push(pinned);
  }
  const count = raw.count ?? 0;
  if (count === 0) return out;
  const firstId = raw.first_message_id ?? undefined;
  const throughId = raw.through_message_id ?? undefined;
  if (firstId === undefined || throughId === undefined || !byId.has(firstId) || !byId.has(throughId)) return undefined;
  const ids = known.map((m) => m.message_id);
  const first = ids.indexOf(firstId);
  const through = ids.lastIndexOf(throughId);
  if (through < first) return undefined;
  const skip = new Set(raw.excluded ?? []);
  if (pinnedId !== undefined) skip.add(pinnedId);
  const before = raw.expire_before ?? undefined;
  const run = known.slice(first, through + 1).filter((m) => {
    if (skip.has(m.message_id)) return false;
    if (before === undefined) return true;
    const created = createdAtMs(m.created_at);
    return created !== undefined && created >= before;
  });
  if (run.length !== count || run[0]?.message_id !== firstId) return undefined;
  return [...out, ...run];
}

/** The reader holds the index the cursor names and every block of it. */
export function ready(cursor: ContextCursor, index: ContextIndex | undefined, blocks: ReadonlyMap<string, string>):
boolean {
  return index !== undefined && index.version === cursor.index_version && index.blocks.every((d) => blocks.has(d));
}

/**
 * The observation log as `om.context/v1` carries it: the blocks between the first `<observations>` block and the
 * last `</observations>` block, separated by a blank line, inside the two tags on lines of their own; the empty
 * string without such blocks.
 */
export function observationsOf(systemBlocks: readonly string[]): string {
  const start = systemBlocks.indexOf(OPEN);
  const end = systemBlocks.lastIndexOf(CLOSE);
  if (start < 0 || end < 0) return "";
  const segments = systemBlocks.slice(start + 1, end);
  return segments.length > 0 ? `${OPEN}\n${segments.join("\n\n")}\n${CLOSE}` : "";
}

/** The `om.context/v1` record of `cursor` (`ready` must hold), in its normal form, as a v1 record is read. */
export function rebuild(cursor: ContextCursor, index: ContextIndex, blocks: ReadonlyMap<string, string>,
                        messages: readonly ThreadMessage[]): ContextRecord {
  const systemBlocks = index.blocks.map((d) => blocks.get(d) as string);
  return normalize("om.context/v1", {
    schema: "om.context/v1", thread_id: cursor.thread_id, resource_id: cursor.resource_id, version: cursor.version,
    through_message_id: cursor.through_message_id, observations: observationsOf(systemBlocks), hints: cursor.hints,
    messages: [...messages], system_blocks: systemBlocks, continuation: cursor.continuation ?? null,
    tokens: cursor.tokens, generation: cursor.generation, thread_title: cursor.thread_title ?? null,
  });
}
