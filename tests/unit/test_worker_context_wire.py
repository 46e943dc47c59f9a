"""The worker's outlet with ``OM_CONTEXT_WIRE=v2``: a context goes out as its new blocks, its index when the list
changed, the cursor (with the v1 context's headers), then the tombstones of the blocks no longer listed, all on the
partition of the thread's messages; what readers hold advances only when the batch commits (a discarded batch
leaves it as it was); an erase tombstones the cursor, the index and the blocks of the thread's last two indexes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable
from dataclasses import replace

from prometheus_client import CollectorRegistry

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.client.partitioning import partition_for
from om_stream.core.commands import PublishContext, RequestObservation, RequestReflection
from om_stream.core.erasure import record_digest
from om_stream.core.inputs import MessageAppended
from om_stream.observability.metrics import Metrics
from om_stream.runtime.host_ports import Arrival, StoreRetry
from om_stream.runtime.worker.context_sweep import LatePublications
from om_stream.runtime.worker.context_wire import PublishedContexts
from om_stream.runtime.worker.kafka_records import Publication, SourceRecord
from om_stream.runtime.worker.outlet import KafkaOutlet, OutletParts
from om_stream.settings import KafkaSettings
from om_stream.wire.context_v2 import block_digest, block_key
from tests.support.sim import Outcome, Sim

KAFKA = KafkaSettings(partitions=6)
# the Sim drives its host on its own event loop: the outlet runs there too (sim._loop.run_until_complete)


class Recorded:
    def __init__(self) -> None:
        self.sent: list[Publication] = []

    async def send(self, publication: Publication) -> Awaitable[object]:
        self.sent.append(publication)
        done: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def _conversation() -> Sim:
    written = itertools.count()

    def outcome(request: RequestObservation | RequestReflection) -> Outcome:  # each text its own: blocks differ
        return Outcome(text=f"* 🔴 {type(request).__name__} {next(written)} of the launch plan")

    sim = Sim({"observation": {"messageTokens": 30, "bufferTokens": False},
               "reflection": {"observationTokens": 15}}, outcome=outcome)
    for index in range(12):
        sim.say("t1", "user" if index % 2 == 0 else "assistant", f"message {index} about the launch plan")
    return sim


def _outlet(sim: Sim, publisher: Recorded, published: PublishedContexts) -> KafkaOutlet:
    return KafkaOutlet(OutletParts(kafka=KAFKA, effects=sim.host.effects, publisher=publisher, clock=sim,
                                   metrics=Metrics.create(CollectorRegistry()), store_retry=StoreRetry(),
                                   source="test", index_for_recall=False, by_reference=published))


def _arrival(sim: Sim) -> Arrival[SourceRecord]:
    message = sim.messages["m1"]
    return Arrival("t1", "r1", MessageAppended(message), SourceRecord("om.messages", 0, 0, b"t1", b"{}"))


def test_a_context_goes_out_by_reference_in_order_on_the_threads_partition() -> None:
    sim = _conversation()
    specs = [p.spec for p in sim.contexts]
    assert any(s.segment_ids for s in specs), "the conversation was observed"
    publisher, published = Recorded(), PublishedContexts()
    topics_seen: list[list[str]] = []
    for spec in specs:
        outlet = _outlet(sim, publisher, published)
        before = len(publisher.sent)
        sim._loop.run_until_complete(outlet.context(PublishContext(spec), _arrival(sim)))
        sim._loop.run_until_complete(outlet.commit())
        batch = publisher.sent[before:]
        topics_seen.append([p.topic for p in batch])
        assert {p.partition for p in batch} == {partition_for("t1", KAFKA.partitions)}
        cursor = next(p for p in batch if p.topic == KAFKA.topic_context)
        assert dict(cursor.headers)["om_version"] == str(spec.version).encode()
        kinds = [p.topic for p in batch]
        tombstones = [i for i, p in enumerate(batch) if p.value is None]
        blocks = [i for i, p in enumerate(batch) if p.topic == KAFKA.topic_context_blocks and p.value is not None]
        assert all(i < kinds.index(KAFKA.topic_context) for i in blocks)
        assert all(i > kinds.index(KAFKA.topic_context) for i in tombstones)
    assert topics_seen[0] == [KAFKA.topic_context_blocks] * topics_seen[0].count(KAFKA.topic_context_blocks) + [
        KAFKA.topic_context_index, KAFKA.topic_context]
    assert any(t == [KAFKA.topic_context] for t in topics_seen), "an unchanged list sends the cursor alone"
    assert any(p.value is None for p in publisher.sent if p.topic == KAFKA.topic_context_blocks), \
        "a block the list dropped (a reflection replaced the segments) is tombstoned"


def test_a_discarded_batch_leaves_what_readers_hold_and_an_erase_tombstones_both_indexes() -> None:
    sim = _conversation()
    specs = [p.spec for p in sim.contexts]
    publisher, published = Recorded(), PublishedContexts()
    for spec in specs[:-1]:
        outlet = _outlet(sim, publisher, published)
        sim._loop.run_until_complete(outlet.context(PublishContext(spec), _arrival(sim)))
        sim._loop.run_until_complete(outlet.commit())
    held = published.sent("t1")
    assert held is not None
    discarded = _outlet(sim, publisher, published)
    sim._loop.run_until_complete(discarded.context(PublishContext(specs[-1]), _arrival(sim)))
    discarded.discard()
    assert published.sent("t1") == held
    known = published.digests("t1")
    erase = _outlet(sim, publisher, published)
    before = len(publisher.sent)
    sim._loop.run_until_complete(erase.forget_context("t1", _arrival(sim)))
    sim._loop.run_until_complete(erase.commit())
    gone = publisher.sent[before:]
    assert all(p.value is None for p in gone)
    keys = {(p.topic, p.key) for p in gone}
    assert (KAFKA.topic_context, b"t1") in keys and (KAFKA.topic_context_index, b"t1") in keys
    assert {(KAFKA.topic_context_blocks, block_key("t1", d).encode()) for d in known} <= keys
    assert set(held.index.blocks) <= set(known)
    assert published.sent("t1") is None
    assert block_digest("<observations>") in known


def test_a_context_after_an_erase_in_the_same_batch_sends_every_block_again() -> None:
    """The erase's tombstones go out first: a context of the thread's fresh conversation in that batch must not
    count on a block the erase has just removed."""
    sim = _conversation()
    spec = sim.contexts[-1].spec
    publisher, published = Recorded(), PublishedContexts()
    first = _outlet(sim, publisher, published)
    sim._loop.run_until_complete(first.context(PublishContext(spec), _arrival(sim)))
    sim._loop.run_until_complete(first.commit())
    batch = _outlet(sim, publisher, published)
    before = len(publisher.sent)
    sim._loop.run_until_complete(batch.forget_context("t1", _arrival(sim)))
    sim._loop.run_until_complete(batch.context(PublishContext(spec), _arrival(sim)))
    sim._loop.run_until_complete(batch.commit())
    sent = publisher.sent[before:]
    erased = [p for p in sent if p.value is None and p.topic == KAFKA.topic_context_blocks]
    again = [p for p in sent if p.value is not None and p.topic == KAFKA.topic_context_blocks]
    assert erased and {p.key for p in erased} <= {p.key for p in again}
    assert max(sent.index(p) for p in erased) < min(sent.index(p) for p in again)
    assert any(p.topic == KAFKA.topic_context_index and p.value is not None for p in sent)
    assert published.sent("t1") is not None


def test_a_late_publication_of_an_erased_incarnation_is_tombstoned_once_its_generation_is_not_confirmed() -> None:
    """The erasure ledger's fence on the publisher's side (``LatePublications``): what a batch published is noted
    once it is on the producer (not when discarded), checked after a flush; a generation the group confirms needs
    no ledger read, and of the others only the threads whose incarnation the ledger says was erased are
    tombstoned: the blocks that batch published, the index and the cursor."""
    sim = _conversation()
    spec = next(p.spec for p in reversed(sim.contexts) if p.spec.segment_ids)
    store = InMemoryContentStore()
    publisher, published = Recorded(), PublishedContexts()
    flushes: list[int] = []
    confirmed = {1: True, 2: False}

    async def flush() -> None:
        flushes.append(len(publisher.sent))

    async def confirm(generation: int) -> bool:
        return confirmed[generation]

    late = LatePublications(KAFKA, publisher, flush, store=store, store_retry=StoreRetry(), confirm=confirm,
                            metrics=Metrics.create(CollectorRegistry()))

    def publish(generation: int, thread: str, epoch: int, *, keep: bool = True) -> None:
        outlet = KafkaOutlet(OutletParts(kafka=KAFKA, effects=sim.host.effects, publisher=publisher, clock=sim,
                                         metrics=Metrics.create(CollectorRegistry()), store_retry=StoreRetry(),
                                         source="test", index_for_recall=False, by_reference=published, late=late),
                             generation)
        thread_spec = replace(spec, thread_id=thread, record_key=thread, epoch=epoch)
        sim._loop.run_until_complete(outlet.context(PublishContext(thread_spec), _arrival(sim)))
        if keep:
            sim._loop.run_until_complete(outlet.commit())
        else:
            outlet.discard()

    publish(1, "kept-confirmed", 0)  # its generation still holds: no other member could have erased it since
    publish(2, "erased", 0)  # the ledger says erased through 0
    publish(2, "fresh", 5)  # erased through 4: this is a later incarnation
    publish(2, "untouched", 0)
    publish(2, "discarded", 0, keep=False)
    assert len(late) == 4
    for thread, through in (("kept-confirmed", 0), ("erased", 0), ("fresh", 4), ("discarded", 0)):
        sim._loop.run_until_complete(store.mark_erased(record_digest(thread), through, 600))
    published_blocks = {p.key for p in publisher.sent if p.topic == KAFKA.topic_context_blocks
                        and p.key.startswith(b"erased/")}
    before = len(publisher.sent)
    assert sim._loop.run_until_complete(late.check()) == 1
    assert flushes[0] == before, "the flush came before any ledger read or tombstone"
    gone = publisher.sent[before:]
    assert all(p.value is None and p.partition == partition_for("erased", KAFKA.partitions) for p in gone)
    assert {(p.topic, p.key) for p in gone} == {(KAFKA.topic_context_blocks, k) for k in published_blocks} | {
        (KAFKA.topic_context_index, b"erased"), (KAFKA.topic_context, b"erased")}
    assert published_blocks and len(late) == 0
    assert sim._loop.run_until_complete(late.check()) == 0
