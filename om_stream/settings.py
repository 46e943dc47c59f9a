"""The one settings object of the om-stream process: frozen, read from ``OM_*`` environment variables.

Groups map to the first word after the prefix: ``OM_KAFKA_BOOTSTRAP`` → ``settings.kafka.bootstrap``,
``OM_CASSANDRA_HOSTS`` → ``settings.cassandra.hosts``. Settings are translated once into Faust / driver arguments
by the runtime and adapters; nothing else reads the environment.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["CassandraSettings", "KafkaSettings", "Settings"]


class _Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaSettings(_Group):
    bootstrap: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, comma separated host:port")


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
    log_level: str = Field("info", description="Log level of the om-stream process")
