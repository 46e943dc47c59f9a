"""What om-stream's Kafka topics keep, and how long after an erase whatever they held about the erased thread is
gone from the brokers: each topic's configuration (created with it, checked against it at start) and its erasure
window. Pure: the numbers come from the lifecycle settings and Kafka's documented behaviour; no broker is asked.

Two kinds of topics:

* **Logs** (``cleanup.policy=delete``: messages, commands, records, model requests and results, events, DLQ, recall
  requests and responses). One record cannot be removed; Kafka deletes a whole segment once its newest record is
  older than ``retention.ms`` (the active segment too: it is rolled first). A record written just before the erase
  is gone at the latest after::

      skew          its timestamp may run ahead of the broker's clock by message.timestamp.after.max.ms
      segment.ms    records keep joining its segment for segment.ms after the segment's first one
      retention.ms  the segment goes once its newest record is older than this
      5 min         the broker looks for expired segments every log.retention.check.interval.ms (Kafka's default)
      1 min         file.delete.delay.ms: the files go this long after the segment left the log

* **Compacted** (``cleanup.policy=compact``: the context topic and the state table's changelog). The erase writes a
  tombstone (the key, no value); the records it supersedes (the *values*) go when the log cleaner compacts the
  segments holding them and the tombstone. The cleaner never touches the active segment, and Kafka rolls a segment
  only when a record is appended: a partition nobody writes to keeps its erased values forever. So the worker writes
  a tombstone of a key no thread can have to each partition it holds (``runtime/worker/segment_roll.py``) every
  :func:`segment_roll_interval_ms`, and a segment rolls within that much of ``min(segment.ms,
  max.compaction.lag.ms)``; once rolled, ``max.compaction.lag.ms`` (KIP-354) makes the cleaner take it even below
  ``min.cleanable.dirty.ratio``. These topics are stamped with the broker's clock (``LogAppendTime``): the roll and
  the cleaner read timestamps, and a producer's clock running behind would hold a segment back (Kafka bounds future
  timestamps, not past ones). Values are gone at the latest after::

      max(min(segment.ms, max.compaction.lag.ms) + roll interval, max.compaction.lag.ms)
          + 15 s (log.cleaner.backoff.ms, an idle cleaner) + file.delete.delay.ms

  The tombstone itself (the thread's id, no content) stays ``delete.retention.ms`` after that first cleaning
  (KIP-534), so that a consumer that was offline still sees the erase, and goes at the next cleaning after it, at
  most one more cleaning period later.

Windows are counted from the erase: for a log, from the last record written before it; for a compacted topic, from
the tombstone the erase writes. A cleaner busy with other logs adds its queue; broker settings other than Kafka's
defaults for the two broker intervals above add their difference (docs/lifecycle.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from om_stream.settings import KafkaSettings, LifecycleSettings

__all__ = ["CLEANER_BACKOFF_MS", "DAY_MS", "FILE_DELETE_DELAY_MS", "HOUR_MS", "RETENTION_CHECK_MS", "CompactedPolicy",
           "ErasureWindow", "LogPolicy", "Span", "TopicPolicy", "changelog_config", "erasure_windows",
           "human_duration", "longest_window", "segment_roll_interval_ms", "topic_policies", "windows",
           "windows_beyond_promise"]

SECOND_MS = 1000
HOUR_MS = 3600 * SECOND_MS
DAY_MS = 24 * HOUR_MS
# Kafka's defaults for the broker-wide intervals the windows count on (not topic configurations: the worker cannot
# check them per topic); file.delete.delay.ms is a topic configuration, set to this and checked
RETENTION_CHECK_MS = 5 * 60 * SECOND_MS  # log.retention.check.interval.ms
CLEANER_BACKOFF_MS = 15 * SECOND_MS  # log.cleaner.backoff.ms
FILE_DELETE_DELAY_MS = 60 * SECOND_MS  # file.delete.delay.ms


@dataclass(frozen=True)
class LogPolicy:
    """A log's promise: what it holds, and the configuration that bounds how long it holds it. ``setting`` names
    the variable of its retention."""

    topic: str
    holds: str
    setting: str
    segment_ms: int
    max_timestamp_skew_ms: int
    retention_ms: int

    def config(self) -> dict[str, str]:
        """The topic configuration om-stream creates the topic with (and checks an existing one against)."""
        return {"cleanup.policy": "delete", "retention.ms": str(self.retention_ms), **_common(self)}


@dataclass(frozen=True)
class CompactedPolicy:
    """A compacted topic's promise (``setting`` names the variable of its compaction lag)."""

    topic: str
    holds: str
    setting: str
    segment_ms: int
    max_timestamp_skew_ms: int
    max_compaction_lag_ms: int
    tombstone_retention_ms: int

    def config(self) -> dict[str, str]:
        """The topic configuration om-stream creates the topic with (and checks an existing one against)."""
        # stamped with the broker's clock: the cleaner and the roll read timestamps, and a producer's clock running
        # behind would hold a segment back from rolling by as much (Kafka bounds future timestamps, not past ones)
        return {"cleanup.policy": "compact", "max.compaction.lag.ms": str(self.max_compaction_lag_ms),
                "min.compaction.lag.ms": "0", "delete.retention.ms": str(self.tombstone_retention_ms),
                "message.timestamp.type": "LogAppendTime", **_common(self)}


