"""The one settings object of the om-stream process: frozen, read from ``OM_*`` environment variables.

Groups map to the first word after the prefix: ``OM_KAFKA_BOOTSTRAP`` → ``settings.kafka.bootstrap``,
``OM_CASSANDRA_HOSTS`` → ``settings.cassandra.hosts``, ``OM_MEMORY_STORE`` → ``settings.memory.store``,
``OM_GATEWAY_BUDGET_OVERRIDES='{"tenant-a": 100000}'`` → ``settings.gateway.budget_overrides`` (JSON for tables).
Settings are translated once into Faust / driver arguments by the runtime and adapters; nothing else reads the
environment. ``OM_*`` variables that are not settings are ignored: Kubernetes service links (a Service ``om-worker``
gives ``OM_WORKER_PORT=tcp://...``) silently, anything else is named by ``unknown_settings`` for a warning.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

if TYPE_CHECKING:
    from om_stream.ports import Usage

__all__ = ["CassandraSettings", "EmbeddingSettings", "GatewaySettings", "KafkaSettings", "LifecycleSettings",
           "MemorySettings", "ModelPrice", "QdrantSettings", "Settings", "TracingSettings", "WorkerRole",
           "WorkerSettings",
           "is_service_link", "load_om_options", "setting_names", "unknown_settings"]


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
    topic_context_index: str = Field("om.context.index", description="Output (compacted; OM_CONTEXT_WIRE=v2): each "
                                                                     "thread's system blocks by digest")
    topic_context_blocks: str = Field("om.context.blocks", description="Output (compacted; OM_CONTEXT_WIRE=v2): "
                                                                       "each system block once, keyed "
                                                                       "<thread id>/<digest>")
    topic_dlq: str = Field("om.dlq", description="Output: records that could not be processed, with the reason")
    topic_recall_requests: str = Field("om.recall.requests", description="Input: recall tool requests")
    topic_recall_responses: str = Field("om.recall.responses", description="Output: recall tool responses")
    max_message_bytes: int = Field(1_048_576, ge=1024, description="Larger input records go to the DLQ")
    changelog_segment_mb: int = Field(16, ge=1, description="segment.bytes of the state tables' changelogs (MiB), "
                                                            "set when the worker creates them: Kafka compacts "
                                                            "closed segments only, so a worker taking a partition "
                                                            "over reads what the cleaner left (the live state, up "
                                                            "to about twice over) plus at most this much of newer "
                                                            "writes, rather than every write since the segment "
                                                            "opened (up to OM_LIFECYCLE_SEGMENT_S, a day). An "
                                                            "existing changelog keeps its own")
    producer_linger_ms: int = Field(5, ge=0, description="Producer linger (Faust's default 0 costs ~30 %)")
    session_timeout_s: float = Field(30.0, gt=0, description="Consumer group session timeout")
    group_instance_id: str | None = Field(None, description="Static group membership (group.instance.id, unique "
                                                         "per worker, e.g. the pod name): a restart within "
                                                         "session_timeout_s keeps its partitions without a "
                                                         "rebalance; a stopped worker's partitions wait for "
                                                         "the session timeout")
    security_protocol: str = Field("PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    sasl_mechanism: str | None = Field(None, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    sasl_username: str | None = Field(None, description="SASL user")
    sasl_password: SecretStr | None = Field(None, description="SASL password")
    ssl_cafile: str | None = Field(None, description="CA bundle for SSL")


_DAY_S = 86_400


class LifecycleSettings(_Group):
    """How long om-stream's topics keep what they hold (``OM_LIFECYCLE_*``), so that an erased thread's data is gone
    from the brokers within a stated window: each topic's configuration, the windows it gives
    (``om_stream.retention``) and what the worker checks at start are in docs/lifecycle.md."""

    erased_within_days: int = Field(30, ge=1, description="The promise: whatever om-stream's topics hold about an "
                                                          "erased thread is gone from the brokers within this many "
                                                          "days; the worker refuses settings whose windows exceed it")
    messages_retention_s: int = Field(7 * _DAY_S, ge=1, description="retention.ms of the messages topic (raw chat "
                                                                    "messages)")
    commands_retention_s: int = Field(7 * _DAY_S, ge=1, description="retention.ms of the commands topic")
    records_retention_s: int = Field(7 * _DAY_S, ge=1, description="retention.ms of the records topic (resource "
                                                                   "scope: raw inputs re-keyed by resource)")
    model_requests_retention_s: int = Field(_DAY_S, ge=1, description="retention.ms of the model requests topic")
    model_results_retention_s: int = Field(_DAY_S, ge=1, description="retention.ms of the model results topic "
                                                                     "(observations written by the Observer)")
    events_retention_s: int = Field(7 * _DAY_S, ge=1, description="retention.ms of the events topic")
    dlq_retention_s: int = Field(14 * _DAY_S, ge=1, description="retention.ms of the dead-letter topic (whole "
                                                                "records that could not be processed)")
    recall_requests_retention_s: int = Field(_DAY_S, ge=1, description="retention.ms of the recall requests topic")
    recall_responses_retention_s: int = Field(_DAY_S, ge=1, description="retention.ms of the recall responses "
                                                                        "topic")
    segment_s: int = Field(_DAY_S, ge=1, description="segment.ms of every om-stream topic: Kafka deletes and "
                                                     "compacts whole segments only, so a record can outlive its "
                                                     "topic's retention by this much")
    max_compaction_lag_s: int = Field(_DAY_S, ge=1, description="max.compaction.lag.ms of the compacted topics (the "
                                                                "context topic and the state table's changelog): "
                                                                "how long a record superseded by a tombstone may "
                                                                "wait for the log cleaner")
    tombstone_retention_s: int = Field(7 * _DAY_S, ge=1, description="delete.retention.ms of the compacted topics: "
                                                                     "how long a tombstone stays readable for a "
                                                                     "consumer that was offline; a worker's local "
                                                                     "table state older than this is wiped at start")
    max_timestamp_skew_s: int = Field(3600, ge=1, description="message.timestamp.after.max.ms of every om-stream "
                                                              "topic: a record stamped further ahead of the "
                                                              "broker's clock is refused (a future timestamp would "
                                                              "keep its segment past the retention)")
    repair_topics: bool = Field(False, description="At start, alter an existing topic whose configuration breaks "
                                                   "these settings to match them, instead of refusing to start")
    retention_days: int | None = Field(None, ge=1, le=36_500,
                                       description="Retention window of the stored memory: messages created, and "
                                                   "observation entries dated, more than this many days ago are left "
                                                   "out of every context, recall result and event at once, then "
                                                   "purged from every store and the recall index (receipt: "
                                                   "data-om-expired); a record may shorten it with an override. "
                                                   "Unset: keep forever")
    purge_gap_s: float = Field(3600.0, gt=0, le=86_400,
                               description="A record's retention purges run at least this far apart: what expires "
                                           "meanwhile stays in the stores (never shown: reads leave it out) until "
                                           "the next one")


WorkerRole = Literal["all", "memory", "models", "recall"]


class WorkerSettings(_Group):
    app_id: str = Field("om-stream", description="Consumer group and table namespace of the worker")
    role: WorkerRole = Field("all", description="What this process runs: all (every agent, one consumer group), "
                                                "memory (the state table, its agents and timers), models "
                                                "(Observer/Reflector calls and recall indexing; group "
                                                "<app_id>-models) or recall (the recall tool's topics; group "
                                                "<app_id>-recall). A split deployment runs memory + models "
                                                "(+ recall), never all beside them")
    web_host: str = Field("127.0.0.1", description="Interface the HTTP API listens on (never 0.0.0.0 by default)")
    web_port: int = Field(6066, ge=0, le=65535, description="Port of the HTTP API (/v1/* only)")
    api_token: SecretStr | None = Field(None, description="Bearer token every /v1/* request must carry "
                                                          "(Authorization: Bearer <token>); without it the worker "
                                                          "refuses a web_host that is not loopback")
    allow_unauthenticated: bool = Field(False, description="Serve /v1/* without a token on a web_host that is "
                                                           "not loopback (a network you trust entirely)")
    metrics_host: str = Field("127.0.0.1", description="Interface of /metrics and the probes (/healthz, /readyz, "
                                                       "/livez; no token)")
    metrics_port: int = Field(6067, ge=0, le=65535, description="Port of /metrics and the probes")
    model_concurrency: int = Field(8, ge=1, description="Observer/Reflector calls running at once per worker")
    recall_concurrency: int = Field(16, ge=1, description="Recall tool calls answered at once per worker")
    batch_max: int = Field(1024, ge=1, description="Most inputs processed per batch by the memory agent: under load a "
                                                   "thread's messages in one batch share one context and one state "
                                                   "write")
    batch_within_s: float = Field(0.02, gt=0, description="Longest wait to fill a batch (larger batches amortise "
                                                          "Faust's per-batch cost; adds at most this much latency)")
    table_store: str = Field("memory://", description="Faust table store (memory:// or rocksdb://)")
    data_dir: str = Field(".", description="Where the worker keeps its local state (Faust's data dir, "
                                           "<data_dir>/<app_id>-data: table stores, recovery offsets); a volume "
                                           "in production. Created with its parents at start-up when missing")
    table_standby_replicas: int = Field(1, ge=0, description="Standby copies of the state table")
    timer_interval_s: float = Field(1.0, gt=0, description="How often due timers (idle, retries) are checked")
    commit_interval_s: float = Field(1.0, gt=0, description="How often the offsets of handled inputs are committed "
                                                            "(after every output they caused is acknowledged)")
    stall_timeout_s: float = Field(120.0, gt=0, description="A partition with records waiting and no progress for "
                                                            "this long fails /livez (the liveness probe)")
    store_outage_budget_s: float = Field(600.0, gt=0, description="While the content store is down (the worker "
                                                                  "retries and its inputs wait), stalled partitions "
                                                                  "keep /livez healthy for this long from the "
                                                                  "outage's start; past it /livez fails so that the "
                                                                  "worker is restarted")
    shutdown_timeout_s: float = Field(30.0, gt=0, description="Longest graceful shutdown (SIGTERM, or an agent "
                                                              "crash); past it the process exits at once")
    drain_timeout_s: float = Field(45.0, ge=0, description="On SIGTERM, how long in-flight model and recall calls "
                                                           "may finish (no new input is taken); the rest are handed "
                                                           "back to the next owner, and the stop then has "
                                                           "shutdown_timeout_s more")
    content_cache_mb: int = Field(256, ge=1, description="In-process cache of message and observation texts")
    cycle_timeout_s: float = Field(180.0, gt=0, description="A background model call without result is asked "
                                                            "again after this long")
    blocking_timeout_s: float = Field(60.0, gt=0, description="Longest wait for a blocking (past blockAfter) "
                                                              "model call before the offline model takes over")

    @field_validator("api_token")
    @classmethod
    def _usable_token(cls, token: SecretStr | None) -> SecretStr | None:
        # after validation, so that an error shows the SecretStr's mask, never the value
        if token is None or not token.get_secret_value().strip():
            return None  # an empty Secret is no token
        value = token.get_secret_value().strip()  # a token file's trailing newline is not part of it
        if not all("!" <= c <= "~" for c in value):
            raise ValueError("the API token must be printable ASCII without spaces: it travels in an HTTP header")
        return SecretStr(value)

    @model_validator(mode="after")
    def _two_listeners(self) -> WorkerSettings:
        if self.web_port and self.web_port == self.metrics_port:
            raise ValueError(f"web_port and metrics_port are both {self.web_port}: the API and the metrics/probes "
                             f"listener need a port each")
        return self


class MemorySettings(_Group):
    config_file: str | None = Field(None, description="YAML/JSON file with the observationalMemory options")
    options: str | None = Field(None, description="The observationalMemory options inline, as JSON")
    store: str = Field("cassandra", description="Content store: cassandra, sqlite or memory")
    sqlite_path: str = Field("om-stream.db", description="SQLite file when store=sqlite")
    model: str | None = Field(None, description="Overrides the configured Observer/Reflector model "
                                                "('offline' for the deterministic offline model)")
    api_base: str | None = Field(None, description="API base URL for the models (else the provider's env var)")
    api_key: SecretStr | None = Field(None, description="API key for the models (else the provider's env var)")


Consistency = Literal["ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE"]


class CassandraSettings(_Group):
    hosts: str = Field("127.0.0.1:9042", description="Cassandra contact points, comma separated host[:port]")
    keyspace: str = Field("om_stream", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,47}$",
                          description="Keyspace holding om-stream's tables")
    local_datacenter: str | None = Field(None, description="Data center the driver prefers (LOCAL_* consistency "
                                                           "levels count replicas there); unset: the first seen")
    replication_strategy: Literal["SimpleStrategy", "NetworkTopologyStrategy"] = Field(
        "SimpleStrategy", description="Replication of the keyspace `om-stream migrate` creates")
    replication_factor: int = Field(1, ge=1, description="Replicas per row with SimpleStrategy (3 in production)")
    datacenter_replication: str = Field("", description="NetworkTopologyStrategy replicas per data center, "
                                                        "e.g. 'dc1:3,dc2:3'")
    read_consistency: Consistency = Field("LOCAL_QUORUM", description="Consistency level of reads")
    write_consistency: Consistency = Field("LOCAL_QUORUM", description="Consistency level of writes")
    serial_consistency: Literal["SERIAL", "LOCAL_SERIAL"] = Field(
        "LOCAL_SERIAL", description="Consistency of the lightweight transactions (generation commits, "
                                    "model-call leases)")
    ttl_seconds: int = Field(0, ge=0, description="Expire stored messages, observations and thread data after "
                                                  "this many seconds (0: keep forever)")
    cycle_result_ttl_s: int = Field(7 * 24 * 3600, ge=1, le=630_720_000,
                                    description="Keep each model-call result this many seconds, so a request "
                                                "asked again (after a crash or a rebalance) reuses it instead of "
                                                "calling the model twice")
    username: str | None = Field(None, description="User for password authentication")
    password: SecretStr | None = Field(None, description="Password for password authentication")
    tls: bool = Field(False, description="Connect with TLS")
    tls_ca_file: str | None = Field(None, description="CA bundle that signs the nodes' certificates")
    tls_cert_file: str | None = Field(None, description="Client certificate (mutual TLS)")
    tls_key_file: str | None = Field(None, description="Client certificate's private key (mutual TLS)")
    tls_check_hostname: bool = Field(True, description="Verify that a node's certificate names it")
    connect_timeout_s: float = Field(10.0, gt=0, description="Timeout of one connection attempt")
    request_timeout_s: float = Field(10.0, gt=0, description="Timeout of one query attempt")
    retry_deadline_s: float = Field(60.0, gt=0, description="A store operation retries timeouts and unavailable "
                                                            "nodes (with backoff) for at most this long")
    retry_base_delay_s: float = Field(0.1, gt=0, description="First retry delay (doubles up to the maximum)")
    retry_max_delay_s: float = Field(5.0, gt=0, description="Longest delay between two retries")
    reconnect_max_delay_s: float = Field(5.0, gt=0, description="Longest wait before reconnecting to a node "
                                                                "that went down")
    max_concurrent_requests: int = Field(256, ge=1, description="Queries in flight at once per store")
    message_cache_size: int = Field(20_000, ge=0, description="Message bodies cached in process (0: none)")

    def contact_points(self) -> list[tuple[str, int]]:
        """``hosts`` as (host, port) pairs; the port defaults to 9042."""
        points = []
        for item in self.hosts.split(","):
            host, sep, port = item.strip().partition(":")
            points.append((host, int(port) if sep else 9042))
        return points


class QdrantSettings(_Group):
    url: str | None = Field(None, description="Qdrant server URL for the recall index; unset: local mode")
    api_key: SecretStr | None = Field(None, description="Qdrant API key")
    path: str = Field(":memory:", description="Local-mode index folder (or :memory:) when no url is set")
    collection_prefix: str = Field("om_recall", description="Collections are <prefix>_<embedding model>_<dim>")
    timeout_s: int = Field(10, ge=1, description="Timeout of one Qdrant request")


class EmbeddingSettings(_Group):
    kind: Literal["offline", "litellm"] = Field("offline", description="Embedder of the recall index: the bundled "
                                                                       "all-MiniLM-L6-v2 (ONNX, no network) or any "
                                                                       "litellm embedding model")
    model: str | None = Field(None, description="litellm embedding model, e.g. openai/text-embedding-3-small")
    dimension: int | None = Field(None, ge=1, description="Size of the litellm model's vectors")
    api_base: str | None = Field(None, description="API base URL of the embedding model")
    api_key: SecretStr | None = Field(None, description="API key of the embedding model (else the provider's "
                                                        "env var)")
    batch_size: int | None = Field(None, ge=1, description="Texts per embedding call (default 32 offline, 128 "
                                                           "litellm)")


class ModelPrice(_Group):
    """USD per million tokens. Cached input defaults to the input price; reasoning tokens are output tokens."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    cached_input_per_million: float | None = Field(None, ge=0)

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        cached_rate = self.input_per_million if self.cached_input_per_million is None \
            else self.cached_input_per_million
        return ((usage.input_tokens - cached) * self.input_per_million + cached * cached_rate
                + usage.output_tokens * self.output_per_million) / 1_000_000


