"""What keeps a worker that lost its partitions from writing over their new owners, without a broker: the memory
agent's batch driver (``MemoryProcessor``) under the offset ledger's lock, a content store that stalls
on demand, the membership check against a coordinator that answers as aiokafka's does, and the ledger's rescue of
partitions whose last records never reached the agent."""

from __future__ import annotations

import asyncio
from typing import Any

from om_stream.core.state import RecordState
from om_stream.runtime.erasure import Sweeper
from om_stream.runtime.worker.membership import Membership
from om_stream.runtime.worker.offsets import STRANDED_AFTER_S, OffsetLedger
from tests.support.fenced_worker import Committer, FencedWorker
from tests.support.processor_doubles import KAFKA


async def test_a_batch_held_by_the_store_while_the_group_moved_on_writes_nothing() -> None:
    driver = FencedWorker()
    assert await driver.handle(0)
    driver.store.flowing.clear()
    held = asyncio.create_task(driver.handle(1))
    await asyncio.wait_for(driver.store.waiting.wait(), 1.0)
    before = (dict(driver.table.states), len(driver.producer.sent))

    driver.generation = 2  # the group went on without this batch's generation (the member was dropped)
    driver.store.flowing.set()

    assert await held is False, "read in the generation before: fenced off"
    assert (dict(driver.table.states), len(driver.producer.sent)) == before, "no state written, nothing published"
    await driver.ledger.commit()
    assert [c for c in driver.committer.commits if c.get((KAFKA.topic_messages, 0), 0) > 1] == []
    assert driver.processor.metrics.registry.get_sample_value("om_fenced_batches_total") == 1


async def _straddle(*, erased: bool) -> FencedWorker:
    """A batch held in its store writes while the group moves on; ``erased``: the member that took the partition
    over erases the thread meanwhile (ledger note, then its sweep), before the held write lands."""
    driver = FencedWorker(erasing=True)
    assert await driver.handle(0)
    driver.store.flowing.clear()
    held = asyncio.create_task(driver.handle(1))
    await asyncio.wait_for(driver.store.waiting.wait(), 1.0)
    driver.generation = 2
    if erased:
        sweeper = Sweeper(driver.store, driver.processor.outlet_parts.effects, driver.processor.store_retry, 3600)
        swept = await sweeper.records([driver.table.states["t1"]])
        assert swept.counts.messages == 1 and swept.verified
    driver.store.flowing.set()
    assert await held is False
    return driver


async def test_a_refused_batchs_writes_of_a_record_erased_meanwhile_are_removed_again() -> None:
    driver = await _straddle(erased=True)
    assert await driver.store.get_messages(["t1-m0", "t1-m1"], resource_id="r1") == []
    assert not await driver.store.holds("r1", "t1")
    assert driver.processor.metrics.registry.get_sample_value(
        "om_erasure_writes_undone_total", {"what": "refused_batch"}) == 1


async def test_a_refused_batchs_writes_of_a_record_not_erased_stay() -> None:
    driver = await _straddle(erased=False)
    # idempotent writes the new owner makes again from the same inputs: nothing to take back
    assert [m.message_id for m in await driver.store.get_messages(["t1-m1"], resource_id="r1")] == ["t1-m1"]
    assert driver.processor.metrics.registry.get_sample_value(
        "om_erasure_writes_undone_total", {"what": "refused_batch"}) is None


async def test_a_revocation_waits_for_the_batch_in_hand_and_commits_its_offsets() -> None:
    driver = FencedWorker()
    driver.store.flowing.clear()  # the batch in hand waits on the store
    batch = asyncio.create_task(driver.handle(0))
    await asyncio.wait_for(driver.store.waiting.wait(), 1.0)
    revoked = asyncio.create_task(driver.ledger.revoke())
    await asyncio.sleep(0.05)
    assert not revoked.done(), "the batch in hand is waited for"
    driver.store.flowing.set()
    assert await batch
    await revoked
    assert driver.committer.commits == [{(KAFKA.topic_messages, 0): 1}]
    assert isinstance(driver.table.states["t1"], RecordState)


# -- membership ---------------------------------------------------------------------------------------------------

class Coordinator:
    """The parts of aiokafka's group coordinator the check reads: its generation, reset to -1 when a heartbeat is
    refused for an unknown member."""

    def __init__(self) -> None:
        self.generation = 7
        self.member = True
        self.heartbeats = 0

    async def _do_heartbeat(self) -> bool:
        self.heartbeats += 1
        if not self.member:
            self.generation = -1
        return self.member


class ConsumerThread:
    def __init__(self, coordinator: Coordinator, *, answers: bool = True) -> None:
        self.coordinator, self.answers = coordinator, answers

    def _ensure_consumer(self) -> Any:
        return type("AIOKafkaConsumer", (), {"_coordinator": self.coordinator})()

    async def call_thread(self, fun: Any) -> Any:
        if not self.answers:
            await asyncio.sleep(3600)
        return await fun()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def membership(thread: ConsumerThread, clock: Clock) -> Membership:
    consumer = type("Consumer", (), {"_thread": thread})()
    return Membership(lambda: consumer, session_timeout_s=0.3, clock=clock)


