"""The worker's small parts that decide what happens in production shapes, without a broker: liveness (crash-only,
stalled partitions), the offset ledger (what may be committed and when), the log limiter, the table's value
envelope, and the model-call ledger (a request asked again is not paid again)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import RequestObservation
from om_stream.core.erasure import record_digest
from om_stream.core.inputs import ModelResultArrived
from om_stream.core.state import RecordState
from om_stream.errors import StorageError
from om_stream.observability.log_limits import RepeatLimiter
from om_stream.observability.metrics import Metrics
from om_stream.runtime.worker.liveness import Liveness
from om_stream.runtime.worker.model_calls import ModelCalls, request_key
from om_stream.runtime.worker.offsets import OffsetLedger
from om_stream.runtime.worker.state_table import decode_held, encode_held


def _value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


# -- liveness ---------------------------------------------------------------------------------------------------

def test_a_partition_with_lag_that_does_not_move_fails_liveness_until_it_moves() -> None:
    metrics, now = Metrics.create(), [0.0]
    live = Liveness(metrics, stall_timeout_s=30, clock=lambda: now[0])
    live.check_progress([("om.messages", 0, 5, 100), ("om.messages", 1, 0, 7)])
    now[0] = 29
    live.check_progress([("om.messages", 0, 5, 100), ("om.messages", 1, 0, 7)])
    assert live.live
    now[0] = 31
    live.check_progress([("om.messages", 0, 5, 100), ("om.messages", 1, 0, 7)])
    assert not live.live and "om.messages[0]: 5 records waiting" in live.reasons()[0]
    assert _value(metrics, "om_worker_live") == 0 and _value(metrics, "om_partition_stalls_total") == 1
    now[0] = 40
    live.check_progress([("om.messages", 0, 5, 100)])
    assert _value(metrics, "om_partition_stalls_total") == 1, "a stall is counted once"
    live.check_progress([("om.messages", 0, 2, 103)])  # it moved
    assert live.live and _value(metrics, "om_worker_live") == 1


def test_no_lag_is_never_a_stall_and_a_rebalance_starts_the_measure_again() -> None:
    now = [0.0]
    live = Liveness(Metrics.create(), stall_timeout_s=10, clock=lambda: now[0])
    for t in range(0, 100, 5):
        now[0] = t
        live.check_progress([("om.messages", 0, 0, 50)])
    assert live.live
    live.check_progress([("om.messages", 0, 3, 50)])
    now[0] = 200
    live.recovering(0)  # rebalancing: the table recovers (nothing to read)
    live.check_progress([("om.messages", 0, 3, 50)])
    assert live.live


def test_a_table_recovery_that_reads_nothing_fails_liveness_and_one_that_reads_does_not() -> None:
    """The hang of docs/ci.md (2026-12-05): a recovery waiting for changelog events that never come served nothing
    for minutes and no watch said so, since a recovering worker is not judged by its partitions."""
    metrics, now = Metrics.create(), [0.0]
    live = Liveness(metrics, stall_timeout_s=30, clock=lambda: now[0])
    for t, remaining in ((0, 900), (20, 600), (40, 300), (60, 299), (85, 299)):  # slow, but it reads
        now[0] = t
        live.recovering(remaining)
    assert live.live
    now[0] = 91
    live.recovering(299)  # 31 s without a record read
    assert not live.live and live.reasons() == ["table recovery: 299 changelog records still to read and none read "
                                                "for 31s"]
    assert _value(metrics, "om_worker_live") == 0 and _value(metrics, "om_partition_stalls_total") == 1
    now[0] = 120
    live.recovering(299)
    assert _value(metrics, "om_partition_stalls_total") == 1, "a stall is counted once"
    live.recovering(250)  # it reads again
    assert live.live
    now[0] = 500
    live.recovering(250)
    live.check_progress([("om.messages", 0, 0, 50)])  # recovered: the partitions are judged again, not the recovery
    assert live.live and live.reasons() == []


def test_a_recovery_with_nothing_left_to_read_is_never_stalled() -> None:
    now = [0.0]
    live = Liveness(Metrics.create(), stall_timeout_s=10, clock=lambda: now[0])
    for t in range(0, 100, 5):
        now[0] = t
        live.recovering(0)
    assert live.live


def test_an_agent_crash_is_fatal_and_calls_every_fatal_callback() -> None:
    metrics = Metrics.create()
    live = Liveness(metrics, stall_timeout_s=10)
    seen: list[BaseException] = []
    live.on_fatal(seen.append)
    error = RuntimeError("boom")
    live.agent_crashed("memory", error)
    assert seen == [error] and not live.live and "agent memory crashed" in live.reasons()[0]
    assert _value(metrics, "om_agent_crashes_total", agent="memory") == 1
    live.recovering(0)
    assert not live.live, "a crash stays fatal"


# -- the offset ledger ------------------------------------------------------------------------------------------

class _Committer:
    def __init__(self) -> None:
        self.commits: list[dict[Any, int]] = []
        self.fail = False

    async def __call__(self, offsets: Mapping[Any, int]) -> bool:
        if self.fail:
            raise RuntimeError("coordinator moved")
        self.commits.append(dict(offsets))
        return True


async def test_the_ledger_commits_the_next_offset_to_read_and_only_what_changed() -> None:
    committer = _Committer()
    ledger = OffsetLedger(committer, lambda topic, partition: (topic, partition))
    ledger.handled([("m", 0, 4), ("m", 0, 5), ("r", 1, 9)])
    ledger.handled([("m", 0, 3)])  # an older record never moves the offset back
    await ledger.commit()
    await ledger.commit()
    assert committer.commits == [{("m", 0): 6, ("r", 1): 10}]
    ledger.handled([("m", 0, 6)])
    committer.fail = True
    await ledger.commit()  # a failure is logged, and tried again
    committer.fail = False
    await ledger.commit()
    assert committer.commits[-1] == {("m", 0): 7}


async def test_a_revocation_waits_for_the_batch_in_hand_commits_it_and_fences_until_the_next_assignment() -> None:
    committer = _Committer()
    ledger = OffsetLedger(committer, lambda topic, partition: (topic, partition))
    order: list[str] = []

    async def batch() -> None:
        async with ledger.batch():
            order.append("batch starts")
            await asyncio.sleep(0.05)
            ledger.handled([("m", 0, 1)])
            order.append("batch ends")

    task = asyncio.create_task(batch())
    await asyncio.sleep(0.01)
    await ledger.revoke()
    order.append("revoked")
    await task
    assert order == ["batch starts", "batch ends", "revoked"]
    assert committer.commits == [{("m", 0): 2}] and not ledger.accepting
    ledger.assigned()
    assert ledger.accepting


async def test_closing_commits_and_then_holds_every_batch_back() -> None:
    committer = _Committer()
    ledger = OffsetLedger(committer, lambda topic, partition: (topic, partition))
    ledger.handled([("m", 2, 10)])
    await ledger.close()
    assert committer.commits == [{("m", 2): 11}]
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05), ledger.batch():
            pass


# -- the log limiter --------------------------------------------------------------------------------------------

def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("aiokafka", logging.ERROR, __file__, 1, msg, args, None)


def test_a_flood_of_one_message_is_held_back_and_counted_other_messages_pass() -> None:
    now = [0.0]
    limiter = RepeatLimiter(burst=3, window_s=60, clock=lambda: now[0])
    passed = [limiter.filter(_record("Unable connect to node %s", n)) for n in range(100)]
    assert passed.count(True) == 3
    assert limiter.filter(_record("a different error %s", 1))
    now[0] = 61
    record = _record("Unable connect to node %s", 7)
    assert limiter.filter(record)
    assert "97 more like this in the last 60s not logged" in record.getMessage()


# -- the table's value ------------------------------------------------------------------------------------------

def test_a_held_record_says_which_partition_it_belongs_to() -> None:
    state = RecordState(key="t-1", scope="thread", resource_id="u-1")
    state.context_version = 12
    partition, decoded = decode_held(encode_held(7, state))
    assert partition == 7 and decoded.to_dict() == state.to_dict()


# -- the model-call ledger --------------------------------------------------------------------------------------

def _request(attempt: int = 1, messages: tuple[str, ...] = ("m1", "m2")) -> RequestObservation:
    return RequestObservation(record_key="t-1", request_id=f"obs-1#{attempt}", cycle_id="obs-1", attempt=attempt,
                              kind="sync", trigger="turn-sync", resource_id="u-1", thread_ids=("t-1",),
                              message_ids=messages, message_tokens=100, previous_segment_ids=(),
                              buffered_segment_ids=(), prior_current_task=None, prior_suggested_response=None,
                              prior_thread_title=None, want_hints=False, use_offline_model=False, deadline_at=0)


class _Model:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay

    async def __call__(self, request: RequestObservation | Any) -> ModelResultArrived:
        self.calls += 1
        await asyncio.sleep(self.delay)
        return ModelResultArrived(cycle_id=request.cycle_id, attempt=request.attempt, operation="observation",
                                  ok=True, observations=f"call {self.calls}")


async def test_a_request_asked_again_is_answered_from_the_stored_result() -> None:
    store, model, metrics = InMemoryContentStore(), _Model(), Metrics.create()
    calls = ModelCalls(model, store, metrics, owner="w1")
    first = await calls.answer(_request())
    again = await calls.answer(_request())
    assert model.calls == 1 and again == first
    assert _value(metrics, "om_model_calls_saved_total", reason="stored") == 1
    await calls.answer(_request(messages=("m1",)))  # the same cycle over other messages is another request
    assert model.calls == 2
    assert request_key(_request()) != request_key(_request(messages=("m1",)))


async def test_a_deadline_re_ask_of_a_request_still_waiting_is_answered_by_the_first_call_not_paid_again() -> None:
    # the model workers fell behind: attempt 1 waited in the requests topic past the cycle's deadline, so the engine
    # asked again (attempt 2, same question, a later deadline); both are taken, in order, and the provider is paid once
    store, model, metrics = InMemoryContentStore(), _Model(), Metrics.create()
    calls = ModelCalls(model, store, metrics, owner="w1")
    first = await calls.answer(_request())
    again = await calls.answer(replace(_request(attempt=2), deadline_at=180_000))
    assert model.calls == 1
    assert again is not None and first is not None
    assert again.attempt == 2 and first.attempt == 1  # each answers its own attempt
    assert replace(again, attempt=1) == first
    assert request_key(_request()) == request_key(replace(_request(attempt=3), deadline_at=9))
    assert _value(metrics, "om_model_calls_saved_total", reason="stored") == 1


async def test_a_deadline_re_ask_while_the_first_attempt_is_called_elsewhere_waits_for_that_call() -> None:
    store, model, metrics = InMemoryContentStore(), _Model(delay=0.3), Metrics.create()
    first = ModelCalls(model, store, metrics, owner="w1", lease_s=1.0, poll_s=0.05)
    second = ModelCalls(model, store, metrics, owner="w2", lease_s=1.0, poll_s=0.05)
    a, b = await asyncio.gather(first.answer(_request()), second.answer(_request(attempt=2)))
    assert model.calls == 1 and a is not None and b is not None
    assert (a.attempt, b.attempt) == (1, 2) and a.observations == b.observations


async def test_a_request_another_worker_is_calling_waits_for_its_result_instead_of_paying_twice() -> None:
    store, model, metrics = InMemoryContentStore(), _Model(delay=0.3), Metrics.create()
    first = ModelCalls(model, store, metrics, owner="w1", lease_s=1.0, poll_s=0.05)
    second = ModelCalls(model, store, metrics, owner="w2", lease_s=1.0, poll_s=0.05)
    a, b = await asyncio.gather(first.answer(_request()), second.answer(_request()))
    assert model.calls == 1 and a == b
    assert _value(metrics, "om_model_calls_saved_total", reason="in_flight") == 1


async def test_a_request_whose_caller_died_is_taken_over_once_its_lease_expires() -> None:
    store, model = InMemoryContentStore(), _Model()
    assert await store.claim(request_key(_request()), "dead-worker", 0.3) is None  # it died holding the lease
    calls = ModelCalls(model, store, Metrics.create(), owner="w2", lease_s=1.0, poll_s=0.05)
    result = await asyncio.wait_for(calls.answer(_request()), 5)
    assert model.calls == 1 and result.ok


async def test_a_failing_results_store_never_stops_model_work() -> None:
    class Down(InMemoryContentStore):
        async def get_result(self, key: str) -> bytes | None:
            raise StorageError("Cassandra down")

    model = _Model()
    result = await ModelCalls(model, Down(), Metrics.create(), owner="w1").answer(_request())
    assert model.calls == 1 and result.ok


async def test_a_results_store_too_slow_to_answer_never_holds_model_work_past_its_wait() -> None:
    """A lease that cannot be taken in time (on Cassandra: a lightweight transaction waiting for a replica that died
    and is not yet counted down), or a result that cannot be stored in time: the call is made and answered anyway."""
    class Stuck(InMemoryContentStore):
        def __init__(self, stuck: str) -> None:
            super().__init__()
            self.stuck = stuck

        async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
            if self.stuck == "claim":
                await asyncio.sleep(3600)
            return await super().claim(key, owner, lease_s)

        async def put_result(self, key: str, payload: bytes, *, record_key: str | None = None) -> None:
            if self.stuck == "put_result":
                await asyncio.sleep(3600)
            await super().put_result(key, payload, record_key=record_key)

    for stuck in ("claim", "put_result"):
        model = _Model()
        calls = ModelCalls(model, Stuck(stuck), Metrics.create(), owner="w1", store_wait_s=0.2)
        result = await asyncio.wait_for(calls.answer(_request()), 2)
        assert model.calls == 1 and result.ok, stuck


class _BrokerLog:
    """The brokers' log of each partition: the offsets that hold a record (the others: a transaction's markers)."""

    def __init__(self, held: dict[tuple[str, int], range | list[int]] | None = None,
                 committed: dict[tuple[str, int], int] | None = None) -> None:
        self.held = held
        self.committed = committed or {}  # the group's committed offsets, as its coordinator has them
        self.asked: list[tuple[tuple[str, int], int]] = []

    async def group_start(self, tp: tuple[str, int]) -> int | None:
        if self.held is None:
            return None
        return self.committed[tp] if tp in self.committed else await self.first_offset(tp, 0)

    async def first_offset(self, tp: tuple[str, int], offset: int) -> int | None:
        self.asked.append((tp, offset))
        if self.held is None:
            return None  # the brokers did not answer
        return min((o for o in self.held[tp] if o >= offset), default=None)


async def test_records_that_were_never_handed_over_are_read_again_and_a_real_gap_is_accepted() -> None:
    committed = {("m", 0): 40}
    brokers = _BrokerLog({("m", 0): [*range(40, 44), *range(46, 60)], ("r", 3): range(7, 20)})
    ledger = OffsetLedger(_Committer(), lambda topic, partition: (topic, partition), committed=committed.get,
                          first_offset=brokers.first_offset, group_start=brokers.group_start)
    admitted, seeks = await ledger.admit([("m", 0, 40), ("m", 0, 42), ("m", 0, 43), ("r", 3, 7)], lambda r: r)
    assert admitted == [("m", 0, 40), ("r", 3, 7)], "a partition never committed starts at the log's first record"
    assert seeks == [(("m", 0), 41)], "41 was dropped on the way: read from there again"
    ledger.handled(admitted)
    admitted, seeks = await ledger.admit([("m", 0, 44), ("m", 0, 41), ("m", 0, 42)], lambda r: r)
    assert admitted == [("m", 0, 41), ("m", 0, 42)] and seeks == [], "44 was queued before the seek: it comes again"
    ledger.handled(admitted)
    admitted, _ = await ledger.admit([("m", 0, 41), ("m", 0, 43)], lambda r: r)
    assert admitted == [("m", 0, 43)], "what was handled is not handled twice"
    ledger.handled(admitted)
    assert brokers.asked == [(("r", 3), 0)], "a gap seen once is read again without asking the brokers"
    # offsets 44 and 45 hold a transaction's markers: no record ever comes for them
    admitted, seeks = await ledger.admit([("m", 0, 46)], lambda r: r)
    assert admitted == [] and seeks == [(("m", 0), 44)]
    admitted, seeks = await ledger.admit([("m", 0, 46), ("m", 0, 47)], lambda r: r)
    assert admitted == [("m", 0, 46), ("m", 0, 47)] and seeks == [], "the brokers hold nothing at 44 and 45"
    assert brokers.asked[1:] == [(("m", 0), 44)]


@pytest.mark.parametrize(("committed", "start"), [({}, 0), ({("m", 2): 5}, 5)],
                         ids=["never committed", "committed, before Faust read it"])
async def test_the_first_records_of_a_partition_faust_knows_no_start_of_are_not_passed_over(
        committed: dict[tuple[str, int], int], start: int) -> None:
    """Faust's recovery resumes the flow before it reads the group's committed offsets: a record handed over then
    says nothing of where the partition starts; the brokers do."""
    brokers = _BrokerLog({("m", 2): range(9)}, committed)
    ledger = OffsetLedger(_Committer(), lambda topic, partition: (topic, partition), first_offset=brokers.first_offset,
                          group_start=brokers.group_start)
    admitted, seeks = await ledger.admit([("m", 2, 7), ("m", 2, 8)], lambda r: r)
    assert admitted == [] and seeks == [(("m", 2), start)], f"{start} to 6 were dropped before 7 was handed over"
    admitted, seeks = await ledger.admit([("m", 2, o) for o in range(start, 9)], lambda r: r)
    assert admitted == [("m", 2, o) for o in range(start, 9)] and seeks == []
    assert len(brokers.asked) == (0 if committed else 1), "the start is asked once"
    ledger.handled(admitted)
    admitted, seeks = await ledger.admit([("m", 2, 9)], lambda r: r)
    assert admitted == [("m", 2, 9)]


@pytest.mark.parametrize("brokers", [_BrokerLog({("m", 0): range(100), ("r", 0): range(5, 100)}), _BrokerLog(None)],
                         ids=["the brokers hold the records", "the brokers do not answer"])
async def test_the_same_gap_after_the_seek_is_never_passed_over_on_a_guess(brokers: _BrokerLog) -> None:
    """Faust's fetch loop can undo a seek (it sets its read offset after handing a record over), and then drops
    the records read again from the seek: the record after the gap comes first again although the missing ones
    are in the log. Taking that for a real gap passed a message over for good."""
    ledger = OffsetLedger(_Committer(), lambda topic, partition: (topic, partition), committed={("m", 0): 10}.get,
                          first_offset=brokers.first_offset, group_start=brokers.group_start)
    admitted, seeks = await ledger.admit([("m", 0, 10), ("m", 0, 13)], lambda r: r)
    assert admitted == [("m", 0, 10)] and seeks == [(("m", 0), 11)]
    ledger.handled(admitted)
    for _ in range(3):  # dropped again, as often as it happens
        admitted, seeks = await ledger.admit([("m", 0, 13), ("m", 0, 14), ("r", 0, 5)], lambda r: r)
        assert admitted == [("r", 0, 5)] and seeks == [(("m", 0), 11)], "sought back again; 14 waits too"
    assert [a for a in brokers.asked if a[0] == ("m", 0)] == [(("m", 0), 11)] * 3
    admitted, seeks = await ledger.admit([("m", 0, 11), ("m", 0, 12), ("m", 0, 13), ("m", 0, 14)], lambda r: r)
    assert admitted == [("m", 0, 11), ("m", 0, 12), ("m", 0, 13), ("m", 0, 14)] and seeks == []


async def test_a_request_asked_again_while_this_process_calls_the_model_waits_for_that_call() -> None:
    store, model, metrics = InMemoryContentStore(), _Model(delay=0.2), Metrics.create()
    calls = ModelCalls(model, store, metrics, owner="w1")  # one owner: its own lease would let it call twice
    a, b = await asyncio.gather(calls.answer(_request()), calls.answer(_request()))
    assert model.calls == 1 and a == b
    assert _value(metrics, "om_model_calls_saved_total", reason="in_flight") == 1


async def test_a_result_stored_after_its_record_was_erased_is_removed_and_not_published() -> None:
    """An erase that ran during the call (its ledger note written, its sweep done) finds no result to sweep: the
    model worker's own check after storing removes it."""
    store, metrics = InMemoryContentStore(), Metrics.create()

    class ErasedDuringTheCall(_Model):
        async def __call__(self, request: RequestObservation | Any) -> ModelResultArrived:
            await store.mark_erased(record_digest(request.record_key), request.epoch, 3600)
            return await super().__call__(request)

    calls = ModelCalls(ErasedDuringTheCall(), store, metrics, owner="w1", ledger=store)
    assert await calls.answer(_request()) is None
    assert store.cycle_results.result_count() == 0
    assert metrics.erasure_writes_undone.labels("cycle_result")._value.get() == 1