class GatewaySettings(_Group):
    """How the model gateway reaches models and how hard it tries (``OM_GATEWAY_*``). Per-model tables
    (``api_bases``, ``api_keys``, ``prices``, given as JSON objects) are keyed by model name (``openai/gpt-5-mini``)
    or provider (``openai``); the model wins."""

    api_bases: dict[str, str] = Field(default_factory=dict,
                                      description="API base URL by model, provider or '*' (JSON object)")
    api_keys: dict[str, SecretStr] = Field(default_factory=dict,
                                           description="API key by model, provider or '*' (JSON object)")
    timeout_s: float = Field(60.0, gt=0, description="Longest single model call")
    deadline_s: float = Field(120.0, gt=0, description="Longest gateway call: every retry, fallback and wait")
    max_retries: int = Field(2, ge=0, le=10, description="Retries of a single-model spec (fallback entries carry "
                                                          "their own maxRetries)")
    backoff_initial_s: float = Field(1.0, ge=0, description="First retry delay; doubles each retry")
    backoff_max_s: float = Field(30.0, ge=0, description="Longest retry delay")
    backoff_jitter: float = Field(0.2, ge=0, le=1, description="± fraction of random jitter on retry delays")
    retry_after_max_s: float = Field(30.0, ge=0, description="Longest Retry-After honoured")
    breaker_failures: int = Field(5, ge=1, description="Consecutive transient failures that open a model's circuit")
    breaker_cooldown_s: float = Field(30.0, ge=0, description="Open-circuit time before a half-open probe")
    max_concurrency: int = Field(8, ge=1, description="Calls in flight per model")
    budget_tokens: int | None = Field(None, ge=0, description="Token budget per resource per window (None: none)")
    budget_window_s: float = Field(3600.0, gt=0, description="Sliding window of the token budget")
    budget_overrides: dict[str, int] = Field(
        default_factory=dict, description="Token budget of given resources (JSON object: resource id -> tokens)")
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="USD prices by model (private deployments), winning over litellm's map "
                                          "(JSON object: model -> {input_per_million, output_per_million, "
                                          "cached_input_per_million})")