async def test_a_member_with_recent_heartbeats_commits_without_asking_the_coordinator() -> None:
    coordinator, clock = Coordinator(), Clock()
    check = membership(ConsumerThread(coordinator), clock)
    assert check.current(7) and await check.confirm(7)
    await coordinator._do_heartbeat()  # the coordinator's own routine heartbeats, through the timed wrapper
    assert coordinator.heartbeats == 1, "no heartbeat of the check's own"
    assert not await check.confirm(6), "a generation the coordinator no longer holds"


async def test_a_member_silent_for_a_third_of_the_session_asks_and_is_fenced_if_the_group_dropped_it() -> None:
    coordinator, clock = Coordinator(), Clock()
    check = membership(ConsumerThread(coordinator), clock)
    check.current(7)
    clock.now += 0.2  # the process was frozen: no heartbeat for two thirds of the session
    assert await check.confirm(7) and coordinator.heartbeats == 1, "still a member: the answer says so"
    assert await check.confirm(7) and coordinator.heartbeats == 1, "and the answer counts as a heartbeat"
    clock.now += 0.2
    coordinator.member = False
    assert not await check.confirm(7), "dropped: the refusal reset the generation"
    assert not check.current(7)


async def test_a_coordinator_that_does_not_answer_fences_the_batch() -> None:
    coordinator, clock = Coordinator(), Clock()
    check = membership(ConsumerThread(coordinator, answers=False), clock)
    check.current(7)
    clock.now += 0.2
    assert not await check.confirm(7)


# -- stranded partitions ------------------------------------------------------------------------------------------

async def test_a_partition_whose_last_records_never_came_is_sought_back_once_the_agents_are_idle_long_enough() -> None:
    clock = Clock()
    committed = {("m", 0): 40, ("m", 1): 12}
    ledger = OffsetLedger(Committer(), lambda topic, partition: (topic, partition), committed=committed.get,
                          clock=clock)
    ends = {("m", 0): 42, ("m", 1): 12, ("m", 2): 5}
    assert await ledger.stranded(ends) == [], "first seen now: nothing to judge yet"
    clock.now += STRANDED_AFTER_S + 0.1
    assert await ledger.stranded(ends) == [(("m", 0), 40)], (
        "40 and 41 are in the log, nothing was handled: read again from 40; partition 1 has nothing waiting, and "
        "partition 2 has no offset to go back to (no brokers to ask)")
    assert await ledger.stranded(ends) == [], "sought once per period"
    ledger.handled([("m", 0, 40), ("m", 0, 41)])
    clock.now += STRANDED_AFTER_S + 0.1
    assert await ledger.stranded(ends) == [], "handled through the end"
    ledger.handled([("m", 0, 42)])
    clock.now += 1.0
    assert await ledger.stranded({("m", 0): 45}) == [], "handled a moment ago: records are on their way"


async def test_a_partition_the_group_never_committed_on_is_judged_from_where_the_brokers_say_it_starts() -> None:
    """The first records of a partition with no committed offset, dropped by Faust around a rebalance: nothing
    handled, Faust sought it to no offset, and nothing follows them. The ledger asks the brokers where the group
    reads it (the log's start, 0) and reads them again."""
    clock = Clock()
    asked: list[tuple[str, int]] = []

    async def group_start(tp: tuple[str, int]) -> int | None:
        asked.append(tp)
        return 0 if tp[1] == 3 else None

    ledger = OffsetLedger(Committer(), lambda topic, partition: (topic, partition), clock=clock,
                          group_start=group_start)
    ends = {("c", 3): 2, ("c", 4): 7, ("c", 5): 0}
    assert await ledger.stranded(ends) == [] and asked == [], "first seen now: nothing to judge, nothing asked"
    clock.now += STRANDED_AFTER_S + 0.1
    assert await ledger.stranded(ends) == [(("c", 3), 0)], "partition 4: the brokers did not answer"
    assert asked == [("c", 3), ("c", 4)], "an empty partition (end 0) is not asked about"
    assert ledger.next_offset(("c", 3)) == 0


async def test_a_batch_a_revocation_has_waited_for_asks_even_with_recent_heartbeats() -> None:
    coordinator, clock = Coordinator(), Clock()
    check = membership(ConsumerThread(coordinator), clock)
    check.current(7)
    check.revoking(True)
    clock.now += 0.05
    await coordinator._do_heartbeat()  # "rebalance in progress" counts as answered
    assert await check.confirm(7) and coordinator.heartbeats == 1, "waited a moment: no need to ask"
    clock.now += 0.2
    await coordinator._do_heartbeat()
    coordinator.member = False  # the rebalance went on without this member
    assert not await check.confirm(7) and coordinator.heartbeats == 3
    check.revoking(False)
