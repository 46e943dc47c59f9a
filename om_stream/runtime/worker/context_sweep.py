"""An erase's sweep of the compacted by-reference topics (``OM_CONTEXT_WIRE=v2``): every block an erased thread has
on ``om.context.blocks``, whichever index listed it and whoever published it, tombstoned before the receipt.

The worker's memory of what a thread's readers hold (``context_wire.PublishedContexts``) is its process's, forgotten
at every take-over: after a restart or a rebalance, the blocks the thread's unknown previous index dropped are known
to no one, and blocks published by a batch whose index never went out (a crash between the two) were never listed.
So an erase does not tombstone what it remembers; it reads what the topic holds. A thread's blocks share the
partition number of its messages (``partition_for``), so one partition is read per thread, from its beginning to
the end offset the brokers give at the sweep, the last record of each key winning (as compaction keeps it). Keys
are ``<thread id>/<digest>`` with a digest of a fixed length, so a thread whose id begins with ``<erased id>/`` is
told apart (:func:`block_thread`) and keeps its blocks.

Order, and why (the erase's steps are ``runtime/worker/erasure.py``):

1. the erasure ledger notes the erased incarnation first (``Sweeper``), then the stores are swept;
2. the producer is flushed: every record this worker queued before the erase is on the log below the end offset
   read next (a batch is cut at an erase, so nothing of this worker is queued after it meanwhile);
3. each thread's partition is read to its end, and a tombstone goes out for each key whose last record holds text,
   and for the thread's index and cursor, sent at once and flushed again: acknowledged before the erase's ledger row
   says it is swept, so a crash after that row (the erase handled again, and not swept again) loses none of them.

A block another member publishes after step 3 (a member the group dropped, its batch past its membership check)
is not read here; that member checks the erasure ledger once its publications are acknowledged and tombstones what
it published for an erased incarnation (``LatePublications``). The ledger note of step 1 precedes the end offset of
step 3, so every such block is either below it or published after the note, where the publisher's check sees it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from om_stream.client.partitioning import partition_for
from om_stream.core.erasure import record_digest
from om_stream.observability.metrics import Metrics
from om_stream.ports import ContentStore
from om_stream.runtime.host_ports import StoreRetry
from om_stream.runtime.worker.context_wire import PublishedContexts
from om_stream.runtime.worker.kafka_records import Publication, Publisher
from om_stream.settings import KafkaSettings
from om_stream.wire.context_v2 import DIGEST_PATTERN

__all__ = ["ContextSweep", "HeldBlocks", "LatePublications", "OrphanSweep", "PartitionReader", "Published",
           "block_thread", "erased_tombstones", "unlisted"]

log = logging.getLogger(__name__)

_DIGEST = re.compile(DIGEST_PATTERN)
_ERASED = [("om_erased", b"1")]
Fold = Callable[[bytes | None, bool], None]  # (key, the record holds a value) for each record, in log order


def block_thread(key: bytes | None) -> str | None:
    """The thread a key of ``om.context.blocks`` belongs to (``<thread id>/<digest>``); None for any other key (the
    segment roll's, or one no worker wrote)."""
    if key is None:
        return None
    try:
        text = key.decode()
    except UnicodeDecodeError:
        return None
    if len(text) < 24 or text[-23] != "/" or not _DIGEST.match(text[-22:]):
        return None
    return text[:-23]


class HeldBlocks:
    """Folds the records of a partition of ``om.context.blocks``, in log order, into the keys of ``threads`` whose
    last record holds text (what a consumer of the compacted topic is given for them)."""

    def __init__(self, threads: Collection[str]) -> None:
        self.threads = frozenset(threads)
        self._last: dict[bytes, bool] = {}

    def add(self, key: bytes | None, holds: bool) -> None:
        if key is not None and block_thread(key) in self.threads:
            self._last.pop(key, None)  # the order of the keys is the order of their last records
            self._last[key] = holds

    @property
    def keys(self) -> list[bytes]:
        return [key for key, holds in self._last.items() if holds]


def unlisted(keys: Iterable[bytes], listed: Callable[[str], Collection[str] | None]) -> list[bytes]:
    """The block keys whose digest the thread's list does not name now; ``listed`` gives a thread's list, or None
    when the thread is not this worker's to judge (forgotten, erased, or no longer marked unswept meanwhile)."""
    out = []
    for key in keys:
        thread_id = block_thread(key)
        names = listed(thread_id) if thread_id is not None else None
        if names is not None and key.decode()[-22:] not in names:
            out.append(key)
    return out


def erased_tombstones(kafka: KafkaSettings, partition: int, threads: Collection[str],
                      blocks: Collection[bytes]) -> list[Publication]:
    """The tombstones of an erase on one partition: the blocks found holding text, then each thread's index and
    cursor (a reader that sees the cursor go has no index or block left to assemble it from)."""
    out = [Publication(kafka.topic_context_blocks, key, None, list(_ERASED), partition=partition) for key in blocks]
    for thread_id in sorted(threads):
        out.append(Publication(kafka.topic_context_index, thread_id.encode(), None, list(_ERASED),
                               partition=partition))
        out.append(Publication(kafka.topic_context, thread_id.encode(), None, list(_ERASED), partition=partition))
    return out


class PartitionReader:
    """Reads one partition of a topic from its beginning to the end offset the brokers give when asked, on a
    consumer of its own outside any group (it never joins, never commits)."""

    def __init__(self, bootstrap: str, *, client_options: Mapping[str, Any], idle_timeout_s: float = 30.0) -> None:
        self.bootstrap = bootstrap
        self.client_options = dict(client_options)
        self.idle_timeout_s = idle_timeout_s  # no record for this long while some remain: the read fails
        self._consumer: AIOKafkaConsumer | None = None
        self._lock = asyncio.Lock()  # one read at a time: each assigns and seeks the one consumer

    async def read(self, topic: str, partition: int, fold: Fold) -> None:
        """Each record below the end offset, in log order, to ``fold``; raises when the brokers do not serve them
        (the connection is dropped: the next read starts afresh)."""
        async with self._lock:
            try:
                await self._read(TopicPartition(topic, partition), fold)
            except BaseException:
                await self._close()
                raise

    async def _read(self, tp: TopicPartition, fold: Fold) -> None:
        consumer = await self._client()
        consumer.assign([tp])
        end = int((await consumer.end_offsets([tp]))[tp])
        await consumer.seek_to_beginning(tp)
        loop = asyncio.get_running_loop()
        idle_since = loop.time()
        while await consumer.position(tp) < end:
            records = (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])
            if records:
                idle_since = loop.time()
            elif loop.time() - idle_since > self.idle_timeout_s:
                raise TimeoutError(f"no record of {tp.topic}[{tp.partition}] for {self.idle_timeout_s}s below its "
                                   f"end offset {end}")
            for record in records:
                if record.offset < end:
                    fold(record.key, record.value is not None)

    async def _client(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                        auto_offset_reset="earliest", **self.client_options)
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def close(self) -> None:
        async with self._lock:
            await self._close()

    async def _close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            await consumer.stop()
        except Exception as exc:  # noqa: BLE001 - closing a broken client must not fail the caller
            log.debug("closing the sweep's consumer: %r", exc)