TopicPolicy = LogPolicy | CompactedPolicy


def _common(policy: TopicPolicy) -> dict[str, str]:
    return {"segment.ms": str(policy.segment_ms), "message.timestamp.after.max.ms": str(policy.max_timestamp_skew_ms),
            "file.delete.delay.ms": str(FILE_DELETE_DELAY_MS)}


@dataclass(frozen=True)
class Span:
    """One term of a window: what takes this long."""

    what: str
    ms: int


@dataclass(frozen=True)
class ErasureWindow:
    """How long after an erase something a topic held may still be on a broker's disk: ``records`` of a log,
    ``values`` (superseded records) or ``keys`` (the tombstone, which holds the key only) of a compacted topic."""

    topic: str
    subject: Literal["records", "values", "keys"]
    spans: tuple[Span, ...]

    @property
    def ms(self) -> int:
        return sum(span.ms for span in self.spans)

    @property
    def days(self) -> int:
        """The window in whole days, rounded up: "gone within N days"."""
        return math.ceil(self.ms / DAY_MS)

    def __str__(self) -> str:
        return human_duration(self.ms)


def segment_roll_interval_ms(lifecycle: LifecycleSettings) -> int:
    """How often the worker writes a roll tombstone to each compacted partition it holds: a quarter of the time
    after which a segment may roll, between 1 s and 1 h (at the defaults, 1 h: two dozen tiny records per partition
    a day)."""
    roll_ms = min(lifecycle.segment_s, lifecycle.max_compaction_lag_s) * SECOND_MS
    return max(SECOND_MS, min(HOUR_MS, roll_ms // 4))


def topic_policies(kafka: KafkaSettings, lifecycle: LifecycleSettings, *, resource_scope: bool,
                   changelogs: Iterable[str] = ()) -> list[TopicPolicy]:
    """Every topic a deployment uses that can hold a thread's data, with its policy. ``changelogs``: the state
    table's changelog topics (the worker knows their names)."""
    life = lifecycle
    logs = [
        (kafka.topic_messages, "MESSAGES", life.messages_retention_s,
         "chat messages as the agents published them (text, tool calls, files)"),
        (kafka.topic_commands, "COMMANDS", life.commands_retention_s,
         "manual commands (observe, reflect, overrides with instructions, clear)"),
        (kafka.topic_model_requests, "MODEL_REQUESTS", life.model_requests_retention_s,
         "Observer and Reflector requests: ids of the messages and observations to read, the threads' titles and "
         "current-task hints"),
        (kafka.topic_model_results, "MODEL_RESULTS", life.model_results_retention_s,
         "what the Observer and Reflector wrote (observation text, extracted values) and timers"),
        (kafka.topic_events, "EVENTS", life.events_retention_s,
         "data-om-* lifecycle events, with observation text, thread titles and extracted values"),
        (kafka.topic_dlq, "DLQ", life.dlq_retention_s,
         "whole records that could not be processed (raw input), with the reason"),
        (kafka.topic_recall_requests, "RECALL_REQUESTS", life.recall_requests_retention_s,
         "recall queries (free text)"),
        (kafka.topic_recall_responses, "RECALL_RESPONSES", life.recall_responses_retention_s,
         "recalled messages and observations (text)"),
    ]
    if resource_scope:
        logs.insert(2, (kafka.topic_records, "RECORDS", life.records_retention_s,
                        "raw messages and commands re-keyed by resource"))
    policies: list[TopicPolicy] = [
        LogPolicy(topic, holds, f"OM_LIFECYCLE_{name}_RETENTION_S", segment_ms=life.segment_s * SECOND_MS,
                  max_timestamp_skew_ms=life.max_timestamp_skew_s * SECOND_MS, retention_ms=retention_s * SECOND_MS)
        for topic, name, retention_s, holds in logs]
    policies.append(_compacted(kafka.topic_context, "the latest context of each thread: its observations and "
                                                    "recent messages (text)", lifecycle))
    policies.append(_compacted(kafka.topic_context_index, "each thread's system blocks by digest "
                                                          "(OM_CONTEXT_WIRE=v2)", lifecycle))
    policies.append(_compacted(kafka.topic_context_blocks, "each system block of a thread's context: its "
                                                           "observations and hints (text; OM_CONTEXT_WIRE=v2)",
                               lifecycle))
    policies.extend(_compacted(name, "each record's control state (ids, token counts, thread titles, current-task "
                                     "hints)", lifecycle) for name in changelogs)
    return policies


def _compacted(topic: str, holds: str, lifecycle: LifecycleSettings) -> CompactedPolicy:
    return CompactedPolicy(topic, holds, "OM_LIFECYCLE_MAX_COMPACTION_LAG_S",
                           segment_ms=lifecycle.segment_s * SECOND_MS,
                           max_timestamp_skew_ms=lifecycle.max_timestamp_skew_s * SECOND_MS,
                           max_compaction_lag_ms=lifecycle.max_compaction_lag_s * SECOND_MS,
                           tombstone_retention_ms=lifecycle.tombstone_retention_s * SECOND_MS)


def changelog_config(lifecycle: LifecycleSettings, *, segment_bytes: int | None = None) -> dict[str, str]:
    """The configuration of the state table's changelog (Faust creates it with the table's extra topic
    configuration; its name is Faust's). ``segment_bytes`` (``OM_KAFKA_CHANGELOG_SEGMENT_MB``): a segment that
    fills rolls before ``segment.ms``, and the cleaner may then compact it, which bounds what a worker taking a
    partition over reads; it promises nothing about erasure (a segment rolled sooner is cleaned sooner), so it is
    set at creation and not checked on an existing topic."""
    config = _compacted("", "", lifecycle).config()
    if segment_bytes is not None:
        config["segment.bytes"] = str(segment_bytes)
    return config


def erasure_windows(policy: TopicPolicy, *, roll_interval_ms: int) -> tuple[ErasureWindow, ...]:
    """The worst case of ``policy``'s topic: one window for a log, two (values, then keys) for a compacted topic.
    ``roll_interval_ms``: :func:`segment_roll_interval_ms` of the same settings."""
    files = Span("files removed after the segment left the log (file.delete.delay.ms)", FILE_DELETE_DELAY_MS)
    if isinstance(policy, LogPolicy):
        return (ErasureWindow(policy.topic, "records", (
            Span("a timestamp ahead of the broker's clock (message.timestamp.after.max.ms)",
                 policy.max_timestamp_skew_ms),
            Span("later records join the segment (segment.ms)", policy.segment_ms),
            Span("the segment's newest record expires (retention.ms)", policy.retention_ms),
            Span("the broker's next retention check (log.retention.check.interval.ms)", RETENTION_CHECK_MS),
            files)),)
    lag = policy.max_compaction_lag_ms
    # the segment holding the tombstone rolls at the first write after min(segment.ms, lag) (a roll tombstone at
    # the latest); the cleaner must take it once its first record is older than the lag. The broker's clock stamps
    # the records (LogAppendTime): no producer's clock moves either
    due = Span("the segment holding the tombstone rolls, and the cleaner must take it (segment.ms, "
               "max.compaction.lag.ms, the roll interval)",
               max(min(policy.segment_ms, lag) + roll_interval_ms, lag))
    cleaner = Span("an idle cleaner's next pass (log.cleaner.backoff.ms)", CLEANER_BACKOFF_MS)
    values = ErasureWindow(policy.topic, "values", (due, cleaner, files))
    keys = ErasureWindow(policy.topic, "keys", (
        due, cleaner,
        Span("the tombstone stays readable for consumers that were offline (delete.retention.ms)",
             policy.tombstone_retention_ms),
        Span("the next cleaning, which drops it", due.ms + CLEANER_BACKOFF_MS), files))
    return values, keys


def windows_beyond_promise(policies: Sequence[TopicPolicy], lifecycle: LifecycleSettings) -> list[ErasureWindow]:
    """The windows longer than ``lifecycle.erased_within_days``: settings that break their own promise."""
    promise_ms = lifecycle.erased_within_days * DAY_MS
    return [window for found in windows(policies, lifecycle).values() for window in found if window.ms > promise_ms]


def human_duration(ms: int) -> str:
    """``ms`` as days, hours, minutes and seconds, the zero parts left out: ``8 d 1 h 6 min``."""
    parts = []
    rest = ms // SECOND_MS
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}")
    if ms % SECOND_MS or not parts:
        parts.append(f"{ms % SECOND_MS} ms")
    return " ".join(parts)


def windows(policies: Sequence[TopicPolicy], lifecycle: LifecycleSettings) -> dict[str, tuple[ErasureWindow, ...]]:
    """Topic -> its windows under ``lifecycle`` (for the docs and the erase receipt)."""
    roll = segment_roll_interval_ms(lifecycle)
    return {policy.topic: erasure_windows(policy, roll_interval_ms=roll) for policy in policies}


def longest_window(policies: Sequence[TopicPolicy], lifecycle: LifecycleSettings) -> ErasureWindow:
    """The longest window of all: after it, nothing any topic held about an erased thread is left."""
    return max((w for found in windows(policies, lifecycle).values() for w in found), key=lambda w: w.ms)


FENCE_MARGIN_MS = DAY_MS  # beyond the input logs' window, for a consumer far behind its group


def fence_window_ms(kafka: KafkaSettings, lifecycle: LifecycleSettings, *, resource_scope: bool) -> int:
    """How long an erase keeps its fence (and the ledger its rows): a message published before the erase can be
    read, lagging or replayed, until its input log has removed it. The longest window of the topics a message
    reaches the memory agent through (``om.messages``, and ``om.records`` in resource scope), and a day more."""
    inputs = {kafka.topic_messages, kafka.topic_records} if resource_scope else {kafka.topic_messages}
    policies = [p for p in topic_policies(kafka, lifecycle, resource_scope=resource_scope) if p.topic in inputs]
    return max(w.ms for found in windows(policies, lifecycle).values() for w in found) + FENCE_MARGIN_MS
