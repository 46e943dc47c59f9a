"""The worker's Faust wiring: the app built from settings, its raw topics, the publisher on its producer, and the
agents as Faust runs them (each reports its own crash).

This module owns how om-stream is expressed in Faust's terms: app options, topics of raw bytes, ``app.agent``
definitions and the topics Faust creates for itself. What an agent does with its records belongs to its own module
(``ingest``, ``model_requests``, ``recall_requests``); what happens when partitions change hands to ``handover``.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import faust
from faust.types import EventT
from mode.utils.times import want_seconds

from om_stream.runtime.worker.faust_internals import Tables, noack_batches, use_returning_consumer
from om_stream.runtime.worker.kafka_records import Publication
from om_stream.runtime.worker.kafka_security import broker_credentials
from om_stream.runtime.worker.liveness import Liveness
from om_stream.runtime.worker.roles import RolePlan
from om_stream.settings import Settings

__all__ = ["RAW", "AgentBody", "FaustPublisher", "changelogs", "crash_reported", "define_ingest_agent",
           "define_memory_agent", "internal_topics", "new_app"]

AgentBody = Callable[[faust.StreamT[bytes]], AsyncIterator[None]]
# every topic carries bytes as they are: the wire codec decodes and validates them (Faust's codecs never run)
RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


def new_app(settings: Settings, plan: RolePlan) -> faust.App:
    """The Faust app of a worker of ``plan``'s role, in its consumer group (``roles``)."""
    kafka, worker = settings.kafka, settings.worker
    app = faust.App(
        plan.group_id,
        broker=[f"kafka://{host}" for host in kafka.bootstrap.split(",")],
        broker_credentials=broker_credentials(kafka),
        store=worker.table_store,
        datadir=str(Path(worker.data_dir) / f"{plan.group_id}-data"),
        topic_partitions=kafka.partitions,
        topic_replication_factor=kafka.replication,
        table_standby_replicas=worker.table_standby_replicas,
        producer_linger=kafka.producer_linger_ms / 1000,
        broker_session_timeout=kafka.session_timeout_s,
        broker_rebalance_timeout=kafka.session_timeout_s,
        broker_heartbeat_interval=max(1.0, kafka.session_timeout_s / 10),
        consumer_group_instance_id=kafka.group_instance_id or None,
        processing_guarantee="at_least_once",
        consumer_auto_offset_reset="earliest",
        stream_buffer_maxsize=max(4096, 4 * worker.batch_max),
        web_enabled=plan.holds_table,  # the /v1/* API reads the table (the probes have their own listener)
        web_bind=worker.web_host,
        web_host=worker.web_host,
        web_port=worker.web_port,
        web_in_thread=False,
        key_serializer="raw",
        value_serializer="raw",
        TableManager=Tables,  # Faust's, minus a crash when a rebalance lands during a recovery (faust_internals)
    )
    use_returning_consumer(app)  # Faust's, minus the records a fetch drained while the flow stopped (faust_internals)
    return app


class FaustPublisher:
    """Publications sent through the app's producer, one raw topic object per topic name."""

    def __init__(self, app: faust.App) -> None:
        self.app = app
        self._topics: dict[str, Any] = {}

    def topic(self, name: str) -> Any:
        channel = self._topics.get(name)
        if channel is None:
            channel = self._topics[name] = self.app.topic(name, **RAW)
        return channel

    async def send(self, publication: Publication) -> Awaitable[object]:
        # queued in the producer now; the returned future resolves on the broker's acknowledgement
        future: Awaitable[object] = await self.topic(publication.topic).send(
            key=publication.key, value=publication.value, headers=publication.headers,
            partition=publication.partition)
        return future

    async def tombstone(self, topic: str, key: bytes, partition: int) -> Awaitable[object]:
        """A record of ``key`` without a value at ``partition``: a tombstone on a compacted topic."""
        future: Awaitable[object] = await self.topic(topic).send(key=key, value=None, partition=partition)
        return future


def crash_reported(liveness: Liveness) -> Callable[[str], Callable[[AgentBody], AgentBody]]:
    """A decorator per agent name: the agent's body reports its own crash to liveness (crash-only: the process then
    stops, instead of Faust restarting the agent in place)."""
    def named(name: str) -> Callable[[AgentBody], AgentBody]:
        def wrap(body: AgentBody) -> AgentBody:
            @functools.wraps(body)
            async def agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
                try:
                    async for item in body(stream):
                        yield item
                except Exception as exc:
                    liveness.agent_crashed(name, exc)
                    raise
            return agent
        return wrap
    return named


def define_memory_agent(app: faust.App, topics: Sequence[str], *, batch_max: int, within_s: float,
                        handle: Callable[[Sequence[EventT[bytes]]], Awaitable[None]],
                        watched: Callable[[str], Callable[[AgentBody], AgentBody]]) -> Any:
    """The table-owning agent: batches of its inputs, without Faust's acknowledgements (the offset ledger commits
    what was handled: ``offsets``), each handed to ``handle``."""
    # no Faust acknowledgements on these topics: the offset ledger commits what was handled (see offsets.py)
    @app.agent(app.topic(*topics, acks=False, **RAW), name="memory", concurrency=1)
    @watched("memory")
    async def memory(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for events in noack_batches(stream, batch_max, within_s):
            await handle(events)
            yield None

    return memory


def define_ingest_agent(app: faust.App, topics: Sequence[str], *,
                        handle: Callable[[EventT[bytes]], Awaitable[None]],
                        watched: Callable[[str], Callable[[AgentBody], AgentBody]]) -> Any:
    """Resource scope: the agent that re-keys the agents' inputs by resource, one event at a time, without Faust's
    acknowledgements (committed like the memory agent's)."""
    @app.agent(app.topic(*topics, acks=False, **RAW), name="ingest", concurrency=1)
    @watched("ingest")
    async def ingest(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for event in stream.events():
            await handle(event)
            yield None

    return ingest


def internal_topics(app: faust.App) -> dict[str, tuple[int, dict[str, str]]]:
    """The app's own topics, name -> (partitions, configuration), as Faust would create them: each table's
    changelog and the leader assignor's topic (``topics.ensure_topics`` creates them first)."""
    conf = app.conf
    found: dict[str, tuple[int, dict[str, str]]] = {}
    for table in app.tables.values():
        topic = table.changelog_topic
        config = {key: str(value) for key, value in (topic.config or {}).items()}
        policy = [flag for flag, on in (("compact", topic.compacting), ("delete", topic.deleting)) if on]
        if policy:
            config["cleanup.policy"] = ",".join(policy)
        if topic.retention:
            config["retention.ms"] = str(int(want_seconds(topic.retention) * 1000))
        found[topic.get_topic_name()] = (int(topic.partitions or conf.topic_partitions), config)
    if not conf.topic_disable_leader:
        found[f"{conf.id}-__assignor-__leader"] = (1, {})
    return found


def changelogs(app: faust.App) -> tuple[str, ...]:
    """The changelog topics of the app's tables (none in the roles that hold no table)."""
    return tuple(table.changelog_topic.get_topic_name() for table in app.tables.values())
