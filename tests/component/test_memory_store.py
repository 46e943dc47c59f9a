"""The in-memory content store's model-call results (the reference twin of ``ports.CycleResults``): the shared
contract, and the bounds that keep it from growing without end."""

from __future__ import annotations

import pytest

from om_stream.adapters.memory_store import InMemoryContentStore, InMemoryCycleResults
from om_stream.ports import ContentStore, CycleResults
from tests.support.retention_contract import RETENTION_CHECKS
from tests.support.store_contract import (
    ERASURE_CHECKS,
    RESULT_CHECKS,
    SHORT_RESULT_TTL_S,
    check_author_round_trip,
    check_record_messages,
    check_results_expire,
)


@pytest.mark.parametrize("check", RESULT_CHECKS, ids=lambda c: c.__name__)
async def test_cycle_results_contract(check) -> None:
    await check(InMemoryContentStore(), "p-")


@pytest.mark.parametrize("check", ERASURE_CHECKS, ids=lambda c: c.__name__)
async def test_erasure_contract(check) -> None:
    await check(InMemoryContentStore(), "p-")


@pytest.mark.parametrize("check", RETENTION_CHECKS, ids=lambda c: c.__name__)
async def test_retention_contract(check) -> None:
    await check(InMemoryContentStore(), "p-")


async def test_it_gives_a_record_its_stored_conversation_back() -> None:
    await check_record_messages(InMemoryContentStore(), "p-")


async def test_a_message_keeps_its_author() -> None:
    await check_author_round_trip(InMemoryContentStore(), "p-")


async def test_results_expire_after_the_result_ttl() -> None:
    await check_results_expire(InMemoryContentStore(result_ttl_s=SHORT_RESULT_TTL_S), "p-")


async def test_it_is_a_content_store_with_cycle_results_and_starting_it_does_nothing() -> None:
    store = InMemoryContentStore()
    assert isinstance(store, ContentStore) and isinstance(store, CycleResults)
    assert isinstance(InMemoryCycleResults(), CycleResults)
    await store.start()
    await store.start()  # idempotent
    await store.put_result("k", b"v", record_key="rec")
    assert await store.get_result("k") == b"v"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_results_are_bounded_oldest_first_and_expired_ones_go_as_new_ones_come() -> None:
    clock = Clock()
    results = InMemoryCycleResults(result_ttl_s=10, max_entries=3, clock=clock)
    for i in range(5):
        await results.put_result(f"k{i}", b"%d" % i, record_key="rec")
    assert [await results.get_result(f"k{i}") for i in range(5)] == [None, None, b"2", b"3", b"4"]
    clock.now += 11  # all three expired: the next put drops them
    await results.put_result("k5", b"5", record_key="rec")
    assert results.result_count() == 1 and await results.get_result("k5") == b"5"


async def test_leases_are_bounded_and_expired_ones_are_dropped_before_live_ones() -> None:
    clock = Clock()
    results = InMemoryCycleResults(max_entries=3, clock=clock)
    assert await results.claim("a", "w1", 1) is None
    assert await results.claim("b", "w1", 100) is None
    assert await results.claim("c", "w1", 100) is None
    clock.now += 2  # a's lease is over
    assert await results.claim("d", "w1", 100) is None  # over the bound: the expired lease goes, not b or c
    assert [await results.claim(k, "w2", 100) for k in "bcd"] == ["w1", "w1", "w1"]
    assert await results.claim("e", "w1", 100) is None  # all live and over the bound: the oldest (b) goes
    assert await results.claim("b", "w2", 100) is None