async def test_a_ledger_that_cannot_be_read_after_the_call_leaves_no_stored_result() -> None:
    """Unknown is not 'not erased': a result whose record may have been swept meanwhile is not kept (a repeat pays
    again), and the answer still goes out."""
    class Unreadable(InMemoryContentStore):
        def __init__(self) -> None:
            super().__init__()
            self.reads = 0

        async def erased_through(self, record_digest: str) -> int | None:
            self.reads += 1
            if self.reads > 1:  # the check after the call
                raise StorageError("no replica answered")
            return await super().erased_through(record_digest)

    store, model = Unreadable(), _Model()
    calls = ModelCalls(model, store, Metrics.create(), owner="w1", ledger=store)
    result = await calls.answer(_request())
    assert result is not None and result.ok and model.calls == 1
    assert store.cycle_results.result_count() == 0


class _SlowResults(InMemoryContentStore):
    """A results store whose writes take ``write_s`` (a saturated Cassandra)."""

    def __init__(self, write_s: float) -> None:
        super().__init__()
        self.write_s = write_s

    async def put_result(self, key: str, payload: bytes, *, record_key: str | None = None) -> None:
        await asyncio.sleep(self.write_s)
        await super().put_result(key, payload, record_key=record_key)


async def test_a_result_stored_slower_than_the_wait_is_published_and_a_repeat_is_not_paid_again() -> None:
    store, model, metrics = _SlowResults(write_s=0.5), _Model(), Metrics.create()
    calls = ModelCalls(model, store, metrics, owner="w1", lease_s=3.0, poll_s=0.05, store_wait_s=0.1)
    began = asyncio.get_running_loop().time()
    first = await calls.answer(_request())
    assert first is not None and asyncio.get_running_loop().time() - began < 0.4  # not held by the slow write
    # asked again at once (a deadline's re-ask, another worker's take-over): the write has not landed yet
    other = ModelCalls(model, store, metrics, owner="w2", lease_s=3.0, poll_s=0.05, store_wait_s=1.0)
    again = await asyncio.wait_for(other.answer(_request(attempt=2)), 5)
    assert model.calls == 1, "the repeat paid the provider again"
    assert again is not None and again.observations == first.observations


async def test_a_result_that_lands_late_after_its_record_was_erased_is_removed() -> None:
    store, model, metrics = _SlowResults(write_s=0.3), _Model(), Metrics.create()
    calls = ModelCalls(model, store, metrics, owner="w1", ledger=store, lease_s=3.0, store_wait_s=0.05)
    result = await calls.answer(_request())
    assert result is not None  # the ledger said nothing yet: published
    await store.mark_erased(record_digest("t-1"), 0, 3600)  # erased while the write is still on its way
    await asyncio.sleep(0.6)
    assert store.cycle_results.result_count() == 0
