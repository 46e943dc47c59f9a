"""Checking the configuration of om-stream's existing topics against what the lifecycle settings promise, and
repairing it when told to (``OM_LIFECYCLE_REPAIR_TOPICS``).

A topic created by an earlier version, by hand or by a platform team can keep data longer than the settings say
(``om_stream.retention``). :func:`breaches` says which configuration keys break the promise and why; it is pure.
:func:`check_topics` reads every topic's configuration from the brokers (DescribeConfigs) and, when repairing,
alters what breaks (AlterConfigs). That request is not incremental: it replaces every override of the topic, so the
topic's other overrides are read first and sent again with it, and a topic with a sensitive override (whose value
the brokers do not reveal) is never altered. Which way breaks what:

* ``cleanup.policy``: a log without ``delete`` keeps records forever; a compacted topic without ``compact`` never
  lets a tombstone remove what it supersedes.
* ``message.timestamp.type`` of a compacted topic: anything but ``LogAppendTime`` lets a producer's clock that runs
  behind hold a segment back from rolling and from the cleaner.
* ``retention.ms``, ``segment.ms``, ``message.timestamp.after.max.ms``, ``file.delete.delay.ms``,
  ``max.compaction.lag.ms``, ``min.compaction.lag.ms``: larger than promised (or infinite) keeps data longer;
  smaller only removes it sooner.
* ``delete.retention.ms`` breaks both ways. Shorter: a consumer offline longer than it never sees an erase's
  tombstone and keeps the erased record (a worker's local table state is wiped at start only when older than the
  promised value, see ``local_state``). Longer: the tombstone, which holds the erased thread's id, stays past the
  promised window.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import for_code

from om_stream.retention import FILE_DELETE_DELAY_MS, CompactedPolicy, TopicPolicy, human_duration

__all__ = ["Breach", "breaches", "check_topics"]

log = logging.getLogger(__name__)
_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' config_source of an override set on the topic itself
REPAIR_VISIBLE_WITHIN_S = 10.0
UNKNOWN_WITHIN_S = 30.0  # a topic created a moment ago may be unknown to the broker answering for that long


@dataclass(frozen=True)
class Breach:
    """One configuration key of one topic that breaks the promise. ``repair``: the value that keeps it (None: no
    value the worker could set would)."""

    topic: str
    key: str
    found: str | None  # None: the brokers did not report the key
    promised: str
    why: str
    repair: str | None

    def __str__(self) -> str:
        found = "not reported" if self.found is None else f"{self.found}{_readable(self.key, self.found)}"
        return f"topic {self.topic}: {self.key} is {found}; the settings promise {self.promised}: {self.why}"


def _readable(key: str, value: str) -> str:
    if not key.endswith(".ms"):
        return ""
    try:
        ms = int(value)
    except ValueError:
        return ""
    return " (infinite)" if ms < 0 or ms >= 2**63 - 1 else f" ({human_duration(ms)})"


def _at_most(key: str, limit: int, setting: str | None = None) -> str:
    where = f", {setting}" if setting else ""
    return f"at most {limit} ({human_duration(limit)}{where})" if key.endswith(".ms") else f"at most {limit}"


def _longer(policy: TopicPolicy, found: Mapping[str, str], key: str, limit: int, why: str,
            setting: str | None = None) -> Breach | None:
    """A breach when ``key`` is missing, not a number, negative (Kafka's "infinite") or above ``limit``."""
    value = found.get(key)
    try:
        number = int(value) if value is not None else None
    except ValueError:
        number = None
    if number is not None and 0 <= number <= limit:
        return None
    return Breach(policy.topic, key, value, _at_most(key, limit, setting), why, str(limit))


def breaches(policy: TopicPolicy, found: Mapping[str, str]) -> list[Breach]:
    """What in ``found`` (a topic's configuration as the brokers report it) breaks ``policy``."""
    topic = policy.topic
    problems: list[Breach | None] = []
    cleanup = set(found.get("cleanup.policy", "").replace(" ", "").split(","))
    if isinstance(policy, CompactedPolicy):
        if "compact" not in cleanup:
            problems.append(Breach(topic, "cleanup.policy", found.get("cleanup.policy"), "compact",
                                   "without compaction an erase's tombstone never removes the records it supersedes",
                                   "compact"))
        problems.append(_longer(policy, found, "max.compaction.lag.ms", policy.max_compaction_lag_ms,
                                "the cleaner may leave an erased thread's records in place for longer (below "
                                "min.cleanable.dirty.ratio, forever)", "OM_LIFECYCLE_MAX_COMPACTION_LAG_S"))
        problems.append(_longer(policy, found, "min.compaction.lag.ms", 0,
                                "the cleaner must leave records younger than this in place"))
        problems.append(_tombstone_retention(policy, found.get("delete.retention.ms"),
                                             policy.tombstone_retention_ms))
        if found.get("message.timestamp.type") != "LogAppendTime":
            problems.append(Breach(topic, "message.timestamp.type", found.get("message.timestamp.type"),
                                   "LogAppendTime", "a producer's clock running behind would hold the tombstone's "
                                   "segment back from rolling, and from the cleaner, by as much", "LogAppendTime"))
    else:
        if "delete" not in cleanup:
            problems.append(Breach(topic, "cleanup.policy", found.get("cleanup.policy"), "delete",
                                   "a log that is not deleted keeps records forever", "delete"))
        problems.append(_longer(policy, found, "retention.ms", policy.retention_ms,
                                "records would stay longer than the promised window", policy.setting))
    problems.append(_longer(policy, found, "segment.ms", policy.segment_ms,
                            "Kafka removes whole segments only: a longer segment keeps its records longer",
                            "OM_LIFECYCLE_SEGMENT_S"))
    if found.get("message.timestamp.type") != "LogAppendTime":  # with the broker's own time, no skew to bound
        problems.append(_longer(policy, found, "message.timestamp.after.max.ms", policy.max_timestamp_skew_ms,
                                "a record stamped further in the future keeps its segment past the window",
                                "OM_LIFECYCLE_MAX_TIMESTAMP_SKEW_S"))
    problems.append(_longer(policy, found, "file.delete.delay.ms", FILE_DELETE_DELAY_MS,
                            "a deleted segment's files would stay on disk longer"))
    return [problem for problem in problems if problem is not None]


def _tombstone_retention(policy: TopicPolicy, value: str | None, promised: int) -> Breach | None:
    try:
        number = int(value) if value is not None else None
    except ValueError:
        number = None
    if number == promised:
        return None
    if number is not None and 0 <= number < promised:
        why = ("a consumer offline longer than this never sees an erase's tombstone and keeps the erased record "
               "(a worker's local table state is wiped at start only past the promised value)")
    else:
        why = "the tombstone, which holds the erased thread's id, would stay past the promised window"
    return Breach(policy.topic, "delete.retention.ms", value,
                  f"exactly {promised} ({human_duration(promised)}, OM_LIFECYCLE_TOMBSTONE_RETENTION_S)", why,
                  str(promised))


async def check_topics(admin: AIOKafkaAdminClient, policies: Sequence[TopicPolicy], *,
                       repair: bool) -> list[Breach]:
    """Every breach of ``policies`` by the topics as they are on the brokers; with ``repair``, the repairable ones
    are altered first (and logged), and what is left is returned. A topic whose configuration cannot be read is a
    breach too: nothing can be promised about it."""
    by_topic = {policy.topic: policy for policy in policies}
    described = await _described_once_known(admin, list(by_topic))
    found = {topic: _breaches_of(by_topic[topic], entry) for topic, entry in described.items()}
    if not repair or not any(problem.repair is not None for problems in found.values() for problem in problems):
        return [problem for problems in found.values() for problem in problems]
    altered = [topic for topic, problems in found.items() if any(problem.repair is not None for problem in problems)
               and await _repair(admin, topic, described[topic], problems)]
    # the brokers apply an alteration through the controller: the one answering may show the old value a moment
    deadline = time.monotonic() + REPAIR_VISIBLE_WITHIN_S
    while True:
        described = await _describe(admin, list(by_topic))
        left = [problem for topic, entry in described.items() for problem in _breaches_of(by_topic[topic], entry)]
        if not any(problem.topic in altered for problem in left) or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.2)