class ContextSweep:
    """Tombstones every block, the index and the cursor of erased threads (steps 2-3 of the module's docstring).
    ``flush``: the worker's producer flush (every record queued acknowledged)."""

    def __init__(self, kafka: KafkaSettings, publisher: Publisher, flush: Callable[[], Awaitable[None]],
                 reader: PartitionReader) -> None:
        self.kafka = kafka
        self.publisher = publisher
        self.flush = flush
        self.reader = reader

    async def sweep(self, threads: Collection[str]) -> int:
        """Returns the number of blocks found holding text (and now tombstoned)."""
        if not threads:
            return 0
        await self.flush()
        by_partition: dict[int, list[str]] = {}
        for thread_id in dict.fromkeys(threads):
            by_partition.setdefault(partition_for(thread_id, self.kafka.partitions), []).append(thread_id)
        found = 0
        for partition, group in sorted(by_partition.items()):
            held = await self._held(partition, group)
            found += len(held.keys)
            for publication in erased_tombstones(self.kafka, partition, group, held.keys):
                await self.publisher.send(publication)
        await self.flush()
        log.info("an erase tombstoned %d blocks of %d threads on %s", found, sum(map(len, by_partition.values())),
                 self.kafka.topic_context_blocks)
        return found

    async def _held(self, partition: int, threads: list[str]) -> HeldBlocks:
        """The threads' blocks on ``partition``, read whole. Without the read the erase cannot say it is done, so it
        waits for the brokers (as it waits for the end offsets of its fence), and says so."""
        delay = 0.2
        while True:
            held = HeldBlocks(threads)
            try:
                await self.reader.read(self.kafka.topic_context_blocks, partition, held.add)
                return held
            except Exception as exc:  # noqa: BLE001 - any failure means "read again", logged
                log.warning("an erase could not read %s[%d] to its end (retrying in %.1fs): %r",
                            self.kafka.topic_context_blocks, partition, delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)


Published = tuple[int, str, str, int]  # (consumer generation, thread id, record key, record epoch)


