"""A content-store outage told as the worker tells it: when it begins and ends, what the log and the gauge say, the
reason in words for each failure the Cassandra driver raises, and how liveness judges a stall the store causes
(live within ``worker.store_outage_budget_s``, not past it)."""

from __future__ import annotations

import logging

import pytest
from cassandra import (
    ConsistencyLevel,
    OperationTimedOut,
    ReadFailure,
    Unavailable,
    WriteFailure,
    WriteTimeout,
    WriteType,
)
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionShutdown

from om_stream.adapters.cassandra_store.session import outage_reason, translate
from om_stream.observability.metrics import Metrics
from om_stream.observability.store_outages import QUIET_S, REPEAT_S, REPORT_AFTER_S, StoreOutageWatch
from om_stream.runtime.worker.liveness import Liveness

QUORUM_LOST = "put_message: LOCAL_QUORUM cannot be reached, it needs 2 replicas and 1 is alive"


def _gauge(metrics: Metrics, store: str = "cassandra") -> float | None:
    return metrics.registry.get_sample_value("om_store_unavailable", {"store": store})


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_failure_retried_on_another_node_at_once_is_no_outage_anyone_hears_of(
        caplog: pytest.LogCaptureFixture) -> None:
    metrics, now = Metrics.create(), [100.0]
    watch = StoreOutageWatch(metrics, clock=lambda: now[0])
    watch.failing("cassandra", "put_message: connection to 127.0.0.3:9042 lost")
    now[0] += 0.2
    watch.succeeded("cassandra")  # too soon after the failure to end it: other operations may still fail
    assert [o.reported for o in watch.ongoing()] == [False]
    now[0] += QUIET_S
    watch.succeeded("cassandra")
    assert watch.ongoing() == [] and _gauge(metrics) is None and not _errors(caplog)


def test_an_outage_whose_only_success_came_right_after_its_last_failure_ends_once_quiet_without_more_traffic(
        caplog: pytest.LogCaptureFixture) -> None:
    """The store comes back under a retried write, every stalled write goes through within ``QUIET_S`` of the last
    failure, and then nothing is written (the agents wait for their contexts). The outage must still end: the gauge
    back to 0 and the log saying so, once ``QUIET_S`` has passed with no new failure (the cluster tier in CI: the
    gauge stayed 1 for two minutes after the nodes returned, because only a later success could end it)."""
    metrics, now = Metrics.create(), [0.0]
    watch = StoreOutageWatch(metrics, clock=lambda: now[0])
    with caplog.at_level(logging.INFO):
        for _ in range(int(REPORT_AFTER_S) * 2 + 1):
            watch.failing("cassandra", QUORUM_LOST)
            now[0] += 0.5
        assert _gauge(metrics) == 1
        watch.succeeded("cassandra")  # 0.5 s after the last failure: too soon to end it alone
        assert [o.reported for o in watch.ongoing()] == [True]
        now[0] += QUIET_S
        liveness = Liveness(metrics, stall_timeout_s=30, outages=watch, clock=lambda: now[0])
        liveness.check_progress([("messages", 0, 0, 12)])  # the worker's watch, every second, nothing stalled
        assert _gauge(metrics) == 0  # no operation since: the quiet time alone ended it
        assert watch.ongoing() == []
    assert any("available again" in r.getMessage() for r in caplog.records)


def test_a_failure_after_the_early_success_keeps_the_outage_going(caplog: pytest.LogCaptureFixture) -> None:
    metrics, now = Metrics.create(), [0.0]
    watch = StoreOutageWatch(metrics, clock=lambda: now[0])
    for _ in range(int(REPORT_AFTER_S) * 2 + 1):
        watch.failing("cassandra", QUORUM_LOST)
        now[0] += 0.5
    watch.succeeded("cassandra")
    now[0] += 0.5
    watch.failing("cassandra", QUORUM_LOST)  # part of the ring still out of reach
    now[0] += QUIET_S
    assert [o.store for o in watch.ongoing()] == ["cassandra"] and _gauge(metrics) == 1

