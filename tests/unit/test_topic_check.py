"""What in an existing topic's configuration breaks the lifecycle settings' promise (``topic_check.breaches``),
which way breaks what, and how the refusal says it."""

from __future__ import annotations

import pytest

from om_stream.retention import DAY_MS, CompactedPolicy, LogPolicy, topic_policies
from om_stream.runtime.worker.topic_check import breaches
from om_stream.settings import KafkaSettings, LifecycleSettings

POLICIES = {p.topic: p for p in topic_policies(KafkaSettings(), LifecycleSettings(), resource_scope=False,
                                               changelogs=["app-om_records-changelog"])}
DLQ = POLICIES["om.dlq"]
CONTEXT = POLICIES["om.context"]
INFINITE = "9223372036854775807"
# what a Kafka 4.1 broker reports for a topic created with nothing set (its defaults)
BROKER_DEFAULTS = {"cleanup.policy": "delete", "retention.ms": str(7 * DAY_MS), "segment.ms": str(7 * DAY_MS),
                   "message.timestamp.after.max.ms": "3600000", "message.timestamp.type": "CreateTime",
                   "file.delete.delay.ms": "60000", "max.compaction.lag.ms": INFINITE, "min.compaction.lag.ms": "0",
                   "delete.retention.ms": str(DAY_MS)}


def _keys(policy: LogPolicy | CompactedPolicy, **changes: str) -> list[str]:
    return [b.key for b in breaches(policy, {**BROKER_DEFAULTS, **policy.config(), **changes})]


def test_a_topic_as_om_stream_creates_it_keeps_the_promise() -> None:
    for policy in POLICIES.values():
        assert breaches(policy, {**BROKER_DEFAULTS, **policy.config()}) == [], policy.topic


def test_the_previous_versions_topics_break_it() -> None:
    """0.1's DLQ (30 days, Kafka's 7-day segments) and context topic (compaction only) are refused, with a repair."""
    dlq = breaches(DLQ, {**BROKER_DEFAULTS, "retention.ms": str(30 * DAY_MS)})
    assert [(b.key, b.repair) for b in dlq] == [("retention.ms", "1209600000"), ("segment.ms", "86400000")]
    assert str(dlq[0]) == ("topic om.dlq: retention.ms is 2592000000 (30 d); the settings promise at most 1209600000 "
                           "(14 d, OM_LIFECYCLE_DLQ_RETENTION_S): records would stay longer than the promised window")
    context = breaches(CONTEXT, {**BROKER_DEFAULTS, "cleanup.policy": "compact"})
    assert [(b.key, b.found) for b in context] == [("max.compaction.lag.ms", INFINITE),
                                                   ("delete.retention.ms", str(DAY_MS)),
                                                   ("message.timestamp.type", "CreateTime"),
                                                   ("segment.ms", str(7 * DAY_MS))]
    assert "max.compaction.lag.ms is 9223372036854775807 (infinite)" in str(context[0])


@pytest.mark.parametrize(("changes", "broken"), [
    ({"retention.ms": "-1"}, ["retention.ms"]),  # infinite
    ({"retention.ms": str(14 * DAY_MS + 1)}, ["retention.ms"]),
    ({"retention.ms": str(DAY_MS), "segment.ms": "60000"}, []),  # shorter: gone sooner
    ({"cleanup.policy": "compact"}, ["cleanup.policy"]),
    ({"cleanup.policy": "compact,delete"}, []),
    ({"message.timestamp.after.max.ms": INFINITE}, ["message.timestamp.after.max.ms"]),
    ({"message.timestamp.after.max.ms": INFINITE, "message.timestamp.type": "LogAppendTime"}, []),
    ({"file.delete.delay.ms": str(DAY_MS)}, ["file.delete.delay.ms"]),
    ({"retention.ms": "soon"}, ["retention.ms"]),
])
def test_a_log_breaks_it_with_anything_that_keeps_records_longer(changes: dict[str, str], broken: list[str]) -> None:
    assert _keys(DLQ, **changes) == broken


@pytest.mark.parametrize(("changes", "broken"), [
    ({"cleanup.policy": "delete"}, ["cleanup.policy"]),
    ({"cleanup.policy": "compact,delete", "retention.ms": str(90 * DAY_MS)}, []),  # retention only removes more
    ({"max.compaction.lag.ms": INFINITE}, ["max.compaction.lag.ms"]),
    ({"max.compaction.lag.ms": "3600000"}, []),
    ({"min.compaction.lag.ms": "60000"}, ["min.compaction.lag.ms"]),
    ({"delete.retention.ms": str(DAY_MS)}, ["delete.retention.ms"]),
    ({"delete.retention.ms": str(30 * DAY_MS)}, ["delete.retention.ms"]),
    ({"message.timestamp.type": "CreateTime"}, ["message.timestamp.type"]),
])
def test_a_compacted_topic_breaks_it_with_unbounded_cleaning_or_another_tombstone_window(
        changes: dict[str, str], broken: list[str]) -> None:
    assert _keys(CONTEXT, **changes) == broken


def test_a_tombstone_window_breaks_it_both_ways_for_different_reasons() -> None:
    (shorter,) = breaches(CONTEXT, {**CONTEXT.config(), "delete.retention.ms": str(DAY_MS)})
    (longer,) = breaches(CONTEXT, {**CONTEXT.config(), "delete.retention.ms": str(30 * DAY_MS)})
    assert "offline longer than this never sees an erase's tombstone" in shorter.why
    assert "would stay past the promised window" in longer.why
    assert shorter.promised == longer.promised == "exactly 604800000 (7 d, OM_LIFECYCLE_TOMBSTONE_RETENTION_S)"
    assert shorter.repair == longer.repair == str(7 * DAY_MS)


def test_a_key_the_brokers_do_not_report_breaks_it() -> None:
    """A broker older than Kafka 3.6 has no message.timestamp.after.max.ms: future timestamps are unbounded."""
    config = DLQ.config()
    del config["message.timestamp.after.max.ms"]
    (missing,) = breaches(DLQ, config)
    assert missing.found is None and "message.timestamp.after.max.ms is not reported" in str(missing)
