/**
 * `OMClient`: what an agent does with om-stream over Kafka (kafkajs).
 *
 * - `publish(message)`: an `om.message/v1` record, key = thread id, murmur2-partitioned like the Java client.
 * - `awaitContext(thread, messageId)`: read-your-writes over the compacted context topic.
 * - `events(thread)`: the thread's `data-om-*` events, validated, with their CloudEvents attributes.
 * - `settled(thread, messageId)`: wait until the thread's memory has caught up through the message (a `progress`
 *   command on `om.commands`, answered on `om.events`: see `settled.ts`).
 * - `recall(resourceId, args)`: the recall tool over `om.recall.requests` -> `om.recall.responses` (key = resource id),
 *   matched by `correlation_id`.
 * - `erase({threadId} | {resourceId})`: forget a thread, or a resource and every thread of it, for good: an `erase`
 *   command on `om.commands`, and its receipt (`data-om-erased`) waited for on `om.events`.
 *
 * Every record it publishes carries the caller's trace context (`traceparent`, `tracestate` headers), and every
 * context it reads keeps the worker's (`spanContextOf`, `traceContextOf`): see `tracing.ts`.
 *
 * Contexts come whole (`om.context/v1`) or by reference (`om.context/v2`, `OM_CONTEXT_WIRE=v2`: a cursor on the
 * context topic, the system blocks on `om.context.index` and `om.context.blocks`, read from their beginning once
 * the first cursor comes); either way `awaitContext` and `latestContext` return the same `ContextRecord`
 * (`assembly.ts`). A v2 context whose raw messages the client does not hold (it started after they were published)
 * is completed through the worker's HTTP API when `messagesApi` is given (`messages-api.ts`), else it waits for one
 * it can assemble.
 */
import { randomUUID } from "node:crypto";
import { Kafka, logLevel, Partitioners, type KafkaConfig, type KafkaMessage, type Producer } from "kafkajs";
import { splitBlockKey } from "./assembly.js";
import { ContextView } from "./contexts.js";
import { ContractError, decode, encodeCanonical, normalize, validate } from "./contract.js";
import { commandKey, eraseCommand, type EraseSubject } from "./erase.js";
import type { ErasedEvent } from "./generated/data-om-erased.v1.js";
import type { ProgressEvent } from "./generated/data-om-progress.v1.js";
import type { Payloads } from "./generated/index.js";
import type { ContextRecord } from "./generated/om.context.v1.js";
import type { ContextCursor } from "./generated/om.context.v2.js";
import type { MessageRecord } from "./generated/om.message.v1.js";
import type { RecallRequest } from "./generated/om.recall.request.v1.js";
import type { RecallResponse } from "./generated/om.recall.response.v1.js";
import type { MessagesApi } from "./messages-api.js";
import { partitionFor } from "./partition.js";
import { progressCommand, Settling } from "./settled.js";
import { TopicTail } from "./tail.js";
import { keepSpanContext, recordHeaders, spanContextFromHeaders } from "./tracing.js";
import { withTimeout } from "./wait.js";

export interface Topics {
  messages: string;
  commands: string;
  events: string;
  context: string;
  /** `om.context/v2`'s topics, read once a v2 context comes. */
  contextIndex: string;
  contextBlocks: string;
  recallRequests: string;
  recallResponses: string;
}

export const DEFAULT_TOPICS: Topics = {
  messages: "om.messages", commands: "om.commands", events: "om.events", context: "om.context",
  contextIndex: "om.context.index", contextBlocks: "om.context.blocks",
  recallRequests: "om.recall.requests", recallResponses: "om.recall.responses",
};

export interface ClientOptions {
  brokers: string[];
  topics?: Partial<Topics>;
  clientId?: string;
  /** Anything else kafkajs takes (ssl, sasl, logLevel, retry, ...). */
  kafka?: Partial<KafkaConfig>;
  topicTimeoutMs?: number;
  /**
   * The worker's HTTP API, to complete an `om.context/v2` context whose raw messages the client does not hold;
   * without it such a context waits for one the client can assemble.
   */
  messagesApi?: MessagesApi;
}

export interface Published { messageId: string; partition: number; offset: string }