async def _described_once_known(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, _Described]:
    """``_describe``, asked again for up to ``UNKNOWN_WITHIN_S`` while a broker answers that it does not know a
    topic yet: in a cluster, the broker answering may not have the metadata of a topic created a moment ago
    (measured on three brokers: every topic just created answered UnknownTopicOrPartitionError once)."""
    deadline = time.monotonic() + UNKNOWN_WITHIN_S
    while True:
        described = await _describe(admin, topics)
        unknown = [t for t, entry in described.items() if entry.error == "UnknownTopicOrPartitionError"]
        if not unknown or time.monotonic() > deadline:
            return described
        await asyncio.sleep(0.5)


@dataclass(frozen=True)
class _Described:
    values: dict[str, str]
    # the topic's own overrides (a value None: sensitive, the brokers hide it); None: they cannot be told apart
    overrides: dict[str, str | None] | None
    error: str | None = None


def _breaches_of(policy: TopicPolicy, described: _Described) -> list[Breach]:
    if described.error is not None:
        return [Breach(policy.topic, "(configuration)", None, "a readable configuration",
                       f"the brokers answered {described.error} (the worker needs DescribeConfigs on its topics, "
                       "and AlterConfigs to repair them)", None)]
    return breaches(policy, described.values)


async def _describe(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, _Described]:
    responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic) for topic in topics])
    described: dict[str, _Described] = {}
    for response in responses:
        for error_code, _message, _type, name, entries in response.resources:
            if error_code:
                described[name] = _Described({}, {}, for_code(error_code).__name__)
                continue
            values: dict[str, str] = {}
            overrides: dict[str, str | None] = {}
            for entry in entries:  # (name, value, read_only, config_source, is_sensitive, synonyms): v1 and later
                key, value, source, sensitive = entry[0], entry[1], entry[3], entry[4]
                if value is not None:
                    values[key] = value
                if source == _DYNAMIC_TOPIC_CONFIG:
                    overrides[key] = None if sensitive else value
            # version 0 says only whether a value is a default, not whether the topic itself sets it
            described[name] = _Described(values, overrides if response.API_VERSION >= 1 else None)
    return {topic: described.get(topic, _Described({}, {}, "no answer")) for topic in topics}


async def _repair(admin: AIOKafkaAdminClient, topic: str, described: _Described, problems: list[Breach]) -> bool:
    """Alter ``topic``'s repairable breaches, keeping its other overrides; whether the brokers accepted it. Logged,
    never raised: what is left is found by the next describe."""
    if described.overrides is None or any(value is None for value in described.overrides.values()):
        log.error("topic %s has overrides the brokers do not reveal (a sensitive value, or an old protocol "
                  "version), so it cannot be altered without losing them; alter it yourself", topic)
        return False
    changes = {problem.key: problem.repair for problem in problems if problem.repair is not None}
    configs: dict[str, Any] = {**described.overrides, **changes}
    responses = await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    for response in responses:
        for error_code, message, *_ in response.resources:
            if error_code:
                log.error("topic %s could not be altered: %s %s", topic, for_code(error_code).__name__, message or "")
                return False
    for problem in problems:
        if problem.repair is not None:
            log.warning("topic %s: %s altered from %s to %s (OM_LIFECYCLE_REPAIR_TOPICS)", topic, problem.key,
                        problem.found, problem.repair)
    return True