class TracingSettings(_Group):
    """What om-stream's traces may say (``OM_TRACING_*``). Whether it traces at all, where spans go and how many are
    sampled are the standard ``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_TRACES_SAMPLER``, ...),
    read by the OpenTelemetry SDK: tracing is off unless an endpoint is set (docs/operate.md, "Tracing"). The embedded
    ``Memory`` takes the same rules in code, on the application's provider: ``Tracing.from_provider(provider,
    TracingSettings(content=True))``."""

    content: bool = Field(False, description="Put conversation content into spans: a message's text on its "
                                             "ingest span, the Observer's observations on its cycle's span, a "
                                             "recall query on its search span. Off: no span carries any")
    ids: Literal["omit", "hashed"] = Field("omit", description="Thread and resource ids in spans: omit (as in the "
                                                               "metrics: no span names a thread or a resource) or "
                                                               "hashed (om.thread.hash, om.resource.hash: a keyed "
                                                               "digest that finds one conversation's traces "
                                                               "without naming it)")
    id_key: SecretStr | None = Field(None, description="Key of the hashed ids (HMAC-SHA256); without it ids are "
                                                       "hashed unkeyed, and a guessable id can be found from its "
                                                       "hash")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OM_", env_nested_delimiter="_", env_nested_max_split=1,
                                      frozen=True, extra="ignore")

    kafka: KafkaSettings = KafkaSettings()
    cassandra: CassandraSettings = CassandraSettings()
    qdrant: QdrantSettings = QdrantSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    worker: WorkerSettings = WorkerSettings()
    memory: MemorySettings = MemorySettings()
    gateway: GatewaySettings = GatewaySettings()
    lifecycle: LifecycleSettings = LifecycleSettings()
    tracing: TracingSettings = TracingSettings()
    log_level: str = Field("info", description="Log level of the om-stream process")
    context_wire: Literal["v1", "v2"] = Field("v1", description="What the context topic carries: v1, each context "
                                                               "whole (om.context/v1); v2, contexts by reference "
                                                               "(om.context/v2 cursors, with the block index and "
                                                               "the blocks on their own topics). Upgrade the "
                                                               "clients before switching to v2")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _OwnedEnvironment(settings_cls), dotenv_settings, file_secret_settings


