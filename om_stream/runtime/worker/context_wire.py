"""Contexts by reference on the worker's side (``OM_CONTEXT_WIRE=v2``): what each thread's last publication left
its readers holding, and the Kafka records of one context in the order they go out.

``PublishedContexts`` remembers, per thread, the index and the raw message ids of the last cursor sent, and the
index before that one. It is this process's memory only: after a restart or a rebalance (``forget_all`` at every
take-over) a thread's first context sends its whole index, every block and every raw message again, which is always
correct. The blocks the unknown previous index listed and the new one does not are not known here: the thread is
marked ``unswept`` until ``context_sweep.OrphanSweep`` has read what the topic holds of it, and an erase reads the
topic whatever this memory holds (``context_sweep.ContextSweep``). Bounded like the recent contexts: a thread left
out is only a memory miss.

``publications`` gives the records of one context: the new blocks, the index if it changed, the cursor, then the
tombstones of the blocks no longer listed, each on the partition of the thread's messages (``partition_for``),
so that a thread's records of the three topics share one partition number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from om_stream.client.partitioning import partition_for
from om_stream.runtime.worker.kafka_records import Publication
from om_stream.settings import KafkaSettings
from om_stream.wire.codec import encode
from om_stream.wire.context_refs import ByReference, Sent
from om_stream.wire.context_v2 import block_key

__all__ = ["THREADS_KEPT", "PublishedContexts", "Remembered", "erase_publications", "publications"]

THREADS_KEPT = 16_384  # a few hundred bytes each: digests and raw message ids


@dataclass(frozen=True)
class Remembered:
    sent: Sent
    earlier: tuple[str, ...] = ()  # the digests of the index before ``sent.index``
    # the thread's list went out without this worker knowing the one before (after a take-over, or an erase): what
    # that one listed may hold text on the topic that no list names (``context_sweep.OrphanSweep`` looks)
    unswept: bool = False
    generation: int = 0  # the consumer generation the last publication went out in


class PublishedContexts(dict[str, Remembered]):
    """thread id -> what its readers hold, the least recently published first out past ``limit``."""

    def __init__(self, limit: int = THREADS_KEPT) -> None:
        super().__init__()
        self.limit = limit

    def sent(self, thread_id: str) -> Sent | None:
        found = self.get(thread_id)
        return found.sent if found is not None else None

    def advance(self, thread_id: str, sent: Sent, *, from_nothing: bool = False, generation: int = 0) -> None:
        """``sent`` is out: it becomes the thread's last publication. ``from_nothing``: it was made without knowing
        what readers held (every block and the whole index went out); ``generation``: the consumer generation of
        the batch that published it."""
        found = self.pop(thread_id, None)
        if found is None:
            earlier: tuple[str, ...] = ()
        elif found.sent.index is sent.index or found.sent.index == sent.index:  # unchanged: the same object
            earlier = found.earlier
        else:
            earlier = tuple(found.sent.index.blocks)
        unswept = from_nothing or (found is not None and found.unswept)
        self[thread_id] = Remembered(sent, earlier, unswept, generation)
        while len(self) > self.limit:
            del self[next(iter(self))]

    def unswept(self) -> list[str]:
        """The threads whose list went out without knowing the one before, not swept since."""
        return [thread_id for thread_id, found in self.items() if found.unswept]

    def swept(self, thread_id: str) -> None:
        found = self.get(thread_id)
        if found is not None and found.unswept:
            self[thread_id] = Remembered(found.sent, found.earlier, generation=found.generation)

    def digests(self, thread_id: str) -> list[str]:
        """The blocks of the thread's last two indexes (what an erase tombstones)."""
        found = self.get(thread_id)
        if found is None:
            return []
        return list(dict.fromkeys((*found.sent.index.blocks, *found.earlier)))

    def forget(self, thread_id: str) -> None:
        self.pop(thread_id, None)

    def forget_all(self, keep_generation: int | None = None) -> None:
        """The threads may have changed hands: another worker may have published since. What went out in
        ``keep_generation`` (the generation now, at a take-over) stays: it was published after the partitions
        were assigned (a take-over runs after the first batches of the generation), and no one else held them
        since."""
        if keep_generation is None:
            self.clear()
            return
        for thread_id in [t for t, found in self.items() if found.generation != keep_generation]:
            del self[thread_id]


def _partition(kafka: KafkaSettings, thread_id: str) -> int:
    return _thread_partition(thread_id, kafka.partitions)


@lru_cache(maxsize=THREADS_KEPT)
def _thread_partition(thread_id: str, partitions: int) -> int:
    """Remembered: a thread's every publication goes to the same partition, and murmur2 in Python costs more than
    the rest of a cursor's records."""
    return partition_for(thread_id, partitions)


def publications(kafka: KafkaSettings, published: ByReference,
                 headers: list[tuple[str, bytes]]) -> list[Publication]:
    """The records of one context in publication order; ``headers`` go with the cursor (as with a v1 context)."""
    cursor = published.cursor
    thread_id = cursor.thread_id
    partition = _partition(kafka, thread_id)
    out = [Publication(kafka.topic_context_blocks, block_key(thread_id, block.digest).encode(), encode(block),
                       partition=partition) for block in published.blocks]
    if published.index is not None:
        out.append(Publication(kafka.topic_context_index, thread_id.encode(), encode(published.index),
                               [("om_version", str(published.index.version).encode())], partition=partition))
    out.append(Publication(kafka.topic_context, thread_id.encode(), encode(cursor), headers, partition=partition))
    out.extend(Publication(kafka.topic_context_blocks, block_key(thread_id, digest).encode(), None,
                           partition=partition) for digest in published.dropped)
    return out


def erase_publications(kafka: KafkaSettings, thread_id: str, digests: list[str]) -> list[Publication]:
    """An erased thread's tombstones beside its context's: its index, and the blocks of its last two indexes."""
    partition = _partition(kafka, thread_id)
    out = [Publication(kafka.topic_context_index, thread_id.encode(), None, [("om_erased", b"1")],
                       partition=partition)]
    out.extend(Publication(kafka.topic_context_blocks, block_key(thread_id, digest).encode(), None,
                           [("om_erased", b"1")], partition=partition) for digest in digests)
    return out
