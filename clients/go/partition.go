package omstream

import "github.com/twmb/franz-go/pkg/kgo"

// Partitioner is the producer partitioner this client uses: franz-go's sticky key partitioner with its default
// hasher, which is the Java client's murmur2 for keyed records, so a thread's records land where the worker,
// Faust and every other client expect them.
func Partitioner() kgo.Partitioner { return kgo.StickyKeyPartitioner(nil) }

var keyPartitioner = Partitioner().ForTopic("")

// PartitionFor is the partition of a record key: (murmur2(key) & 0x7fffffff) % partitions.
func PartitionFor(key string, partitions int) int {
	if partitions < 1 {
		panic("omstream: a topic has at least one partition")
	}
	return keyPartitioner.Partition(&kgo.Record{Key: []byte(key)}, partitions)
}
