"""The worker's stop, in parts: the drain of in-flight calls, the lease a cancelled call hands back, the ledger
closed twice, and the arithmetic of the group's lag (the integration tier runs them on real Kafka)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import RequestObservation
from om_stream.core.inputs import ModelResultArrived
from om_stream.observability.metrics import Metrics
from om_stream.observability.worker_metrics import GroupLag
from om_stream.runtime.worker.drain import InFlight
from om_stream.runtime.worker.group_lag import group_lag
from om_stream.runtime.worker.model_calls import ModelCalls, request_key
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.settings import Settings


def _request() -> RequestObservation:
    return RequestObservation(record_key="t-1", request_id="obs-1#1", cycle_id="obs-1", attempt=1, kind="sync",
                              trigger="turn-sync", resource_id="u-1", thread_ids=("t-1",), message_ids=("m1",),
                              message_tokens=100, previous_segment_ids=(), buffered_segment_ids=(),
                              prior_current_task=None, prior_suggested_response=None, prior_thread_title=None,
                              want_hints=False, use_offline_model=False, deadline_at=0)


class _StalledModel:
    """A model call that answers only when told to."""

    def __init__(self) -> None:
        self.calls = 0
        self.answer = asyncio.Event()

    async def __call__(self, request: RequestObservation | Any) -> ModelResultArrived:
        self.calls += 1
        await self.answer.wait()
        return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation="observation",
                                  ok=True, observations="observed")


async def test_a_drain_lets_quick_calls_finish_and_cancels_the_ones_still_running_at_its_end() -> None:
    in_flight, finished = InFlight(), []

    async def call(seconds: float, name: str) -> None:
        await asyncio.sleep(seconds)
        finished.append(name)

    in_flight.start(call(0.05, "quick"))
    in_flight.start(call(60, "stalled"))
    began = time.monotonic()
    drained = await in_flight.drain(0.5)
    assert finished == ["quick"] and (drained.finished, drained.handed_back) == (1, 1)
    assert 0.5 <= time.monotonic() - began < 2 and len(in_flight) == 0
    assert not in_flight.open


class _Message:
    def __init__(self, offset: int) -> None:
        self.offset, self.acked = offset, False


class _Event:
    def __init__(self, offset: int) -> None:
        self.message = _Message(offset)


class _Stream:
    """What ``InFlight.serve`` uses of a Faust stream: its events as they come, and their acknowledgement (which,
    in Faust, is what lets the consumer commit their offsets)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[_Event] = asyncio.Queue()
        self.taken: list[int] = []
        self.taken_events: list[_Event] = []
        self.acknowledged: list[int] = []

    async def events(self) -> Any:
        while True:
            event = await self.queue.get()
            self.taken.append(event.message.offset)
            self.taken_events.append(event)
            yield event

    async def ack(self, event: _Event) -> bool:
        self.acknowledged.append(event.message.offset)
        event.message.acked = True
        return True


async def _serving(in_flight: InFlight, stream: _Stream, slots: asyncio.Semaphore,
                   started: list[int], release: asyncio.Event) -> None:
    async def call(event: Any) -> None:
        started.append(event.message.offset)
        try:
            await release.wait()
        finally:
            slots.release()

    async for _ in in_flight.serve(stream, slots, call):  # type: ignore[arg-type]
        pass


async def test_a_request_is_taken_only_once_a_slot_is_free_and_acknowledged_as_its_call_starts() -> None:
    # a rebalance waits for every request taken to be acknowledged: one queued behind a slow call must not be taken
    in_flight, stream, slots, started, release = InFlight(), _Stream(), asyncio.Semaphore(1), [], asyncio.Event()
    agent = asyncio.ensure_future(_serving(in_flight, stream, slots, started, release))
    for offset in (0, 1):
        stream.queue.put_nowait(_Event(offset))
    await asyncio.sleep(0.05)
    assert (started, stream.acknowledged, stream.taken) == ([0], [0], [0]), "the second waits in the topic"
    release.set()
    await asyncio.sleep(0.05)
    assert (started, stream.acknowledged) == ([0, 1], [0, 1])
    agent.cancel()


