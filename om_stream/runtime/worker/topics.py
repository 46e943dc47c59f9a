"""Creating om-stream's topics when they are missing, with explicit partitions and replication.

The Faust app's own topics (the state table's changelog, the leader assignor's topic) are created here too, before
the app starts, and each created topic is awaited until the brokers' metadata shows all its partitions with a
leader. Left to Faust, a changelog created during the app's start can be missing from the metadata its consumer has
just read. The first table write then finds a changelog of 0 partitions against a source topic of 12, and the memory
agent crashes (``PartitionsMismatch``). This was seen on a loaded machine, once in ten first starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from om_stream.client.security import start_checked
from om_stream.settings import KafkaSettings

__all__ = ["ensure_topics", "topic_specs"]

log = logging.getLogger(__name__)
_DAY_MS = 86_400_000


def topic_specs(kafka: KafkaSettings, *, resource_scope: bool) -> dict[str, dict[str, str]]:
    """Topic name -> its configuration. The context topic is compacted: only each thread's latest matters."""
    week = {"retention.ms": str(7 * _DAY_MS)}
    specs = {
        kafka.topic_messages: week,
        kafka.topic_commands: week,
        kafka.topic_model_requests: {"retention.ms": str(_DAY_MS)},
        kafka.topic_model_results: {"retention.ms": str(_DAY_MS)},
        kafka.topic_events: week,
        kafka.topic_context: {"cleanup.policy": "compact"},
        kafka.topic_dlq: {"retention.ms": str(30 * _DAY_MS)},
        kafka.topic_recall_requests: {"retention.ms": str(_DAY_MS)},
        kafka.topic_recall_responses: {"retention.ms": str(_DAY_MS)},
    }
    if resource_scope:
        specs[kafka.topic_records] = week
    return specs


async def ensure_topics(kafka: KafkaSettings, client_options: dict[str, object], *, resource_scope: bool,
                        internal: Mapping[str, tuple[int, dict[str, str]]] | None = None,
                        visible_within_s: float = 30.0) -> list[str]:
    """Create the missing topics, om-stream's and the app's ``internal`` ones (name -> partitions, configuration),
    and wait until the metadata shows every partition of those created; returns the names created. Existing topics
    are left as they are."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **client_options)
    log.info("connecting to Kafka at %s over %s", kafka.bootstrap, client_options.get("security_protocol"))
    # a broker that refuses the credentials or the certificate fails here, at once, with a KafkaConnectError
    await start_checked(admin, kafka.bootstrap, client_options, close=admin.close)
    specs = {name: (kafka.partitions, config)
             for name, config in topic_specs(kafka, resource_scope=resource_scope).items()}
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
    finally:
        await admin.close()
    return created


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
