"""The one settings object of the om-stream process: frozen, read from ``OM_*`` environment variables.

Groups map to the first word after the prefix: ``OM_KAFKA_BOOTSTRAP`` → ``settings.kafka.bootstrap``,
``OM_CASSANDRA_HOSTS`` → ``settings.cassandra.hosts``, ``OM_MEMORY_STORE`` → ``settings.memory.store``.
Settings are translated once into Faust / driver arguments by the runtime and adapters; nothing else reads the
environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["CassandraSettings", "KafkaSettings", "MemorySettings", "Settings", "WorkerSettings", "load_om_options"]


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(_Group):
    bootstrap: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, comma separated host:port")
    partitions: int = Field(12, ge=1, description="Partitions of every om-stream topic (co-partitioned; set it for "
                                                  "the future: it cannot change without repartitioning)")
    replication: int = Field(3, ge=1, description="Replication factor of the topics om-stream creates")
    topic_messages: str = Field("om.messages", description="Input: chat messages (key = thread id)")
    topic_commands: str = Field("om.commands", description="Input: manual observe/reflect, overrides, clear")
    topic_model_requests: str = Field("om.model-requests", description="Internal: Observer/Reflector requests")
    topic_model_results: str = Field("om.model-results", description="Internal: model results and timers")
    topic_records: str = Field("om.records", description="Internal (resource scope): inputs re-keyed by resource")
    topic_events: str = Field("om.events", description="Output: data-om-* lifecycle events")
    topic_context: str = Field("om.context", description="Output (compacted): the latest context per thread")
    topic_dlq: str = Field("om.dlq", description="Output: records that could not be processed, with the reason")
    topic_recall_requests: str = Field("om.recall.requests", description="Input: recall tool requests")
    topic_recall_responses: str = Field("om.recall.responses", description="Output: recall tool responses")
    max_message_bytes: int = Field(1_048_576, ge=1024, description="Larger input records go to the DLQ")
    producer_linger_ms: int = Field(5, ge=0, description="Producer linger (Faust's default 0 costs ~30 %)")
    session_timeout_s: float = Field(30.0, gt=0, description="Consumer group session timeout")
    security_protocol: str = Field("PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    sasl_mechanism: str | None = Field(None, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    sasl_username: str | None = Field(None, description="SASL user")
    sasl_password: SecretStr | None = Field(None, description="SASL password")
    ssl_cafile: str | None = Field(None, description="CA bundle for SSL")


class WorkerSettings(_Group):
    app_id: str = Field("om-stream", description="Consumer group and table namespace of the worker")
    web_host: str = Field("127.0.0.1", description="Interface the HTTP API listens on (never 0.0.0.0 by default)")
    web_port: int = Field(6066, ge=0, le=65535, description="Port of the HTTP API")
    model_concurrency: int = Field(8, ge=1, description="Observer/Reflector calls running at once per worker")
    batch_max: int = Field(256, ge=1, description="Inputs processed per batch by the memory agent")
    batch_within_s: float = Field(0.005, gt=0, description="Longest wait to fill a batch")
    table_store: str = Field("memory://", description="Faust table store (memory:// or rocksdb://)")
    table_standby_replicas: int = Field(1, ge=0, description="Standby copies of the state table")
    timer_interval_s: float = Field(1.0, gt=0, description="How often due timers (idle, retries) are checked")
    content_cache_mb: int = Field(256, ge=1, description="In-process cache of message and observation texts")


class MemorySettings(_Group):
    config_file: str | None = Field(None, description="YAML/JSON file with the observationalMemory options")
    options: str | None = Field(None, description="The observationalMemory options inline, as JSON")
    store: str = Field("cassandra", description="Content store: cassandra, sqlite or memory")
    sqlite_path: str = Field("om-stream.db", description="SQLite file when store=sqlite")
    model: str | None = Field(None, description="Overrides the configured Observer/Reflector model "
                                                "('offline' for the deterministic offline model)")
    api_base: str | None = Field(None, description="API base URL for the models (else the provider's env var)")
    api_key: SecretStr | None = Field(None, description="API key for the models (else the provider's env var)")


class CassandraSettings(_Group):
    hosts: str = Field("127.0.0.1:9042", description="Cassandra contact points, comma separated host[:port]")
    keyspace: str = Field("om_stream", description="Keyspace holding om-stream's tables")

    def contact_points(self) -> list[tuple[str, int]]:
        """``hosts`` as (host, port) pairs; the port defaults to 9042."""
        points = []
        for item in self.hosts.split(","):
            host, sep, port = item.strip().partition(":")
            points.append((host, int(port) if sep else 9042))
        return points


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OM_", env_nested_delimiter="_", env_nested_max_split=1,
                                      frozen=True, extra="ignore")

    kafka: KafkaSettings = KafkaSettings()
    cassandra: CassandraSettings = CassandraSettings()
    worker: WorkerSettings = WorkerSettings()
    memory: MemorySettings = MemorySettings()
    log_level: str = Field("info", description="Log level of the om-stream process")


def load_om_options(memory: MemorySettings) -> dict[str, Any]:
    """The observationalMemory options from ``OM_MEMORY_CONFIG_FILE`` (YAML or JSON) and/or ``OM_MEMORY_OPTIONS``
    (inline JSON, applied on top)."""
    options: dict[str, Any] = {}
    if memory.config_file:
        loaded = yaml.safe_load(Path(memory.config_file).read_text()) or {}
        options = dict(loaded.get("observationalMemory") or loaded)
    if memory.options:
        options = {**options, **json.loads(memory.options)}
    return options
