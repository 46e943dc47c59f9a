"""The erasure windows of om-stream's topics (``om_stream.retention``): their exact values at the defaults, that the
defaults keep a 30-day promise, and, as a property over many random histories, that a model of Kafka's own rules
(segment rolling, time retention, the log cleaner with max.compaction.lag.ms and KIP-534's tombstone horizon) never
keeps a record past the window the formulas give."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from om_stream.devservices.jvm import free_port
from om_stream.errors import LifecycleBreach
from om_stream.retention import (
    CLEANER_BACKOFF_MS,
    DAY_MS,
    FILE_DELETE_DELAY_MS,
    HOUR_MS,
    RETENTION_CHECK_MS,
    CompactedPolicy,
    LogPolicy,
    erasure_windows,
    human_duration,
    longest_window,
    segment_roll_interval_ms,
    topic_policies,
    windows,
    windows_beyond_promise,
)
from om_stream.runtime.worker.topics import ensure_topics
from om_stream.settings import KafkaSettings, LifecycleSettings

CHANGELOG = "om-stream-om_records-changelog"


def _policies(lifecycle: LifecycleSettings, *, resource_scope: bool = False) -> list[LogPolicy | CompactedPolicy]:
    return topic_policies(KafkaSettings(), lifecycle, resource_scope=resource_scope, changelogs=[CHANGELOG])


def test_the_default_windows_exactly() -> None:
    found = {(w.topic, w.subject): w.ms for ws in windows(_policies(LifecycleSettings()), LifecycleSettings()).values()
             for w in ws}
    slack = RETENTION_CHECK_MS + FILE_DELETE_DELAY_MS  # 6 min
    assert found[("om.messages", "records")] == HOUR_MS + DAY_MS + 7 * DAY_MS + slack
    assert found[("om.model-results", "records")] == HOUR_MS + DAY_MS + DAY_MS + slack
    assert found[("om.dlq", "records")] == HOUR_MS + DAY_MS + 14 * DAY_MS + slack
    # the roll tombstones every hour: the segment holding the tombstone rolls within 1 d 1 h (broker time: no skew)
    values = (DAY_MS + HOUR_MS) + CLEANER_BACKOFF_MS + FILE_DELETE_DELAY_MS
    assert found[("om.context", "values")] == found[(CHANGELOG, "values")] == values
    assert found[("om.context", "keys")] == values + 7 * DAY_MS + DAY_MS + HOUR_MS + CLEANER_BACKOFF_MS
    assert str(longest_window(_policies(LifecycleSettings()), LifecycleSettings())) == "15 d 1 h 6 min"
    assert longest_window(_policies(LifecycleSettings()), LifecycleSettings()).days == 16


def test_the_defaults_keep_a_30_day_promise_and_a_longer_retention_breaks_it() -> None:
    assert windows_beyond_promise(_policies(LifecycleSettings(), resource_scope=True), LifecycleSettings()) == []
    longer = LifecycleSettings(dlq_retention_s=29 * 86_400)
    beyond = windows_beyond_promise(_policies(longer), longer)
    assert [(w.topic, w.subject, str(w)) for w in beyond] == [("om.dlq", "records", "30 d 1 h 6 min")]
    assert windows_beyond_promise(_policies(longer), LifecycleSettings(dlq_retention_s=29 * 86_400,
                                                                       erased_within_days=31)) == []


async def test_settings_that_break_their_own_promise_are_refused_before_any_broker_is_asked(tmp_path: Path) -> None:
    # nothing listens there: a worker that tried to connect would fail with another error, or hang
    kafka = KafkaSettings(bootstrap=f"127.0.0.1:{free_port()}")
    lifecycle = LifecycleSettings(tombstone_retention_s=40 * 86_400)
    with pytest.raises(LifecycleBreach) as refused:
        await ensure_topics(kafka, lifecycle, {}, resource_scope=False, changelogs=[CHANGELOG])
    assert refused.value.problems == [
        f"the settings keep the keys of topic {topic} up to 42 d 2 h 1 min 30 s after an erase, beyond "
        "OM_LIFECYCLE_ERASED_WITHIN_DAYS=30" for topic in ("om.context", "om.context.index", "om.context.blocks",
                                                           CHANGELOG)]


def test_which_topics_a_deployment_promises_and_their_configuration() -> None:
    thread_scope = [p.topic for p in _policies(LifecycleSettings())]
    assert "om.records" not in thread_scope and len(thread_scope) == 12  # with om.context/v2's two topics
    assert "om.records" in [p.topic for p in _policies(LifecycleSettings(), resource_scope=True)]
    dlq = next(p for p in _policies(LifecycleSettings()) if p.topic == "om.dlq")
    assert dlq.config() == {"cleanup.policy": "delete", "retention.ms": "1209600000", "segment.ms": "86400000",
                            "message.timestamp.after.max.ms": "3600000", "file.delete.delay.ms": "60000"}
    assert dlq.setting == "OM_LIFECYCLE_DLQ_RETENTION_S"
    changelog = next(p for p in _policies(LifecycleSettings()) if p.topic == CHANGELOG)
    assert changelog.config() == {"cleanup.policy": "compact", "max.compaction.lag.ms": "86400000",
                                  "min.compaction.lag.ms": "0", "delete.retention.ms": "604800000",
                                  "message.timestamp.type": "LogAppendTime", "segment.ms": "86400000",
                                  "message.timestamp.after.max.ms": "3600000", "file.delete.delay.ms": "60000"}


def test_the_roll_interval_is_a_quarter_of_the_roll_time_within_a_second_and_an_hour() -> None:
    assert segment_roll_interval_ms(LifecycleSettings()) == HOUR_MS
    assert segment_roll_interval_ms(LifecycleSettings(segment_s=2, max_compaction_lag_s=600)) == 1000
    assert segment_roll_interval_ms(LifecycleSettings(segment_s=3600, max_compaction_lag_s=600)) == 150_000


def test_durations_read_as_days_hours_minutes() -> None:
    assert human_duration(15 * DAY_MS + HOUR_MS + 6 * 60_000) == "15 d 1 h 6 min"
    assert human_duration(1500) == "1 s 500 ms"
    assert human_duration(0) == "0 ms"


# -- a model of Kafka's rules, to check the formulas against ---------------------------------------------------------
# Removing any one term of a window (segment.ms, the skew, the roll interval, the compaction lag, delete.retention.ms,
# the second cleaning) makes these properties find a history that outlives it; only the retention check's 5 minutes
# were never reached. With CreateTime on a compacted topic they found one: a producer's clock running behind held a
# segment back from rolling (hence LogAppendTime there).
# What the model follows (Kafka 4.x, UnifiedLog and LogCleanerManager): a record joins the active segment unless its
# timestamp is more than the roll time past the segment's first one (then a new segment starts with it); a log's
# retention check deletes segments oldest first while their newest timestamp is older than retention.ms (the active
# one too); the cleaner never takes the active segment, must take a log whose oldest dirty segment began more than
# max.compaction.lag.ms ago and may take it any time before (min.cleanable.dirty.ratio); a cleaning drops every value
# superseded by a later record in the dirty range, stamps a tombstone seen for the first time with a horizon of
# now + delete.retention.ms, and drops a tombstone whose horizon has passed.


@dataclass
class _Segment:
    """A segment as far as the model needs it: its first and newest timestamps, its last offset, and the records
    of the erased key in it (value or tombstone: other keys' records only fill segments)."""

    first_ts: int
    newest_ts: int
    last_offset: int = -1
    erased: list[tuple[int, str]] = field(default_factory=list)  # (offset, "value" | "tombstone")


def _appends(rng: random.Random, start: int, end: int, mean_gap: int, skew: int) -> list[tuple[int, int]]:
    """(broker time, timestamp) of records appended between ``start`` and ``end``: bursts and silences, each
    timestamp anywhere from ``skew`` behind to ``skew`` ahead of the broker's clock."""
    found, now = [], start
    while True:
        now += int(rng.expovariate(1 / mean_gap)) + 1 if rng.random() < 0.8 else rng.randrange(1, 40 * mean_gap)
        if now >= end:
            return found
        found.append((now, now + rng.randint(-skew, skew)))


def _gap(rng: random.Random, segment_ms: int, span_ms: int) -> int:
    """A mean gap between appends: several records a segment, or about one, or fewer; never more than a few
    thousand records over ``span_ms``."""
    return max(span_ms // 3000, rng.choice([segment_ms // 20, segment_ms // 2, segment_ms * 3]), 1)


def _next_tick(after: int, phase: int, period: int) -> int:
    """The first time ``phase + k * period`` (k >= 0) strictly after ``after``."""
    return phase + period * max(0, (after - phase) // period + 1)


def _append(segments: list[_Segment], roll_after_ms: int, offset: int, ts: int, kind: str) -> None:
    """Kafka's roll rule: a record whose timestamp is more than the roll time past the active segment's first one
    starts a new segment."""
    if not segments or ts - segments[-1].first_ts > roll_after_ms:
        segments.append(_Segment(ts, ts))
    segment = segments[-1]
    segment.newest_ts = max(segment.newest_ts, ts)
    segment.last_offset = offset
    if kind != "other":
        segment.erased.append((offset, kind))


def _log_gone_at(policy: LogPolicy, rng: random.Random) -> tuple[int, int]:
    """(erase time, when the last record written before it is gone from disk) for one random history."""
    skew = policy.max_timestamp_skew_ms
    erase = 10 * DAY_MS
    span = policy.segment_ms + policy.retention_ms
    before = _appends(rng, erase - 2 * span, erase, _gap(rng, policy.segment_ms, 2 * span), skew)
    before.append((erase, erase + rng.randint(-skew, skew)))
    after = _appends(rng, erase, erase + 2 * span, _gap(rng, policy.segment_ms, 2 * span), skew)
    appends = [(t, ts, "value" if n == len(before) - 1 else "other") for n, (t, ts) in enumerate(before + after)]
    phase = rng.randrange(RETENTION_CHECK_MS)
    segments: list[_Segment] = []
    for offset, (now, ts, kind) in enumerate([*appends, (10**15, 0, "end")]):
        while segments:  # the retention checks up to this append: oldest segments first, the active one too
            expires = _next_tick(segments[0].newest_ts + policy.retention_ms, phase, RETENTION_CHECK_MS)
            if expires >= now:
                break
            if segments.pop(0).erased:
                return erase, expires + FILE_DELETE_DELAY_MS
        _append(segments, policy.segment_ms, offset, ts, kind)
    raise AssertionError("never deleted")


@given(seed=st.integers(0, 2**32), retention_h=st.integers(1, 24 * 30), segment_min=st.integers(1, 24 * 60 * 7),
       skew_s=st.integers(0, 7200))
@settings(max_examples=300, deadline=None)
def test_a_log_never_keeps_a_record_past_its_window(seed: int, retention_h: int, segment_min: int,
                                                      skew_s: int) -> None:
    policy = LogPolicy("t", "", "", segment_ms=segment_min * 60_000, max_timestamp_skew_ms=skew_s * 1000,
                       retention_ms=retention_h * HOUR_MS)
    erase, gone = _log_gone_at(policy, random.Random(seed))
    (window,) = erasure_windows(policy, roll_interval_ms=HOUR_MS)
    assert gone - erase <= window.ms


def _compacted_gone_at(policy: CompactedPolicy, roll_ms: int, rng: random.Random) -> tuple[int, int, int]:
    """(tombstone time, when the erased key's last value is gone from disk, when the tombstone is) for one random
    history: the key's values and other keys' records before the tombstone; after it the roll tombstones (every
    ``roll_ms`` from a random phase) and, in half the histories, other threads' records too. The broker stamps them
    (LogAppendTime): a timestamp is the append's time."""
    erase = 10 * DAY_MS
    roll_after = min(policy.segment_ms, policy.max_compaction_lag_ms)
    span = 2 * (roll_after + roll_ms + policy.max_compaction_lag_ms) + policy.tombstone_retention_ms
    before = [(t, t, "value" if rng.random() < 0.3 else "other")
              for t, _ in _appends(rng, erase - span, erase - 1, _gap(rng, roll_after, span), 0)]
    before.append((erase - 1, erase - 1, "value"))
    phase = rng.randrange(roll_ms)
    after = [erase + phase + k * roll_ms for k in range(2 * span // roll_ms + 2)]
    if rng.random() < 0.5:
        after += [t for t, _ in _appends(rng, erase, erase + 2 * span, _gap(rng, roll_after, 2 * span), 0)]
    appends = [*before, (erase, erase, "tombstone"), *sorted((t, t, "other") for t in after), (10**15, 0, "end")]
    phase = rng.randrange(CLEANER_BACKOFF_MS)
    eager = rng.random()  # how often the dirty ratio alone lets the cleaner in before it must
    segments: list[_Segment] = []
    first_dirty = 0  # the segments before it have been cleaned
    horizon: int | None = None
    values_gone = 0
    last = appends[0][0]  # the time of the last append or cleaning: no cleaning goes back before it
    for offset, (now, ts, kind) in enumerate(appends):
        while len(segments) - 1 > first_dirty:  # the cleanings up to this append, while a dirty segment is inactive
            oldest = min(segment.first_ts for segment in segments[first_dirty:-1])
            # it must clean at its first pass once the dirty segments are inactive (since ``last``) and overdue
            when = _next_tick(max(oldest + policy.max_compaction_lag_ms, last), phase, CLEANER_BACKOFF_MS)
            if rng.random() < eager:
                when = min(when, _next_tick(rng.randint(last, when), phase, CLEANER_BACKOFF_MS))
            if when >= now:
                break
            last = when
            tombstone = next((o for segment in segments[:-1] for o, k in segment.erased if k == "tombstone"), None)
            for segment in segments[:-1]:
                past_horizon = tombstone is not None and horizon is not None and when > horizon
                if past_horizon and any(k == "tombstone" for _, k in segment.erased):
                    return erase, values_gone, when + FILE_DELETE_DELAY_MS
                segment.erased = [(o, k) for o, k in segment.erased
                                  if not (k == "value" and tombstone is not None and o < tombstone)]
            if tombstone is not None and horizon is None:
                values_gone = when + FILE_DELETE_DELAY_MS
                horizon = when + policy.tombstone_retention_ms  # KIP-534: stamped at the first cleaning that saw it
            first_dirty = len(segments) - 1
        last = now
        _append(segments, roll_after, offset, ts, kind)
    raise AssertionError("never cleaned")


@given(seed=st.integers(0, 2**32), lag_min=st.integers(1, 24 * 60), segment_min=st.integers(1, 24 * 60 * 2),
       tombstone_min=st.integers(1, 24 * 60 * 3))
@settings(max_examples=200, deadline=None)
def test_a_compacted_topic_never_keeps_an_erased_value_or_its_tombstone_past_their_windows(
        seed: int, lag_min: int, segment_min: int, tombstone_min: int) -> None:
    lifecycle = LifecycleSettings(segment_s=segment_min * 60, max_compaction_lag_s=lag_min * 60,
                                  tombstone_retention_s=tombstone_min * 60)
    policy = next(p for p in _policies(lifecycle) if p.topic == "om.context")
    assert isinstance(policy, CompactedPolicy)
    roll = segment_roll_interval_ms(lifecycle)
    erase, values_gone, keys_gone = _compacted_gone_at(policy, roll, random.Random(seed))
    values, keys = erasure_windows(policy, roll_interval_ms=roll)
    assert values_gone - erase <= values.ms
    assert keys_gone - erase <= keys.ms
