import { Partitioners } from "kafkajs";

/**
 * The partition of a record key: kafkajs's DefaultPartitioner, which is the Java client's murmur2
 * (`(murmur2(key) & 0x7fffffff) % partitions`). The producer of this client uses the same partitioner, so a thread's
 * messages land on the partition the worker, Faust and every other client expect.
 */
const partitioner = Partitioners.DefaultPartitioner();

export function partitionFor(key: string | Buffer, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError("a topic has at least one partition");
  const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({
    partitionId, leader: 0, replicas: [0], isr: [0], partitionErrorCode: 0, offlineReplicas: [],
  }));
  return partitioner({ topic: "om", partitionMetadata, message: { key, value: null } });
}
