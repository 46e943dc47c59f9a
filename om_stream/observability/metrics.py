"""Every metric om-stream exports, declared once on an injected registry.

Conventions: base units (seconds), ``_total`` counters, no thread or resource ids as labels. Model-call metrics
use the OpenTelemetry GenAI semantic conventions translated to Prometheus names
(``gen_ai.client.operation.duration`` → ``gen_ai_client_operation_duration_seconds``), plus ``om_role``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["MetricInfo", "Metrics", "describe_metrics"]

_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RECORD_TOKEN_BUCKETS = (100, 500, 1000, 2500, 5000, 10000, 20000, 30000, 40000, 50000, 75000, 100000, 200000)
_ERASURE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
_GENAI = ["gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "om_role"]


@dataclass
class Metrics:
    """The typed metrics object. Create one per process on the registry ``/metrics`` serves."""

    registry: CollectorRegistry
    # -- model calls (gateway) ----------------------------------------------------------------------------------
    model_duration: Histogram
    model_tokens: Histogram
    model_calls: Counter
    model_cost: Counter
    model_cost_unknown: Counter
    model_retries: Counter
    model_circuit_state: Gauge
    model_budget_rejections: Counter
    model_offline_fallbacks: Counter
    model_cached_tokens: Counter
    # -- OM lifecycle ----------------------------------------------------------------------------------------------
    observations: Counter
    reflections: Counter
    activations: Counter
    buffered_chunks: Histogram
    unobserved_tokens: Histogram
    observation_tokens: Histogram
    compression_ratio: Histogram
    buffer_to_activation: Histogram
    message_to_context: Histogram
    generations: Counter
    condensations: Counter
    reflection_backoffs: Counter
    threads_near_block_after: Gauge
    # -- pipeline ----------------------------------------------------------------------------------------------
    messages_in: Counter
    dlq_records: Counter
    contexts_published: Counter
    events_published: Counter
    decide_seconds: Histogram
    consumer_lag: Gauge
    consumer_group_lag: Gauge
    rebalances: Counter
    table_recovery_seconds: Gauge
    store_errors: Counter
    store_unavailable: Gauge
    fenced_batches: Counter
    processing_errors: Counter
    # -- liveness ----------------------------------------------------------------------------------------------
    agent_crashes: Counter
    partition_stalls: Counter
    worker_live: Gauge
    worker_role: Gauge
    model_calls_saved: Counter
    # -- what a worker holds in process (``runtime/worker/inventory``) -------------------------------------------
    asyncio_tasks: Gauge
    table_records: Gauge
    table_bytes: Gauge
    content_cache_bytes: Gauge
    held_entries: Gauge
    # -- recall ------------------------------------------------------------------------------------------------
    recall_requests: Counter
    recall_seconds: Histogram
    recall_indexed_points: Counter
    recall_index_failures: Counter
    # -- data lifecycle --------------------------------------------------------------------------------------------
    erasures: Counter
    erasure_seconds: Histogram
    erasure_fenced_inputs: Counter
    erasure_writes_undone: Counter
    expirations: Counter
    expired_items: Counter
    expired_inputs: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> Metrics:
        reg = registry if registry is not None else CollectorRegistry()
        return cls(
            registry=reg,
            model_duration=Histogram("gen_ai_client_operation_duration_seconds",
                                     "Duration of Observer/Reflector/extractor/embedder model calls",
                                     [*_GENAI, "error_type"], buckets=_DURATION_BUCKETS, registry=reg),
            model_tokens=Histogram("gen_ai_client_token_usage", "Tokens per model call, by token type",
                                   [*_GENAI, "gen_ai_token_type"], buckets=_TOKEN_BUCKETS, registry=reg),
            model_calls=Counter("om_model_calls_total", "Model call attempts by outcome (ok, error)",
                                ["gen_ai_request_model", "om_role", "outcome"], registry=reg),
            model_cost=Counter("om_model_cost_usd_total", "Model spend in US dollars",
                               ["gen_ai_request_model", "om_role"], registry=reg),
            model_cost_unknown=Counter("om_model_cost_unknown_calls_total",
                                       "Model calls whose price is unknown (not counted as zero)",
                                       ["gen_ai_request_model", "om_role"], registry=reg),
            model_retries=Counter("om_model_retries_total", "Model calls retried after a transient error",
                                  ["gen_ai_request_model", "om_role"], registry=reg),
            model_circuit_state=Gauge("om_model_circuit_state", "Circuit breaker: 0 closed, 1 half-open, 2 open",
                                      ["gen_ai_request_model"], registry=reg),
            model_budget_rejections=Counter("om_model_budget_rejections_total",
                                            "Calls refused by a tenant token budget", ["om_role"], registry=reg),
            model_offline_fallbacks=Counter("om_model_offline_fallbacks_total",
                                            "Cycles served by the offline model because every model failed",
                                            ["om_role"], registry=reg),
            # a counter, not a ratio gauge: shares are computed in PromQL over any window and sum across workers
            # (cached share = this / gen_ai_client_token_usage_sum{gen_ai_token_type="input"})
            model_cached_tokens=Counter("om_model_cached_input_tokens",
                                        "Input tokens served from the provider's prompt cache (part of the input "
                                        "tokens of gen_ai_client_token_usage)",
                                        ["gen_ai_request_model", "om_role"], registry=reg),
            observations=Counter("om_observations_total", "Observation cycles by kind and outcome",
                                 ["kind", "outcome"], registry=reg),
            reflections=Counter("om_reflections_total", "Reflection cycles by kind and outcome",
                                ["kind", "outcome"], registry=reg),
            activations=Counter("om_activations_total", "Activations of buffered content",
                                ["operation", "triggered_by"], registry=reg),
            buffered_chunks=Histogram("om_record_buffered_chunks", "Buffered chunks waiting per record, at publish",
                                      buckets=(0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20), registry=reg),
            unobserved_tokens=Histogram("om_record_unobserved_message_tokens",
                                        "Unobserved message tokens per record, at publish",
                                        buckets=_RECORD_TOKEN_BUCKETS, registry=reg),
            observation_tokens=Histogram("om_record_observation_tokens", "Observation log tokens per record",
                                         buckets=_RECORD_TOKEN_BUCKETS, registry=reg),
            compression_ratio=Histogram("om_compression_ratio",
                                        "Message tokens observed per observation token produced",
                                        buckets=(0.5, 1, 2, 3, 5, 8, 13, 20, 40, 80), registry=reg),
            buffer_to_activation=Histogram("om_buffer_to_activation_seconds",
                                           "Time from a chunk being buffered to its activation",
                                           buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 86400),
                                           registry=reg),
            message_to_context=Histogram("om_message_to_context_seconds",
                                         "Time from a message entering the worker to its context being published",
                                         buckets=_LATENCY_BUCKETS, registry=reg),
            generations=Counter("om_generations_total", "Reflection generations committed", registry=reg),
            condensations=Counter("om_condensations_total",
                                  "Observation logs the engine condensed itself to hold their bound, by reason "
                                  "(over_target, unusable, failed: a reflection; context_over_bound: a context)",
                                  ["reason"], registry=reg),
            reflection_backoffs=Counter("om_reflection_backoffs_total",
                                        "Reflections of the configured Reflector that failed or had to be condensed: "
                                        "the next one waits for more log growth each time", registry=reg),
            threads_near_block_after=Gauge("om_threads_near_block_after",
                                           "Records whose unobserved tokens are at 90% of blockAfter or more",
                                           registry=reg),
            messages_in=Counter("om_messages_in_total", "Input records received", ["topic"], registry=reg),
            dlq_records=Counter("om_dlq_records_total", "Records sent to the dead-letter topic", ["reason"],
                                registry=reg),
            contexts_published=Counter("om_contexts_published_total", "Contexts published", registry=reg),
            events_published=Counter("om_events_published_total", "data-om-* events published", ["type"],
                                     registry=reg),
            decide_seconds=Histogram("om_decide_seconds", "Time in the state machine per input",
                                     buckets=(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05),
                                     registry=reg),
            consumer_lag=Gauge("om_consumer_lag_records", "Records not yet consumed, by topic and partition",
                               ["topic", "partition"], registry=reg),
            consumer_group_lag=Gauge("om_consumer_group_lag_records",
                                     "Records of the consumer group not yet committed, by topic and partition, read "
                                     "from the brokers (every worker exports the same values: alert on max())",
                                     ["topic", "partition"], registry=reg),
            rebalances=Counter("om_rebalances_total", "Consumer group rebalances seen by this worker", registry=reg),
            table_recovery_seconds=Gauge("om_table_recovery_seconds", "Duration of the last state table recovery",
                                         registry=reg),
            store_errors=Counter("om_store_errors_total", "Content store operations that failed and were retried",
                                 ["operation"], registry=reg),
            store_unavailable=Gauge("om_store_unavailable",
                                    "1 while the content store has failed the worker's operations for want of the "
                                    "store itself (nodes down, a consistency level out of reach, timeouts) for "
                                    "5 s or more, and they are retried", ["store"], registry=reg),
            fenced_batches=Counter("om_fenced_batches_total",
                                   "Input batches dropped because the group rebalanced while they were handled, or "
                                   "had dropped this worker (they are read again from the committed offsets)",
                                   registry=reg),
            processing_errors=Counter("om_processing_errors_total",
                                      "Inputs or contexts whose handling failed unexpectedly (an input that fails "
                                      "goes to the dead-letter topic as processing_error)", registry=reg),
            agent_crashes=Counter("om_agent_crashes_total", "Worker agents that crashed (the process then exits)",
                                  ["agent"], registry=reg),
            partition_stalls=Counter("om_partition_stalls_total",
                                     "Partitions found with lag and no progress for worker.stall_timeout_s",
                                     registry=reg),
            worker_live=Gauge("om_worker_live", "1 while the worker is live (what /livez answers), 0 once an "
                                                "agent crashed or a partition stalled", registry=reg),
            worker_role=Gauge("om_worker_role", "1, labelled with the role this worker process runs (all, memory, "
                                                "models or recall: OM_WORKER_ROLE)", ["role"], registry=reg),
            model_calls_saved=Counter("om_model_calls_saved_total",
                                      "Model calls not made because the same request's result was stored "
                                      "(stored) or another worker was making it (in_flight)", ["reason"],
                                      registry=reg),
            asyncio_tasks=Gauge("om_asyncio_tasks", "Tasks alive in the worker's event loop", registry=reg),
            table_records=Gauge("om_table_records",
                                "Records in the worker's local copy of the state table, the partitions it holds "
                                "(RocksDB: its estimate, which counts overwritten values until a compaction)",
                                registry=reg),
            table_bytes=Gauge("om_table_bytes",
                              "Bytes of the records in the worker's local copy of the state table, the partitions "
                              "it holds (memory://: their encoded states, counted; RocksDB: its estimate of the live "
                              "data on disk plus its memtables)", registry=reg),
            content_cache_bytes=Gauge("om_content_cache_bytes",
                                      "Estimated memory held by the messages and observation texts of the "
                                      "in-process content cache (bounded by worker.content_cache_mb)", registry=reg),
            held_entries=Gauge("om_held_entries",
                               "Entries of the in-process maps that traffic adds to, by map (decoded_states, "
                               "recent_contexts, content_cache, timers, timer_heap, model_calls, inflight_calls, "
                               "settled_waiters, near_block_after): each is bounded or pruned", ["map"],
                               registry=reg),
            recall_requests=Counter("om_recall_requests_total", "Recall tool calls by transport (http, kafka), "
                                    "mode and outcome (ok, invalid_request, unavailable)",
                                    ["transport", "mode", "outcome"], registry=reg),
            recall_seconds=Histogram("om_recall_seconds", "Time to answer a recall call", ["mode"],
                                     buckets=_LATENCY_BUCKETS, registry=reg),
            recall_indexed_points=Counter("om_recall_indexed_points_total",
                                          "Vectors written to the recall index (observation groups and messages)",
                                          registry=reg),
            recall_index_failures=Counter("om_recall_index_failures_total",
                                          "Observation groups left out of the recall index after every retry "
                                          "failed", registry=reg),
            erasures=Counter("om_erasures_total", "Erasures completed (their receipt published), by scope (thread, "
                             "resource) and whether anything of the subject was held (found: true, false)",
                             ["scope", "found"], registry=reg),
            erasure_seconds=Histogram("om_erasure_seconds", "Time from an erase's request to its receipt",
                                      ["scope"], buckets=_ERASURE_BUCKETS, registry=reg),
            erasure_fenced_inputs=Counter("om_erasure_fenced_inputs_total",
                                          "Messages of an erased subject published before its erase, dropped when "
                                          "they arrived afterwards (lagging or replayed)", registry=reg),
            erasure_writes_undone=Counter("om_erasure_writes_undone_total",
                                          "Work of an erased record that finished after its erase and was dropped "
                                          "or removed again (model_call_skipped, cycle_result, recall_points; "
                                          "refused_batch: rows a batch refused after a rebalance wrote of a "
                                          "record erased meanwhile; late_context: v2 context records a member "
                                          "published after losing its partitions, of a record erased meanwhile, "
                                          "tombstoned again)",
                                          ["what"], registry=reg),
            expirations=Counter("om_expirations_total", "Retention purges run (their data-om-expired receipt "
                                "published), one per record and purge", registry=reg),
            expired_items=Counter("om_expired_items_total",
                                  "What retention purges removed, by store: messages, observations (segments "
                                  "removed whole), rewritten (segments written again without expired entries), "
                                  "entries, threads (derived metadata), cycle_results, recall_points",
                                  ["store"], registry=reg),
            expired_inputs=Counter("om_expired_inputs_total",
                                   "Messages already past the retention window when they arrived (lagging, replayed "
                                   "or imported): not recorded, and not dead-lettered", registry=reg),
        )


_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


@dataclass(frozen=True)
class MetricInfo:
    """One metric as Prometheus sees it: the series names it exposes (without ``_created``), its labels, its help."""

    attribute: str
    name: str
    type: Literal["counter", "gauge", "histogram"]
    labels: tuple[str, ...]
    help: str

    @property
    def series(self) -> tuple[str, ...]:
        return tuple(self.name + suffix for suffix in _SUFFIXES[self.type])


def describe_metrics() -> list[MetricInfo]:
    """Every metric of :class:`Metrics`, in declaration order (for contract tests, dashboards and docs)."""
    metrics = Metrics.create()
    infos = []
    for f in fields(Metrics):
        if f.name == "registry":
            continue
        metric = getattr(metrics, f.name)
        infos.append(MetricInfo(attribute=f.name, name=metric._name, type=metric._type,
                                labels=tuple(metric._labelnames), help=metric._documentation))
    return infos
