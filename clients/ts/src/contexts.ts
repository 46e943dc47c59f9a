/**
 * What a client knows of its threads' contexts: the latest context read from the compacted context topic per
 * thread, the order of the messages it published (read-your-writes), and what an erase takes away. No Kafka here:
 * the client feeds it the records it reads, so its rules are tested on their own.
 *
 * Erasure: the worker publishes a tombstone (key = thread id, value null) on the context topic for every thread it
 * erases, before the erase's receipt. The context topic and the events topic are read on their own, so the receipt
 * may come first. Until a thread's tombstone is read, a context of it read from the topic was published before the
 * erase: it is dropped. After the tombstone every context is a fresh conversation's (the topic's order per key).
 *
 * `om.context/v2`: the cursors, indexes and blocks read go through the view's assembly (`assembly.ts`); a context
 * assembled is received like an `om.context/v1` record, with the trace context of its cursor's record. An erase
 * forgets what the assembly holds of the thread too.
 */
import type { SpanContext } from "@opentelemetry/api";
import { ContextAssembly, type Assembled, type ThreadMessage } from "./assembly.js";
import type { EraseSubject } from "./erase.js";
import type { ErasedEvent } from "./generated/data-om-erased.v1.js";
import type { ContextIndex } from "./generated/om.context-index.v1.js";
import type { ContextRecord } from "./generated/om.context.v1.js";
import type { ContextCursor } from "./generated/om.context.v2.js";
import { keepSpanContext } from "./tracing.js";
import { withTimeout } from "./wait.js";

const REMEMBERED_PER_THREAD = 4096;

/** One erase in flight, from before its command is sent until its receipt is applied. */
export interface ErasureWatch {
  /** Threads whose tombstone was read since the erase began. */
  readonly tombstoned: Set<string>;
}

export class ContextView {
  private readonly latest = new Map<string, ContextRecord>();
  private readonly waiters = new Set<() => void>();
  private readonly sent = new Map<string, Map<string, number>>();
  private sequence = 0;
  private readonly erasing = new Set<ErasureWatch>();
  private readonly awaitingTombstone = new Set<string>();
  private readonly assembly = new ContextAssembly();

  /** This client published `messageId` to `threadId` (after everything it published before). */
  published(threadId: string, messageId: string): void {
    let sent = this.sent.get(threadId);
    if (sent === undefined) this.sent.set(threadId, (sent = new Map()));
    sent.delete(messageId);
    sent.set(messageId, ++this.sequence);
    if (sent.size > REMEMBERED_PER_THREAD) sent.delete(sent.keys().next().value as string);
  }

  /** Whether `context` reflects `messageId` (its last message, or one this client published after it). */
  includes(context: ContextRecord, messageId: string): boolean {
    const through = context.through_message_id;
    if (through === messageId) return true;
    const sent = this.sent.get(context.thread_id);
    const mine = sent?.get(messageId);
    const last = through === null ? undefined : sent?.get(through);
    if (mine !== undefined && last !== undefined && last > mine) return true;
    return context.messages.some((m) => m.message_id === messageId);
  }

  latestOf(threadId: string): ContextRecord | undefined {
    return this.latest.get(threadId);
  }

  /** The first context of `threadId` that includes `messageId`; rejects after `timeoutMs`. */
  awaitIncluding(threadId: string, messageId: string, timeoutMs: number): Promise<ContextRecord> {
    return this.await(threadId, (context) => this.includes(context, messageId), timeoutMs,
      `includes message ${messageId}`);
  }

  /** The thread's latest context once `ready` says it is the one; rejects after `timeoutMs` (`what`: the error's). */
  await(threadId: string, ready: (context: ContextRecord) => boolean, timeoutMs: number, what: string):
  Promise<ContextRecord> {
    const met = (): ContextRecord | undefined => {
      const context = this.latest.get(threadId);
      return context !== undefined && ready(context) ? context : undefined;
    };
    const now = met();
    if (now !== undefined) return Promise.resolve(now);
    let check: () => void = () => undefined;
    const arrival = new Promise<ContextRecord>((resolve) => {
      check = () => {
        const context = met();
        if (context !== undefined) { this.waiters.delete(check); resolve(context); }
      };
      this.waiters.add(check);
    });
    return withTimeout(arrival, timeoutMs, `no context of thread ${threadId} ${what} after ${timeoutMs}ms`,
      () => this.waiters.delete(check));
  }