class _OwnedEnvironment(EnvSettingsSource):
    """The environment with only the ``OM_*`` variables that are settings: Kubernetes puts service links of every
    Service in the namespace into the environment (a Service ``om-worker`` gives ``OM_WORKER_PORT``, ...), and a
    variable the settings do not own must not stop the process (``unknown_settings`` names them for a warning)."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        owned = setting_names()
        self.env_vars = {name: value for name, value in self.env_vars.items()
                         if not name.upper().startswith("OM_")
                         or (name.upper() in owned and not is_service_link(name, value or ""))}


_PROTOCOL = r"(?:TCP|UDP|SCTP)"
# the variables kubelet derives from a Service named s (envvars.FromServices): S_SERVICE_HOST, S_SERVICE_PORT,
# S_SERVICE_PORT_<PORT NAME>, S_PORT, S_PORT_<n>_<PROTO>, S_PORT_<n>_<PROTO>_{PROTO,PORT,ADDR}
_LINK = re.compile(rf"^[A-Z0-9_]+?_(?:(?P<host>SERVICE_HOST)|(?P<port>SERVICE_PORT(?:_[A-Z0-9_]+)?)"
                   rf"|(?P<url>PORT(?:_\d+_{_PROTOCOL})?)|PORT_\d+_{_PROTOCOL}_(?:(?P<proto>PROTO)|(?P<number>PORT)"
                   rf"|(?P<addr>ADDR)))$")
_LINK_URL = re.compile(r"^(?:tcp|udp|sctp)://\S+:\d{1,5}$")


def is_service_link(name: str, value: str) -> bool:
    """Whether ``name=value`` has the shape of a variable Kubernetes derives from a Service (name and value)."""
    match = _LINK.match(name.upper())
    if match is None:
        return False
    if match["host"] or match["addr"]:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return False
        return True
    if match["port"] or match["number"]:
        return value.isdigit()
    if match["proto"]:
        return value in ("tcp", "udp", "sctp")
    return _LINK_URL.match(value) is not None


def setting_names() -> frozenset[str]:
    """Every ``OM_*`` variable ``Settings`` reads (a group's name too: a whole group may come as one JSON object)."""
    names = set()
    for group, field in Settings.model_fields.items():
        names.add(f"OM_{group}".upper())
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names.update(f"OM_{group}_{name}".upper() for name in annotation.model_fields)
    return frozenset(names)


def unknown_settings(environ: Mapping[str, str]) -> dict[str, str | None]:
    """``OM_*`` variables that are neither settings nor service links (typos, most likely), each with the setting
    it most resembles (or None). Names only: a value may be a secret."""
    owned = setting_names()
    unknown = sorted(name for name, value in environ.items() if name.upper().startswith("OM_")
                     and name.upper() not in owned and not is_service_link(name, value))
    return {name: next(iter(difflib.get_close_matches(name.upper(), owned, n=1, cutoff=0.8)), None)
            for name in unknown}


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