/** A message as an agent writes it: the schema tag may be left out. */
export type MessageInput = Omit<MessageRecord, "schema"> & { schema?: "om.message/v1" };

export type RecallArguments = NonNullable<RecallRequest["arguments"]>;

type Strip<S> = S extends `${infer T}/v1` ? T : never;
export type EventType = Strip<Extract<keyof Payloads, `data-om-${string}`>>;

/** One event: `data` is validated against the schema named by `ce_type`; `id` is deterministic (dedupe on it). */
export interface EventEnvelope<T extends EventType = EventType> {
  type: T;
  id: string;
  source: string;
  subject: string;
  time: string;
  specversion: string;
  data: Payloads[`${T}/v1`];
  headers: Record<string, string>;
  partition: number;
  offset: string;
}

function headerText(headers: KafkaMessage["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers ?? {})) {
    const first = Array.isArray(value) ? value[0] : value;
    if (first !== undefined) out[key] = first.toString();
  }
  return out;
}

/** A thread's events: `await stream.start()` (or `client.events()` which starts it) before publishing. */
export class EventStream implements AsyncIterable<EventEnvelope> {
  private readonly queue: EventEnvelope[] = [];
  private waiting: ((event: EventEnvelope) => void) | undefined;
  private readonly tail: TopicTail;

  constructor(kafka: Kafka, topic: string, readonly threadId: string, fromBeginning: boolean, partitionOf: (count: number) => number) {
    this.tail = new TopicTail(kafka, topic, (message, partition) => this.onRecord(message, partition),
      { fromBeginning, partitions: (count) => [partitionOf(count)] });
  }

  start(): Promise<void> { return this.tail.start(); }
  stop(): Promise<void> { return this.tail.stop(); }

  private async onRecord(message: KafkaMessage, partition: number): Promise<void> {
    if (message.key?.toString() !== this.threadId || message.value === null) return;
    const headers = headerText(message.headers);
    const type = headers["ce_type"] ?? "";
    if (!type.startsWith("data-om-")) return;
    let data: unknown;
    try {
      data = decode(`${type}/v1` as `${EventType}/v1`, message.value);
    } catch (error) {
      if (error instanceof ContractError && error.reason === "unknown_payload") return; // a newer event type
      throw error;
    }
    const event = {
      type, data, headers, partition, offset: message.offset, id: headers["ce_id"] ?? "",
      source: headers["ce_source"] ?? "", subject: headers["ce_subject"] ?? "", time: headers["ce_time"] ?? "",
      specversion: headers["ce_specversion"] ?? "",
    } as EventEnvelope;
    const waiting = this.waiting;
    if (waiting !== undefined) {
      this.waiting = undefined;
      waiting(event);
    } else {
      this.queue.push(event);
    }
  }

  /** The next event; rejects after `timeoutMs`. */
  next(timeoutMs = 30_000): Promise<EventEnvelope> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    const arrival = new Promise<EventEnvelope>((resolve) => { this.waiting = resolve; });
    return withTimeout(arrival, timeoutMs, `no event of thread ${this.threadId} after ${timeoutMs}ms`,
      () => { this.waiting = undefined; });
  }

  async *[Symbol.asyncIterator](): AsyncIterator<EventEnvelope> {
    for (;;) yield await this.next(2 ** 31 - 1);
  }
}

export class OMClient {
  readonly topics: Topics;
  private readonly kafka: Kafka;
  private readonly producer: Producer;
  private readonly contexts: TopicTail;
  private responses: Promise<TopicTail> | undefined;
  private references: Promise<TopicTail[]> | undefined; // om.context/v2's index and blocks, from the first cursor
  private readonly view = new ContextView();
  private readonly pending = new Map<string, (response: RecallResponse) => void>();

