"""Creating om-stream's topics when they are missing, with explicit partitions, replication and the configuration
the lifecycle settings promise (``om_stream.retention``), and refusing to start when an existing one breaks it.

The Faust app's own topics (the state table's changelog, the leader assignor's topic) are created here too, before
the app starts, and each created topic is awaited until the brokers' metadata shows all its partitions with a
leader. Left to Faust, a changelog created during the app's start can be missing from the metadata its consumer has
just read. The first table write then finds a changelog of 0 partitions against a source topic of 12, and the memory
agent crashes (``PartitionsMismatch``). This was seen on a loaded machine, once in ten first starts.

Before connecting, the settings are checked against their own promise (``erased_within_days``); once the topics
exist, every one of them is checked against its policy (``topic_check``), or repaired with
``OM_LIFECYCLE_REPAIR_TOPICS``. Either failing raises :class:`~om_stream.errors.LifecycleBreach`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from om_stream.client.security import start_checked
from om_stream.errors import ConfigError, LifecycleBreach
from om_stream.retention import longest_window, topic_policies, windows_beyond_promise
from om_stream.runtime.worker.topic_check import Breach, check_topics
from om_stream.settings import KafkaSettings, LifecycleSettings

__all__ = ["ensure_topics"]

log = logging.getLogger(__name__)


async def ensure_topics(kafka: KafkaSettings, lifecycle: LifecycleSettings, client_options: dict[str, object], *,
                        resource_scope: bool, internal: Mapping[str, tuple[int, dict[str, str]]] | None = None,
                        changelogs: Iterable[str] = (), visible_within_s: float = 30.0,
                        copartitioned: Iterable[str] = ()) -> list[str]:
    """Create the missing topics, om-stream's and the app's ``internal`` ones (name -> partitions, configuration),
    wait until the metadata shows every partition of those created, then check every topic that can hold a
    thread's data (``changelogs`` among the internal ones) against the lifecycle settings; returns the names
    created. Raises :class:`LifecycleBreach` when the settings or a topic break the promise, and
    :class:`ConfigError` when a topic of ``copartitioned`` has another partition count than the messages topic
    (contexts by reference publish a thread's records to the partition number of its messages)."""
    policies = topic_policies(kafka, lifecycle, resource_scope=resource_scope, changelogs=changelogs)
    beyond = windows_beyond_promise(policies, lifecycle)
    if beyond:
        raise LifecycleBreach([f"the settings keep the {window.subject} of topic {window.topic} up to {window} "
                               f"after an erase, beyond OM_LIFECYCLE_ERASED_WITHIN_DAYS="
                               f"{lifecycle.erased_within_days}" for window in beyond])
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **client_options)
    log.info("connecting to Kafka at %s over %s", kafka.bootstrap, client_options.get("security_protocol"))
    # a broker that refuses the credentials or the certificate fails here, at once, with a KafkaConnectError
    await start_checked(admin, kafka.bootstrap, client_options, close=admin.close)
    specs = {policy.topic: (kafka.partitions, policy.config()) for policy in policies}
    specs.update(internal or {})
    created: list[str] = []
    try:
        existing = set(await admin.list_topics())
        for name, (partitions, config) in specs.items():
            if name in existing:
                continue
            try:
                await admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                    replication_factor=kafka.replication, topic_configs=config)])
                created.append(name)
            except TopicAlreadyExistsError:
                pass  # another worker created it meanwhile
        if created:
            log.info("created topics %s (replication %d)", created, kafka.replication)
            await _until_visible(admin, {name: specs[name][0] for name in created}, visible_within_s)
        left = await check_topics(admin, policies, repair=lifecycle.repair_topics)
        counts = await _partition_counts(admin, [kafka.topic_messages, *copartitioned])
    finally:
        await admin.close()
    expected = counts.get(kafka.topic_messages)
    others = {name: count for name, count in counts.items() if name != kafka.topic_messages and count != expected}
    if others:
        raise ConfigError("kafka.partitions", "a thread's contexts go to the partition number of its messages, but "
                          + ", ".join(f"topic {name} has {count} partitions" for name, count in sorted(others.items()))
                          + f" and {kafka.topic_messages} has {expected}: recreate them with {expected}")
    if left:
        raise LifecycleBreach([str(breach) for breach in left] + _fixes(left, kafka.bootstrap))
    log.info("every topic keeps the lifecycle promise: what they hold about an erased thread is gone within %s",
             longest_window(policies, lifecycle))
    return created


def _fixes(left: list[Breach], bootstrap: str) -> list[str]:
    """How to repair the topics by hand (or let the worker do it)."""
    by_topic: dict[str, list[str]] = {}
    for breach in left:
        if breach.repair is not None:
            by_topic.setdefault(breach.topic, []).append(f"{breach.key}={breach.repair}")
    fixes = [f"fix it with: kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type topics "
             f"--entity-name {topic} --add-config {','.join(changes)}" for topic, changes in by_topic.items()]
    if by_topic:
        fixes.append("or let the worker alter them at start: OM_LIFECYCLE_REPAIR_TOPICS=true; or change the "
                     "OM_LIFECYCLE_* settings named above (docs/lifecycle.md)")
    return fixes


async def _partition_counts(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
    """Each topic's number of partitions, as the brokers' metadata shows it."""
    counts: dict[str, int] = {}
    for topic in await admin.describe_topics(list(dict.fromkeys(topics))):
        name = topic.get("topic", topic.get("name"))
        if topic.get("error_code", 0) == 0 and name is not None:
            counts[name] = len(topic.get("partitions", ()))
    return counts


async def _until_visible(admin: AIOKafkaAdminClient, partitions: Mapping[str, int], within_s: float) -> None:
    """Until the metadata shows each topic with all its ``partitions``, each with a leader (at most ``within_s``:
    then a warning, and the start goes on)."""
    deadline = time.monotonic() + within_s
    missing = dict(partitions)
    while missing:
        for topic in await admin.describe_topics(list(missing)):
            name = topic.get("topic", topic.get("name"))
            ready = [p for p in topic.get("partitions", ()) if p.get("error_code", 0) == 0 and p.get("leader", -1) >= 0]
            if topic.get("error_code", 0) == 0 and name in missing and len(ready) >= missing[name]:
                del missing[name]
        if not missing:
            return
        if time.monotonic() > deadline:
            log.warning("topics %s are not in the brokers' metadata with all their partitions after %.0fs; "
                        "starting anyway", sorted(missing), within_s)
            return
        await asyncio.sleep(0.2)
