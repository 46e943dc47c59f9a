/**
 * Following a topic from "now" (its current end, or its beginning), positioned before `start()` resolves, so
 * that whatever the worker publishes after the agent's own record is read. kafkajs consumers always join a group:
 * each tail uses its own group (no offsets are ever committed) and seeks every partition to the end offsets it
 * fetched before joining.
 */
import { randomUUID } from "node:crypto";
import type { Admin, Consumer, Kafka, KafkaMessage } from "kafkajs";

export type RecordHandler = (message: KafkaMessage, partition: number) => Promise<void>;

export interface TailOptions {
  fromBeginning?: boolean;
  /** Read only these partitions (given the topic's partition count); default: all. */
  partitions?: (count: number) => number[];
  /** How long to wait for the topic to exist (the worker creates it). */
  topicTimeoutMs?: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export async function topicOffsets(admin: Admin, topic: string, timeoutMs: number):
Promise<{ partition: number; low: string; high: string }[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const offsets = await admin.fetchTopicOffsets(topic);
      if (offsets.length > 0) return offsets;
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(`topic ${topic} does not exist (is the om-stream worker running?): ${String(error)}`);
      }
    }
    if (Date.now() > deadline) throw new Error(`topic ${topic} has no partitions`);
    await sleep(250);
  }
}

export class TopicTail {
  private consumer: Consumer | undefined;
  partitionCount = 0;

  constructor(private readonly kafka: Kafka, readonly topic: string, private readonly onRecord: RecordHandler,
              private readonly options: TailOptions = {}) {}

  async start(): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    let offsets: { partition: number; low: string; high: string }[];
    try {
      offsets = await topicOffsets(admin, this.topic, this.options.topicTimeoutMs ?? 30_000);
    } finally {
      await admin.disconnect();
    }
    this.partitionCount = offsets.length;
    const chosen = new Set(this.options.partitions?.(offsets.length) ?? offsets.map((o) => o.partition));
    const consumer = this.kafka.consumer({
      groupId: `om-stream-client-${randomUUID()}`, allowAutoTopicCreation: false, maxWaitTimeInMs: 250,
      sessionTimeout: 10_000, heartbeatInterval: 1_000,
    });
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topic: this.topic, fromBeginning: this.options.fromBeginning ?? false });
    const joined = new Promise<void>((resolve) => {
      const off = consumer.on(consumer.events.GROUP_JOIN, () => { off(); resolve(); });
    });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        if (!chosen.has(partition)) return;
        try {
          await this.onRecord(message, partition);
        } catch (error) {
          // one unreadable record must not stop the tail
          console.warn(`om-stream: record ${this.topic}[${partition}]@${message.offset} not handled: ${String(error)}`);
        }
      },
    });
    await joined;
    for (const o of offsets) {
      consumer.seek({ topic: this.topic, partition: o.partition, offset: this.options.fromBeginning ? o.low : o.high });
    }
    const others = offsets.map((o) => o.partition).filter((p) => !chosen.has(p));
    if (others.length > 0) consumer.pause([{ topic: this.topic, partitions: others }]);
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect();
    this.consumer = undefined;
  }
}
