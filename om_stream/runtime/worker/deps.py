"""Everything a worker needs, built once from ``Settings``: options, token counting, store, models, metrics."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from om_stream.adapters.offline_model import OfflineModel
from om_stream.adapters.tiktoken_counter import TiktokenCounter
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.errors import ConfigError
from om_stream.observability.metrics import Metrics
from om_stream.observability.model_metrics import MeteredModel, ModelCallMetrics
from om_stream.observability.model_spans import ModelCallSpans, each
from om_stream.observability.store_outages import StoreOutageWatch
from om_stream.observability.tracing import Tracing
from om_stream.ports import ChatModel, ContentStore, CycleResults, RecallStore
from om_stream.runtime.clock import SystemClock
from om_stream.runtime.export_cut import ExportRetention
from om_stream.runtime.recall_retention import RecallRetention
from om_stream.runtime.recall_service import RecallService
from om_stream.settings import KafkaSettings, Settings, load_om_options

__all__ = ["WorkerDeps", "build_deps", "build_recall", "engine_limits", "export_retention", "kafka_client_options"]


@dataclass
class WorkerDeps:
    settings: Settings
    config: ResolvedConfig
    counter: TiktokenCounter
    accountant: TokenAccountant
    store: ContentStore
    results: CycleResults  # model results by request (the content store keeps them)
    model: ChatModel  # every call reported to ``metrics``
    offline: ChatModel  # the offline fallback, metered too
    metrics: Metrics
    outages: StoreOutageWatch  # what the content store says of its outages (the log, a gauge, liveness)
    recall: RecallService | None = None  # None: the content store cannot be browsed (memory store)
    tracing: Tracing = field(default_factory=Tracing.off)  # on when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set


def engine_limits(settings: Settings) -> EngineLimits:
    """The engine's bounds in a worker deployment (its memory agents decide with them; an export's purge too)."""
    worker = settings.worker
    return EngineLimits(cycle_timeout_ms=int(worker.cycle_timeout_s * 1000),
                        blocking_timeout_ms=int(worker.blocking_timeout_s * 1000),
                        purge_gap_ms=int(settings.lifecycle.purge_gap_s * 1000))


def export_retention(deps: WorkerDeps) -> ExportRetention:
    """The windows an export of the deployment is cut at, on the real clock (``runtime.export_cut``)."""
    return ExportRetention(deps.store, deps.config, deps.accountant, SystemClock().now_ms, engine_limits(deps.settings))


def kafka_client_options(kafka: KafkaSettings) -> dict[str, Any]:
    """Security options for aiokafka clients (admin, producers, consumers outside Faust)."""
    from om_stream.runtime.worker.kafka_security import client_options

    return client_options(kafka)


class _Store(ContentStore, CycleResults, Protocol):
    """What a worker needs of its store: contents, and model results by request."""


def _store(settings: Settings, outages: StoreOutageWatch, tracing: Tracing) -> _Store:
    kind = settings.memory.store
    if kind == "memory":
        from om_stream.adapters.memory_store import InMemoryContentStore

        return InMemoryContentStore()
    if kind == "sqlite":
        from om_stream.adapters.sqlite_store import SqliteContentStore

        return SqliteContentStore(settings.memory.sqlite_path)
    if kind == "cassandra":
        from om_stream.adapters.cassandra_store import CassandraContentStore

        return CassandraContentStore(settings.cassandra, outages=outages, tracer=tracing.tracer)
    raise ConfigError("OM_MEMORY_STORE", f"unknown content store {kind!r}; use cassandra, sqlite or memory")


def _models(settings: Settings, config: ResolvedConfig, offline: ChatModel,
            metrics: Metrics, tracing: Tracing) -> tuple[ChatModel, ChatModel]:
    """The Observer/Reflector model and the offline fallback, each call of both reported to the metrics: the
    gateway reports its attempts itself (its observer), any other model is wrapped."""
    calls = ModelCallMetrics(metrics)
    spans = ModelCallSpans(tracing)
    metered_offline = MeteredModel(offline, each(calls, spans))
    if settings.memory.model == "offline":
        return metered_offline, metered_offline
    from om_stream.adapters.gateway import build_gateway

    gateway = build_gateway(config, settings.memory, settings=settings.gateway, observers=[calls, spans])
    calls.watch_breakers(gateway)
    return gateway, metered_offline


def build_recall(settings: Settings, config: ResolvedConfig, store: ContentStore,
                 counter: TiktokenCounter) -> RecallService | None:
    """The recall tool over the content store; with ``retrieval.vector`` in the OM options, semantic search too
    (the configured embedder and the Qdrant index: a server with ``OM_QDRANT_URL``, else local mode)."""
    if not isinstance(store, RecallStore):
        return None
    retention = RecallRetention(config.retention_ms, config.scope)
    if config.retrieval is None or not config.retrieval.vector:
        return RecallService(store, counter.count, retention=retention)
    from om_stream.adapters.embedders import build_embedder
    from om_stream.adapters.qdrant_index import QdrantRecallIndex

    embedding, qdrant = settings.embedding, settings.qdrant
    embedder = build_embedder(embedding.kind, embedding.model, dimension=embedding.dimension,
                              api_base=embedding.api_base, api_key=embedding.api_key, batch_size=embedding.batch_size)
    index = QdrantRecallIndex(embedder.model_id, embedder.dimension, url=qdrant.url,
                              api_key=qdrant.api_key.get_secret_value() if qdrant.api_key else None,
                              path=qdrant.path, collection_prefix=qdrant.collection_prefix,
                              timeout_s=qdrant.timeout_s)
    return RecallService(store, counter.count, index=index, embedder=embedder, retention=retention)


def build_deps(settings: Settings) -> WorkerDeps:
    options = OMConfig.parse(load_om_options(settings.memory))
    if settings.memory.model and settings.memory.model != "offline":
        options = options.model_copy(update={"model": settings.memory.model,
                                             "observation": options.observation.model_copy(update={"model": None}),
                                             "reflection": options.reflection.model_copy(update={"model": None})})
    config = options.resolve().with_retention(settings.lifecycle.retention_days)
    counter = TiktokenCounter(config.token_encoding)
    metrics = Metrics.create()
    # the OTEL_* variables are the OpenTelemetry SDK's own (standard across services), not om-stream settings
    tracing = Tracing.from_environment(settings.tracing, os.environ)
    model, offline = _models(settings, config, OfflineModel(counter.count), metrics, tracing)
    outages = StoreOutageWatch(metrics)
    store = _store(settings, outages, tracing)
    return WorkerDeps(settings=settings, config=config, counter=counter, accountant=TokenAccountant(counter.count),
                      store=store, results=store, model=model, offline=offline, metrics=metrics, outages=outages,
                      recall=build_recall(settings, config, store, counter), tracing=tracing)