def test_an_outage_is_reported_once_it_lasts_repeated_while_it_lasts_and_ends_with_a_quiet_success(
        caplog: pytest.LogCaptureFixture) -> None:
    metrics, now = Metrics.create(), [0.0]
    watch = StoreOutageWatch(metrics, clock=lambda: now[0])
    with caplog.at_level(logging.INFO):
        for _ in range(int(REPORT_AFTER_S) * 2 + 1):  # a retry every half second
            watch.failing("cassandra", QUORUM_LOST)
            now[0] += 0.5
        assert _gauge(metrics) == 1
        reported = _errors(caplog)
        assert len(reported) == 1 and "content store cassandra unavailable for 5 s" in reported[0]
        assert QUORUM_LOST in reported[0] and "nothing is dead-lettered" in reported[0]
        now[0] += REPEAT_S
        watch.failing("cassandra", "put_message: LOCAL_QUORUM write timed out, 1 of 2 replicas answered")
        assert "still unavailable after 66 s: put_message: LOCAL_QUORUM write timed out" in _errors(caplog)[-1]
        [outage] = watch.ongoing()
        assert outage.store == "cassandra" and outage.seconds == pytest.approx(65.5) and outage.reported
        now[0] += 0.5
        watch.succeeded("cassandra")  # the first success after the nodes came back ends it only once quiet
        assert _gauge(metrics) == 1
        now[0] += QUIET_S
        watch.succeeded("cassandra")
    assert _gauge(metrics) == 0 and watch.ongoing() == []
    assert caplog.records[-1].levelno == logging.WARNING
    assert caplog.records[-1].getMessage() == "content store cassandra available again after 68 s"


def test_successes_between_failures_do_not_end_an_outage_that_goes_on() -> None:
    """A part of the ring out of reach: some operations fail, others succeed, the outage lasts."""
    metrics, now = Metrics.create(), [0.0]
    watch = StoreOutageWatch(metrics, clock=lambda: now[0])
    for _ in range(40):
        watch.failing("cassandra", QUORUM_LOST)
        now[0] += 0.5
        watch.succeeded("cassandra")
    [outage] = watch.ongoing()
    assert outage.seconds == pytest.approx(20) and outage.reported and _gauge(metrics) == 1


def test_the_reason_names_the_consistency_level_and_replicas_for_each_failure_the_driver_raises() -> None:
    quorum = ConsistencyLevel.LOCAL_QUORUM
    assert outage_reason(Unavailable("Cannot achieve consistency level LOCAL_QUORUM", consistency=quorum,
                                     required_replicas=2, alive_replicas=1), "put_message") == QUORUM_LOST
    assert outage_reason(Unavailable("x", consistency=quorum, required_replicas=2, alive_replicas=0),
                         "get_result") == "get_result: LOCAL_QUORUM cannot be reached, it needs 2 replicas and 0 " \
                                          "are alive"
    assert outage_reason(WriteTimeout("x", consistency=quorum, required_responses=2, received_responses=1,
                                      write_type=WriteType.SIMPLE), "put_segment") == \
        "put_segment: LOCAL_QUORUM write timed out, 1 of 2 replicas answered"
    assert outage_reason(NoHostAvailable("none", {"127.0.0.2:9042": OSError("refused")}), "q") == \
        "q: no node reachable (127.0.0.2:9042)"
    # the driver tried the one node it counts up, which answered that the level is out of reach
    answered = Unavailable("x", consistency=quorum, required_replicas=2, alive_replicas=1)
    assert outage_reason(NoHostAvailable("Unable to complete the operation against any hosts",
                                         {"127.0.0.1:9042": answered}), "put_message") == QUORUM_LOST
    assert outage_reason(OperationTimedOut(last_host="127.0.0.3:9042"), "q") == \
        "q: no answer from 127.0.0.3:9042 in time"
    assert outage_reason(ConnectionShutdown("closed", endpoint="127.0.0.3:9042"), "q") == \
        "q: connection to 127.0.0.3:9042 lost"
    # each of them is one the store retries
    for exc in (Unavailable("x"), OperationTimedOut(), ConnectionShutdown("closed")):
        assert translate(exc, "q").transient