async def test_a_request_taken_once_the_drain_began_is_left_to_the_next_owner() -> None:
    in_flight, stream, slots, started, release = InFlight(), _Stream(), asyncio.Semaphore(1), [], asyncio.Event()
    agent = asyncio.ensure_future(_serving(in_flight, stream, slots, started, release))
    stream.queue.put_nowait(_Event(0))
    await asyncio.sleep(0.05)
    stream.queue.put_nowait(_Event(1))  # waits in the topic for the slot the stalled call holds
    drained = await in_flight.drain(0.05)  # the stalled call is handed back: its slot frees, the agent takes offset 1
    await asyncio.sleep(0.05)
    assert drained.handed_back == 1 and stream.taken == [0, 1]
    assert started == [0] and stream.acknowledged == [0], "taken after the drain began: neither run nor acknowledged"
    # marked, so that Faust's stop (which waits until every message taken is marked) goes on
    assert stream.taken_events[1].message.acked
    assert not agent.done(), "the agent takes nothing more, and waits until the app stops it"
    stream.queue.put_nowait(_Event(2))
    await asyncio.sleep(0.05)
    assert stream.taken == [0, 1] and not slots.locked(), "the slot was given back"
    agent.cancel()


async def test_a_cancelled_model_call_hands_its_lease_back_so_the_next_owner_calls_at_once() -> None:
    store, model, metrics = InMemoryContentStore(), _StalledModel(), Metrics.create()
    draining = ModelCalls(model, store, metrics, owner="w1", lease_s=30.0)
    call = asyncio.ensure_future(draining.answer(_request()))
    while model.calls == 0:
        await asyncio.sleep(0.01)
    assert await store.claim(request_key(_request()), "w2", 30.0) == "w1", "w1 holds the lease while it calls"
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    # without the hand-back the lease would last 30 s more; the next owner now gets it at once
    model.answer.set()
    taker = ModelCalls(model, store, metrics, owner="w2", lease_s=30.0, poll_s=0.05)
    result = await asyncio.wait_for(taker.answer(_request()), 2)
    assert result.ok and model.calls == 2


async def test_a_model_call_that_finishes_in_the_drain_stores_its_result_for_the_next_owner() -> None:
    store, model, metrics = InMemoryContentStore(), _StalledModel(), Metrics.create()
    in_flight = InFlight()
    in_flight.start(_answered(ModelCalls(model, store, metrics, owner="w1")))
    await asyncio.sleep(0.05)
    asyncio.get_running_loop().call_later(0.2, model.answer.set)
    assert (await in_flight.drain(5)).finished == 1
    again = await ModelCalls(model, store, metrics, owner="w2").answer(_request())
    assert again.ok and model.calls == 1, "the next owner is answered from the stored result"


async def _answered(calls: ModelCalls) -> None:
    await calls.answer(_request())


async def test_closing_the_ledger_twice_commits_once_and_does_not_wait_for_itself() -> None:
    commits: list[dict[Any, int]] = []

    async def commit(offsets: Mapping[Any, int]) -> bool:
        commits.append(dict(offsets))
        return True

    ledger = OffsetLedger(commit, lambda topic, partition: (topic, partition))
    ledger.handled([("m", 0, 4)])
    await asyncio.wait_for(ledger.close(), 1)
    await asyncio.wait_for(ledger.close(), 1)
    assert commits == [{("m", 0): 5}] and not ledger.accepting


def test_the_group_lag_counts_from_the_committed_offset_or_from_the_first_one() -> None:
    end = {("m", 0): 120, ("m", 1): 30, ("m", 2): 7, ("c", 0): 0}
    committed = {("m", 0): 100, ("m", 1): -1, ("m", 2): 9}
    lags = group_lag(end, committed, beginning={("m", 1): 10, ("c", 0): 0})
    assert lags == {("m", 0): 20, ("m", 1): 20, ("m", 2): 0, ("c", 0): 0}


def test_the_group_lag_gauge_drops_partitions_no_longer_read() -> None:
    metrics = Metrics.create()
    gauge = GroupLag(metrics)
    gauge.update({("m", 0): 5, ("m", 1): 2})
    gauge.update({("m", 0): 3})
    sample = metrics.registry.get_sample_value
    assert sample("om_consumer_group_lag_records", {"topic": "m", "partition": "0"}) == 3
    assert sample("om_consumer_group_lag_records", {"topic": "m", "partition": "1"}) is None


def test_static_membership_and_the_drain_window_are_settings(monkeypatch: Any) -> None:
    monkeypatch.setenv("OM_KAFKA_GROUP_INSTANCE_ID", "om-stream-2")
    monkeypatch.setenv("OM_WORKER_DRAIN_TIMEOUT_S", "12.5")
    settings = Settings()
    assert settings.kafka.group_instance_id == "om-stream-2" and settings.worker.drain_timeout_s == 12.5
    assert Settings.model_fields["kafka"].default.group_instance_id is None
    assert Settings.model_fields["worker"].default.drain_timeout_s == 45.0
