"""Creating om-stream's topics when they are missing, with explicit partitions and replication."""

from __future__ import annotations

import logging

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


async def ensure_topics(kafka: KafkaSettings, client_options: dict[str, object], *, resource_scope: bool) -> list[str]:
    """Create the missing topics; returns the names created. Existing topics are left as they are."""
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.bootstrap, **client_options)
    log.info("connecting to Kafka at %s over %s", kafka.bootstrap, client_options.get("security_protocol"))
    # a broker that refuses the credentials or the certificate fails here, at once, with a KafkaConnectError
    await start_checked(admin, kafka.bootstrap, client_options, close=admin.close)
    created: list[str] = []
    try:
        existing = set(await admin.list_topics())
        wanted = [NewTopic(name, num_partitions=kafka.partitions, replication_factor=kafka.replication,
                           topic_configs=config)
                  for name, config in topic_specs(kafka, resource_scope=resource_scope).items() if name not in existing]
        for topic in wanted:
            try:
                await admin.create_topics([topic])
                created.append(topic.name)
            except TopicAlreadyExistsError:
                pass  # another worker created it meanwhile
        if created:
            log.info("created topics %s (%d partitions, replication %d)", created, kafka.partitions,
                     kafka.replication)
    finally:
        await admin.close()
    return created