def test_replicas_failing_for_a_reason_that_passes_are_retried_and_the_others_refuse_the_request() -> None:
    """A replica whose schema is behind (a table `om-stream migrate` just made, a node that was down meanwhile) fails
    a request with INCOMPATIBLE_SCHEMA until the schema reaches it: worth retrying, never a dead letter. Too many
    tombstones is the request's own fault."""
    behind = WriteFailure("Operation failed - received 1 responses and 2 failures", consistency=ConsistencyLevel.ONE,
                          required_responses=2, received_responses=1, failures=2,
                          error_code_map={"127.0.0.2": 3, "127.0.0.3": 3})
    assert translate(behind, "put_observation").transient
    assert outage_reason(behind, "put_observation") == \
        "put_observation: replicas failed it (INCOMPATIBLE_SCHEMA from 127.0.0.2, INCOMPATIBLE_SCHEMA from 127.0.0.3)"
    down = ReadFailure("x", consistency=ConsistencyLevel.ONE, required_responses=2, received_responses=1, failures=1,
                       error_code_map={"127.0.0.2": 5})
    assert translate(down, "segment").transient
    tombstones = ReadFailure("x", consistency=ConsistencyLevel.ONE, required_responses=2, received_responses=1,
                             failures=1, error_code_map={"127.0.0.2": 1})
    mixed = ReadFailure("x", consistency=ConsistencyLevel.ONE, required_responses=2, received_responses=0,
                        failures=2, error_code_map={"127.0.0.2": 3, "127.0.0.3": 1})
    for refused in (tombstones, mixed, ReadFailure("x"), WriteFailure("x")):
        assert not translate(refused, "q").transient


def _stalled(live: Liveness, now: list[float], seconds: int) -> None:
    """Partition 0 holds records and does not move for ``seconds`` (one check a second)."""
    for _ in range(seconds):
        now[0] += 1
        live.check_progress([("om.messages", 0, 7, 40)])


def test_a_stall_while_the_store_is_down_stays_live_within_the_budget_and_fails_past_it(
        caplog: pytest.LogCaptureFixture) -> None:
    metrics, now = Metrics.create(), [0.0]
    watch = StoreOutageWatch(metrics, clock=lambda: now[0])
    live = Liveness(metrics, stall_timeout_s=10, outages=watch, outage_budget_s=60, clock=lambda: now[0])
    watch.failing("cassandra", QUORUM_LOST)
    _stalled(live, now, 30)
    assert live.stalled and live.live and metrics.registry.get_sample_value("om_worker_live") == 1
    assert live.reasons() == []
    assert live.waiting()[0] == f"content store cassandra unavailable for 30s (live for up to 60s of it): {QUORUM_LOST}"
    assert "om.messages[0]: 7 records waiting" in live.waiting()[1]
    assert not _errors(caplog), "a stall the store explains is a warning, not an error"
    _stalled(live, now, 31)  # the outage is 61 s old
    assert not live.live and metrics.registry.get_sample_value("om_worker_live") == 0
    assert live.reasons()[0] == ("content store cassandra unavailable for 61s, past worker.store_outage_budget_s "
                                 f"(60s): {QUORUM_LOST}")
    assert [m for m in _errors(caplog) if "past worker.store_outage_budget_s" in m], "said once, at ERROR"
    live.check_progress([("om.messages", 0, 3, 44)])  # the store came back: the partition moved
    assert live.live and live.waiting() == [] and metrics.registry.get_sample_value("om_worker_live") == 1


def test_a_stall_with_no_store_outage_fails_liveness_at_the_stall_timeout(caplog: pytest.LogCaptureFixture) -> None:
    metrics, now = Metrics.create(), [0.0]
    live = Liveness(metrics, stall_timeout_s=10, outages=StoreOutageWatch(metrics, clock=lambda: now[0]),
                    outage_budget_s=600, clock=lambda: now[0])
    _stalled(live, now, 11)
    assert not live.live and "om.messages[0]" in live.reasons()[0]
    assert any("partition stalled" in m for m in _errors(caplog))


def test_a_store_outage_with_nothing_stalled_leaves_the_worker_live_past_the_budget() -> None:
    """An idle worker waits for nobody: restarting it would not help anyone."""
    metrics, now = Metrics.create(), [0.0]
    watch = StoreOutageWatch(metrics, clock=lambda: now[0])
    live = Liveness(metrics, stall_timeout_s=10, outages=watch, outage_budget_s=60, clock=lambda: now[0])
    for _ in range(120):
        watch.failing("cassandra", QUORUM_LOST)
        live.check_progress([("om.messages", 0, 0, 40)])
        now[0] += 1
    assert live.live and live.waiting() == []