class LatePublications:
    """The publisher's half of the erasure ledger's fence for by-reference contexts: what a member published lands
    after an erase's sweep only if the member lost its partitions meanwhile (a batch past its membership check,
    then frozen, or slow to be acknowledged). So, as a model worker checks the ledger after its write, the worker
    checks once its publications are acknowledged: the batches of a generation the group still confirms are done
    with (no other member held their partitions since); for the others, each thread whose record the ledger says
    was erased through the incarnation its context was rendered from gets what was published of it tombstoned:
    those blocks, its index and its cursor. Either the erase's end offset came after these publications (its sweep
    tombstoned them), or its ledger note came before this check (seen here).

    ``note`` is told of a batch's v2 publications once they are queued on the producer; ``check`` runs after the
    offsets' commit (``Worker``), and flushes first, so every publication noted before it is acknowledged."""

    def __init__(self, kafka: KafkaSettings, publisher: Publisher, flush: Callable[[], Awaitable[None]], *,
                 store: ContentStore, store_retry: StoreRetry, confirm: Callable[[int], Awaitable[bool]],
                 metrics: Metrics) -> None:
        self.kafka = kafka
        self.publisher = publisher
        self.flush = flush
        self.store = store
        self.retry = store_retry
        self.confirm = confirm
        self.metrics = metrics
        self._noted: dict[Published, set[bytes]] = {}

    def __len__(self) -> int:
        return len(self._noted)

    def note(self, published: Published, blocks: Iterable[bytes]) -> None:
        self._noted.setdefault(published, set()).update(blocks)

    async def check(self) -> int:
        """Returns the number of threads whose late publications were tombstoned."""
        noted, self._noted = self._noted, {}
        if not noted:
            return 0
        await self.flush()  # every publication noted above is acknowledged past this line
        confirmed: dict[int, bool] = {}
        undone = 0
        items = list(noted.items())
        for done, (published, blocks) in enumerate(items):
            try:
                undone += await self._undo_if_erased(published, blocks, confirmed)
            except BaseException:  # what was not checked is checked next time
                for left, left_blocks in items[done:]:
                    self.note(left, left_blocks)
                raise
        if undone:
            await self.flush()
            log.info("contexts of %d erased threads this worker published after losing their partitions were "
                     "tombstoned again", undone)
        return undone

    async def _undo_if_erased(self, published: Published, blocks: set[bytes], confirmed: dict[int, bool]) -> int:
        generation, thread_id, record_key, epoch = published
        if generation not in confirmed:
            confirmed[generation] = await self.confirm(generation)
        if confirmed[generation]:
            return 0
        through = await self.retry("read", partial(self.store.erased_through, record_digest(record_key)))
        if through is None or through < epoch:
            return 0
        partition = partition_for(thread_id, self.kafka.partitions)
        for publication in erased_tombstones(self.kafka, partition, [thread_id], sorted(blocks)):
            await self.publisher.send(publication)
        self.metrics.erasure_writes_undone.labels("late_context").inc(len(blocks) + 2)
        return 1


class OrphanSweep:
    """The blocks a thread's list dropped while this worker did not know that list (its first context after a
    take-over, or after an erase, went out with every block and a whole index, and tombstoned nothing): tombstoned
    once its partition has been read. Only threads this worker publishes and marked ``unswept`` are looked at, so a
    deployment that has not restarted reads nothing; after a take-over, each partition with such threads is read
    once per round (``segment_roll_interval_ms``: within an hour at the defaults).

    The read is not under the batch lock (it can take a while); the judgement and the tombstones are: a block read as
    unlisted that a batch listed again since (sending it again, after the read) is in the thread's list by then and
    is kept, and no batch's publications can come between the judgement and the tombstones on the producer."""

    def __init__(self, kafka: KafkaSettings, publisher: Publisher, flush: Callable[[], Awaitable[None]],
                 reader: PartitionReader, published: PublishedContexts,
                 batch: Callable[[], AbstractAsyncContextManager[Any]], holding: Callable[[], bool]) -> None:
        self.kafka = kafka
        self.publisher = publisher
        self.flush = flush
        self.reader = reader
        self.published = published
        self.batch = batch  # held while a batch is handled (``OffsetLedger.batch``)
        # the worker holds its partitions now (no rebalance under way): what it remembers is still its to judge
        self.holding = holding

    async def sweep(self) -> int:
        """One round; returns the number of blocks tombstoned. A partition that cannot be read now is read at the
        next round (its threads stay unswept)."""
        threads = self.published.unswept()
        if not threads:
            return 0
        await self.flush()  # every block this worker queued is below the end offsets read next
        by_partition: dict[int, list[str]] = {}
        for thread_id in threads:
            by_partition.setdefault(partition_for(thread_id, self.kafka.partitions), []).append(thread_id)
        tombstoned = 0
        for partition, group in sorted(by_partition.items()):
            held = HeldBlocks(group)
            try:
                await self.reader.read(self.kafka.topic_context_blocks, partition, held.add)
            except Exception as exc:  # noqa: BLE001 - the next round reads it again
                log.warning("could not read %s[%d] for dropped blocks: %r", self.kafka.topic_context_blocks,
                            partition, exc)
                continue
            async with self.batch():
                if not self.holding():  # a rebalance began during the read: the next owner starts from nothing
                    return tombstoned
                marked = {t for t in self.published.unswept() if t in held.threads}

                def listed(thread_id: str, marked: set[str] = marked) -> Collection[str] | None:
                    return self._listed(thread_id) if thread_id in marked else None

                for key in unlisted(held.keys, listed):
                    await self.publisher.send(Publication(self.kafka.topic_context_blocks, key, None,
                                                          partition=partition))
                    tombstoned += 1
                for thread_id in marked:
                    self.published.swept(thread_id)
        if tombstoned:
            log.info("tombstoned %d blocks that lists this worker did not know had dropped", tombstoned)
        return tombstoned

    def _listed(self, thread_id: str) -> Collection[str] | None:
        sent = self.published.sent(thread_id)
        return set(sent.index.blocks) if sent is not None else None