  /** A context read from the topic. */
  received(context: ContextRecord): void {
    if (this.awaitingTombstone.has(context.thread_id)) return; // published before the erase that removed it
    const current = this.latest.get(context.thread_id);
    if (current !== undefined && current.version > context.version) return; // an older one, replayed
    this.latest.set(context.thread_id, context);
    for (const check of [...this.waiters]) check();
  }

  /**
   * An `om.context/v2` cursor read from the context topic (`spanContext`: its record's); resolves to the cursor when
   * its run must be fetched (`fetched`).
   */
  cursor(cursor: ContextCursor, spanContext: SpanContext | undefined): ContextCursor | undefined {
    if (this.awaitingTombstone.has(cursor.thread_id)) return undefined; // published before the erase
    return this.deliver(this.assembly.onCursor(cursor, spanContext));
  }

  /** A record of the index topic (undefined: a tombstone); the cursor whose run must be fetched, if any. */
  index(threadId: string, index: ContextIndex | undefined): ContextCursor | undefined {
    return this.deliver(this.assembly.onIndex(threadId, index));
  }

  /** A record of the blocks topic (undefined: a tombstone); the cursor whose run must be fetched, if any. */
  block(threadId: string, digest: string, text: string | undefined): ContextCursor | undefined {
    return this.deliver(this.assembly.onBlock(threadId, digest, text));
  }

  /** The run fetched for a cursor that `cursor`, `index` or `block` handed back. */
  fetched(cursor: ContextCursor, messages: readonly ThreadMessage[]): void {
    this.deliver(this.assembly.withRun(cursor, messages));
  }

  private deliver(outcome: Assembled): ContextCursor | undefined {
    if (outcome === undefined) return undefined;
    if ("fetch" in outcome) return outcome.fetch;
    this.received(keepSpanContext(outcome.context, outcome.spanContext));
    return undefined;
  }

  /** A tombstone read from the topic: the thread was erased, its context is gone. */
  tombstone(threadId: string): void {
    this.forget(threadId);
    this.awaitingTombstone.delete(threadId);
    for (const watch of this.erasing) watch.tombstoned.add(threadId);
  }

  /** An erase begins (before its command is sent): the tombstones read from now on are noted. */
  beginErase(): ErasureWatch {
    const watch: ErasureWatch = { tombstoned: new Set() };
    this.erasing.add(watch);
    return watch;
  }

  /** The erase's watch ends (receipt or not). */
  endErase(watch: ErasureWatch): void {
    this.erasing.delete(watch);
  }

  /**
   * The receipt came: the erased threads' contexts and published messages are forgotten. A thread whose tombstone
   * was read since the erase began holds only a fresh conversation's context, kept; for the others, when the worker
   * published tombstones (`removed.contexts`), contexts are dropped until the thread's tombstone is read.
   */
  erased(subject: EraseSubject, receipt: ErasedEvent, watch: ErasureWatch): void {
    const threads = subject.threadId !== undefined ? [subject.threadId]
      : [...this.latest.values()].filter((c) => c.resource_id === subject.resourceId).map((c) => c.thread_id);
    const tombstonesSent = receipt.removed.contexts > 0;
    for (const thread of threads) {
      if (watch.tombstoned.has(thread)) continue;
      this.forget(thread);
      if (tombstonesSent) this.awaitingTombstone.add(thread);
    }
  }

  private forget(threadId: string): void {
    this.latest.delete(threadId);
    this.sent.delete(threadId);
    this.assembly.forget(threadId);
  }
}