  constructor(private readonly options: ClientOptions) {
    this.topics = { ...DEFAULT_TOPICS, ...options.topics };
    this.kafka = new Kafka({ clientId: options.clientId ?? "om-stream-client-ts", brokers: options.brokers,
      logLevel: logLevel.WARN, ...options.kafka });
    this.producer = this.kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner,
      allowAutoTopicCreation: false });
    this.contexts = new TopicTail(this.kafka, this.topics.context, (m) => this.onContext(m),
      { topicTimeoutMs: options.topicTimeoutMs });
  }

  async start(): Promise<void> {
    await this.producer.connect();
    await this.contexts.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.contexts.stop(), this.responses?.then((tail) => tail.stop()),
      this.references?.then((tails) => Promise.all(tails.map((tail) => tail.stop())), () => undefined),
      this.producer.disconnect()]);
  }

  // -- messages and read-your-writes -------------------------------------------------------------------------------

  /** Publish one message (key = thread id); resolves on the broker's acknowledgement. */
  async publish(input: MessageInput): Promise<Published> {
    const record = normalize("om.message/v1", validate("om.message/v1", { ...input, schema: "om.message/v1" }));
    this.view.published(record.thread_id, record.message_id);
    const [meta] = await this.producer.send({
      topic: this.topics.messages, acks: -1,
      messages: [{ key: record.thread_id, value: Buffer.from(encodeCanonical("om.message/v1", record)),
        headers: recordHeaders() }],
    });
    return { messageId: record.message_id, partition: meta?.partition ?? -1, offset: meta?.baseOffset ?? "" };
  }

  /** Whether `context` reflects `messageId` (its last message, or one this client published after it). */
  includes(context: ContextRecord, messageId: string): boolean {
    return this.view.includes(context, messageId);
  }

  /** The newest context of the thread read since the client started (undefined if none, or erased since). */
  latestContext(threadId: string): ContextRecord | undefined {
    return this.view.latestOf(threadId);
  }

  /** The first context of `threadId` that includes `messageId`; rejects after `timeoutMs`. */
  awaitContext(threadId: string, messageId: string, timeoutMs = 30_000): Promise<ContextRecord> {
    return this.view.awaitIncluding(threadId, messageId, timeoutMs);
  }

  // -- has memory caught up? ---------------------------------------------------------------------------------------

  /**
   * Publish a `progress` command (`resourceId` is needed in resource scope); resolves to its id, which the answering
   * `data-om-progress` event carries as `requestId`.
   */
  async askProgress(threadId: string, throughMessageId?: string | null, options: { resourceId?: string } = {}):
  Promise<string> {
    const command = progressCommand(threadId, throughMessageId, options.resourceId);
    await this.producer.send({
      topic: this.topics.commands, acks: -1,
      messages: [{ key: threadId, value: Buffer.from(encodeCanonical("om.command/v1", command)),
        headers: recordHeaders() }],
    });
    return command.command_id;
  }

  /**
   * Wait until the thread's memory has settled through `throughMessageId` (its newest message when the worker
   * answers, when absent): the observation covering it has landed in the active log, or nothing in flight or
   * scheduled would observe it without new input (it stays under the message threshold, or buffered until that is
   * reached). Resolves to the thread's progress; rejects after `timeoutMs` (default 30 s: a worker that is down
   * answers nothing). Needs only Kafka.
   */
  async settled(threadId: string, throughMessageId?: string | null,
                options: { timeoutMs?: number; resourceId?: string } = {}): Promise<ProgressEvent> {
    const timeoutMs = options.timeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    const late = (): Error => new Error(`memory of thread ${threadId} has not settled through ` +
      `${throughMessageId ?? "its newest message"} after ${timeoutMs}ms`);
    const remaining = (): number => {
      const left = deadline - Date.now();
      if (left <= 0) throw late();
      return left;
    };
    const events = await this.events(threadId); // positioned before the question goes: the answer is not missed
    try {
      let askedAfter = this.latestContext(threadId);
      const settling = new Settling(threadId, throughMessageId ?? null,
        await this.askProgress(threadId, throughMessageId, options));
      for (;;) {
        const left = remaining();
        let event: EventEnvelope;
        try {
          event = await events.next(left);
        } catch {
          throw late(); // next rejects only when its time is up
        }
        if (event.type !== "data-om-progress") continue;
        const progress = event.data as ProgressEvent;
        const next = settling.take(progress);
        if (next.step === "settled") return progress;
        if (next.step === "ask-again") {
          // not taken in when the question was: ask again once a context received since shows it is
          const previous = askedAfter;
          const shows = (context: ContextRecord): boolean =>
            context !== previous && this.view.includes(context, next.wanted);
          const wait = remaining();
          try {
            await this.view.await(threadId, shows, wait, `shows message ${next.wanted}`);
          } catch {
            throw late(); // await rejects only when its time is up
          }
          askedAfter = this.latestContext(threadId);
          settling.requestId = await this.askProgress(threadId, throughMessageId, options);
        }
      }
    } finally {
      await events.stop();
    }
  }

  private async onContext(message: KafkaMessage): Promise<void> {
    if (message.value === null) { // a tombstone: the thread was erased, its context is gone
      if (message.key !== null) this.view.tombstone(message.key.toString());
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(message.value));
    } catch (error) {
      throw new ContractError("invalid_json", [String(error)]);
    }
    const spanContext = spanContextFromHeaders(message.headers ?? {});
    if ((value as { schema?: unknown } | null)?.schema === "om.context/v2") {
      const cursor = validate("om.context/v2", value);
      try {
        await this.followReferences();
      } catch (error) {
        // the cursor is kept all the same (its new_messages are part of the run); the next cursor tries again
        console.warn(`om-stream: cannot read ${this.topics.contextIndex} and ${this.topics.contextBlocks} yet: ` +
          String(error));
      }
      await this.fetchRun(this.view.cursor(cursor, spanContext));
      return;
    }
    this.view.received(keepSpanContext(validate("om.context/v1", value), spanContext));
  }

  /**
   * Start reading the index and blocks topics from their beginning (once: at the first v2 cursor; a cursor can name
   * blocks published before the client started).
   */
  private async followReferences(): Promise<void> {
    this.references ??= (async () => {
      const tails = [
        new TopicTail(this.kafka, this.topics.contextIndex, (m) => this.onIndex(m),
          { fromBeginning: true, topicTimeoutMs: this.options.topicTimeoutMs }),
        new TopicTail(this.kafka, this.topics.contextBlocks, (m) => this.onBlock(m),
          { fromBeginning: true, topicTimeoutMs: this.options.topicTimeoutMs }),
      ];
      try {
        for (const tail of tails) await tail.start();
      } catch (error) {
        await Promise.all(tails.map((tail) => tail.stop()));
        this.references = undefined; // the next cursor tries again
        throw error;
      }
      return tails;
    })();
    await this.references;
  }

  private async onIndex(message: KafkaMessage): Promise<void> {
    if (message.key === null || message.key[0] === 0xff) return; // a segment roll's tombstone (not UTF-8)
    const index = message.value === null ? undefined : decode("om.context-index/v1", message.value);
    await this.fetchRun(this.view.index(message.key.toString("utf8"), index));
  }

  private async onBlock(message: KafkaMessage): Promise<void> {
    if (message.key === null || message.key[0] === 0xff || message.key.length < 24) return; // not a block key
    const [threadId, digest] = splitBlockKey(message.key.toString("utf8"));
    const text = message.value === null ? undefined : decode("om.context-block/v1", message.value).text;
    await this.fetchRun(this.view.block(threadId, digest, text));
  }

  /** Complete a cursor whose raw messages the client does not hold, when it can. */
  private async fetchRun(cursor: ContextCursor | undefined): Promise<void> {
    if (cursor === undefined) return;
    if (this.options.messagesApi === undefined) {
      console.warn(`om-stream: the context of thread ${cursor.thread_id} names messages this client does not hold, ` +
        "and it has no messagesApi to fetch them: it waits for a context it can assemble");
      return;
    }
    let messages;
    try {
      messages = await this.options.messagesApi.run(cursor);
    } catch (error) {
      console.warn(`om-stream: the messages API could not give a run of thread ${cursor.thread_id}: ${String(error)}`);
      return;
    }
    this.view.fetched(cursor, messages);
  }

  // -- erasure -----------------------------------------------------------------------------------------------------

  /**
   * Erase a thread (`{threadId}`; add its `resourceId` when the worker runs in resource scope, which dead-letters a
   * command without it, so no receipt comes) or a whole resource (`{resourceId}`) from every store, and wait for the
   * receipt (rejects after `timeoutMs`; the erase goes on).
   * Messages published after this resolves start a fresh memory. Erasing something unknown succeeds: the receipt
   * says `found` false. The client forgets what it holds of the erased threads: `latestContext` and `awaitContext`
   * never return a context published before the erase.
   */
  async erase(subject: EraseSubject, options: { timeoutMs?: number } = {}): Promise<ErasedEvent> {
    const command = eraseCommand(subject);
    const key = commandKey(command);
    const timeoutMs = options.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeoutMs;
    const watch = this.view.beginErase();
    let receipt: ErasedEvent | undefined;
    try {
      const events = await this.events(key); // positioned before the command goes: the receipt is not missed
      try {
        await this.producer.send({
          topic: this.topics.commands, acks: -1,
          messages: [{ key, value: Buffer.from(encodeCanonical("om.command/v1", command)),
            headers: recordHeaders() }],
        });
        while (receipt === undefined) {
          let event: EventEnvelope;
          try {
            event = await events.next(Math.max(0, deadline - Date.now()));
          } catch {
            throw new Error(`no receipt for erase ${command.command_id} after ${timeoutMs}ms (it goes on; its ` +
              `receipt will be a data-om-erased event keyed ${JSON.stringify(key)} on ${this.topics.events})`);
          }
          if (event.type === "data-om-erased") {
            const data = event.data as ErasedEvent;
            if (data.eraseId === command.command_id) receipt = data;
          }
        }
      } finally {
        await events.stop();
      }
      this.view.erased(subject, receipt, watch);
    } finally {
      this.view.endErase(watch);
    }
    return receipt;
  }

  // -- events ------------------------------------------------------------------------------------------------------

  /** Start following the events of `threadId` (from now, or from the beginning of its partition). */
  async events(threadId: string, fromBeginning = false): Promise<EventStream> {
    const stream = new EventStream(this.kafka, this.topics.events, threadId, fromBeginning,
      (count) => partitionFor(threadId, count));
    await stream.start();
    return stream;
  }

  // -- recall ------------------------------------------------------------------------------------------------------

  /** One recall tool call; the response carries `result` or `error`. Rejects after `timeoutMs` without one. */
  async recall(resourceId: string, args: RecallArguments = {},
               options: { threadId?: string; retrieval?: RecallRequest["retrieval"]; timeoutMs?: number } = {}):
  Promise<RecallResponse> {
    const request: RecallRequest = {
      schema: "om.recall.request/v1", correlation_id: randomUUID(), resource_id: resourceId,
      thread_id: options.threadId ?? null, arguments: args,
      ...(options.retrieval === undefined ? {} : { retrieval: options.retrieval }),
    };
    return this.sendRecall(request, options.timeoutMs ?? 30_000);
  }

  async sendRecall(input: RecallRequest, timeoutMs = 30_000): Promise<RecallResponse> {
    const request = normalize("om.recall.request/v1", validate("om.recall.request/v1", input));
    this.responses ??= (async () => {
      const tail = new TopicTail(this.kafka, this.topics.recallResponses, (m) => this.onResponse(m),
        { topicTimeoutMs: this.options.topicTimeoutMs });
      await tail.start();
      return tail;
    })();
    await this.responses;
    const answer = new Promise<RecallResponse>((resolve) => this.pending.set(request.correlation_id, resolve));
    await this.producer.send({
      topic: this.topics.recallRequests, acks: -1,
      messages: [{ key: request.resource_id, value: Buffer.from(encodeCanonical("om.recall.request/v1", request)),
        headers: recordHeaders() }],
    });
    return withTimeout(answer, timeoutMs, `no recall response for ${request.correlation_id} after ${timeoutMs}ms ` +
      `(does a worker serve ${this.topics.recallRequests}?)`, () => this.pending.delete(request.correlation_id))
      .finally(() => this.pending.delete(request.correlation_id));
  }

  private async onResponse(message: KafkaMessage): Promise<void> {
    if (message.value === null) return;
    const response = decode("om.recall.response/v1", message.value);
    this.pending.get(response.correlation_id)?.(response);
  }
}
