"""The metric names om-stream exposes are a contract with dashboards, alerts and users' queries.

A rename must be deliberate: it changes the list below, the dashboards and the docs in the same commit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from om_stream.observability.metrics import Metrics, describe_metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))

# every series name /metrics can expose (prometheus_client's optional ``_created`` series left out)
EXPOSITION = [
    "gen_ai_client_operation_duration_seconds_bucket", "gen_ai_client_operation_duration_seconds_count",
    "gen_ai_client_operation_duration_seconds_sum",
    "gen_ai_client_token_usage_bucket", "gen_ai_client_token_usage_count", "gen_ai_client_token_usage_sum",
    "om_activations_total",
    "om_agent_crashes_total",
    "om_asyncio_tasks",
    "om_buffer_to_activation_seconds_bucket", "om_buffer_to_activation_seconds_count",
    "om_buffer_to_activation_seconds_sum",
    "om_compression_ratio_bucket", "om_compression_ratio_count", "om_compression_ratio_sum",
    "om_consumer_lag_records",
    "om_content_cache_bytes",
    "om_consumer_group_lag_records",
    "om_contexts_published_total",
    "om_decide_seconds_bucket", "om_decide_seconds_count", "om_decide_seconds_sum",
    "om_dlq_records_total",
    "om_events_published_total",
    "om_fenced_batches_total",
    "om_generations_total",
    "om_held_entries",
    "om_condensations_total",
    "om_reflection_backoffs_total",
    "om_message_to_context_seconds_bucket", "om_message_to_context_seconds_count",
    "om_message_to_context_seconds_sum",
    "om_messages_in_total",
    "om_model_budget_rejections_total",
    "om_model_cached_input_tokens_total",
    "om_model_calls_saved_total",
    "om_model_calls_total",
    "om_model_circuit_state",
    "om_model_cost_unknown_calls_total",
    "om_model_cost_usd_total",
    "om_model_offline_fallbacks_total",
    "om_model_retries_total",
    "om_observations_total",
    "om_partition_stalls_total",
    "om_processing_errors_total",
    "om_rebalances_total",
    "om_record_buffered_chunks_bucket", "om_record_buffered_chunks_count", "om_record_buffered_chunks_sum",
    "om_record_observation_tokens_bucket", "om_record_observation_tokens_count", "om_record_observation_tokens_sum",
    "om_record_unobserved_message_tokens_bucket", "om_record_unobserved_message_tokens_count",
    "om_record_unobserved_message_tokens_sum",
    "om_recall_index_failures_total",
    # data lifecycle
    "om_erasures_total", "om_erasure_seconds_bucket", "om_erasure_seconds_sum", "om_erasure_seconds_count",
    "om_erasure_fenced_inputs_total", "om_erasure_writes_undone_total",
    "om_expirations_total", "om_expired_items_total", "om_expired_inputs_total",
    "om_recall_indexed_points_total",
    "om_recall_requests_total",
    "om_recall_seconds_bucket", "om_recall_seconds_count", "om_recall_seconds_sum",
    "om_reflections_total",
    "om_store_errors_total",
    "om_store_unavailable",
    "om_table_bytes",
    "om_table_records",
    "om_table_recovery_seconds",
    "om_threads_near_block_after",
    "om_worker_live",
    "om_worker_role",
]

# labels a scraper adds (Kubernetes service discovery, the ServiceMonitor, static labels) or histograms carry
SCRAPE_LABELS = {"namespace", "job", "instance", "pod", "service", "container", "endpoint", "le"}
FORBIDDEN_LABELS = {"thread", "thread_id", "resource", "resource_id", "user", "user_id", "tenant", "tenant_id",
                    "message_id", "cycle_id", "record_key", "conversation_id"}


def _exposed(metrics: Metrics) -> list[str]:
    """Series names in the text exposition once every metric has one sample (labels filled with placeholders)."""
    for info in describe_metrics():
        metric = getattr(metrics, info.attribute)
        child = metric.labels(*["x"] * len(info.labels)) if info.labels else metric
        {"counter": lambda c: c.inc(), "gauge": lambda c: c.set(1),
         "histogram": lambda c: c.observe(1)}[info.type](child)
    text = generate_latest(metrics.registry).decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    return sorted(n for n in names if not n.endswith("_created"))


def test_every_exposed_series_name_is_listed() -> None:
    assert _exposed(Metrics.create()) == sorted(EXPOSITION)


def test_described_series_match_the_exposition() -> None:
    assert sorted(s for info in describe_metrics() for s in info.series) == sorted(EXPOSITION)


def test_conventions_base_units_total_counters_and_no_id_labels() -> None:
    for info in describe_metrics():
        assert re.fullmatch(r"(om|gen_ai)_[a-z0-9_]+", info.name), info.name
        assert not info.name.endswith(("_ms", "_milliseconds", "_minutes", "_hours", "_kb", "_mb")), info.name
        if info.type == "counter":
            assert info.series == (info.name + "_total",)
        assert not set(info.labels) & FORBIDDEN_LABELS, f"{info.name} labels {info.labels}: no ids as labels"
        assert info.help.strip(), f"{info.name} has no help text"


def test_genai_model_call_metrics_follow_the_opentelemetry_names() -> None:
    by_name = {info.name: info for info in describe_metrics()}
    duration = by_name["gen_ai_client_operation_duration_seconds"]
    tokens = by_name["gen_ai_client_token_usage"]
    for info in (duration, tokens):
        assert info.type == "histogram"
        assert {"gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "om_role"} <= set(info.labels)
    assert "gen_ai_token_type" in tokens.labels
    assert by_name["om_model_cost_usd"].type == "counter"


def test_metrics_live_on_the_injected_registry_only() -> None:
    from prometheus_client import REGISTRY, CollectorRegistry

    registry = CollectorRegistry()
    before = set(REGISTRY._names_to_collectors)
    metrics = Metrics.create(registry)
    assert metrics.registry is registry
    assert set(REGISTRY._names_to_collectors) == before
    Metrics.create(CollectorRegistry())  # a second object on another registry: no duplicate-name clash


# -- dashboards --------------------------------------------------------------------------------------------------

def dashboard_queries(path: Path) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable of a dashboard."""
    board = json.loads(path.read_text())
    found = [(f"{path.name} panel {p['title']!r} {t['refId']}", t["expr"])
             for p in board["panels"] for t in p.get("targets", [])]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            found.append((f"{path.name} variable {var['name']}", var["query"]["query"]))
    return found


_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{[^}]*\})?\s*,\s*([a-zA-Z_]\w*)\s*\)")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)")
_BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def test_dashboards_exist_with_the_panels_the_issue_lists() -> None:
    titles = {json.loads(p.read_text())["title"]: [x["title"] for x in json.loads(p.read_text())["panels"]]
              for p in DASHBOARDS}
    assert set(titles) == {"OM spend", "OM latency & health"}
    assert len(titles["OM spend"]) == 5 and len(titles["OM latency & health"]) == 7
    for path in DASHBOARDS:
        variables = {v["name"] for v in json.loads(path.read_text())["templating"]["list"]}
        assert {"model", "role", "namespace"} <= variables


def test_every_metric_and_label_a_dashboard_uses_exists_in_the_metrics_object() -> None:
    series = {s: info for info in describe_metrics() for s in info.series}
    problems = []
    for path in DASHBOARDS:
        for where, expr in dashboard_queries(path):
            selectors = _SELECTOR.findall(expr) + [(m, f"{label}=") for m, label in _LABEL_VALUES.findall(expr)]
            assert selectors, f"{where}: no metric selector in {expr}"
            used: set[str] = set()
            for name, matchers in selectors:
                info = series.get(name)
                if info is None:
                    problems.append(f"{where}: unknown metric {name}")
                    continue
                allowed = set(info.labels) | SCRAPE_LABELS
                used |= allowed
                problems += [f"{where}: {name} has no label {label}" for label in
                             (m[0] for m in _MATCHER.findall(matchers)) if label not in allowed]
            for group in _BY.findall(expr):
                problems += [f"{where}: no metric used carries label {label}"
                             for label in (x.strip() for x in group.split(",")) if label and label not in used]
    assert problems == []


def test_chart_dashboards_are_copies_of_the_grafana_dashboards() -> None:
    chart = ROOT / "helm" / "om-stream" / "dashboards"
    assert sorted(p.name for p in chart.glob("*.json")) == [p.name for p in DASHBOARDS]
    for path in DASHBOARDS:
        assert (chart / path.name).read_bytes() == path.read_bytes(), f"run `make chart-dashboards` ({path.name})"


# -- the feeds: what a gateway attempt, a cycle, a state step and the consumer put into the series ---------------

def _value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_gateway_attempt_feeds_the_genai_cost_retry_and_cache_series() -> None:
    from om_stream.adapters.gateway import CallRecord
    from om_stream.observability.model_metrics import ModelCallMetrics
    from om_stream.ports import Usage

    class Breaker:
        state = "open"

    class Gateway:
        def breaker(self, model: str) -> Breaker:
            return Breaker()

    metrics = Metrics.create()
    observe = ModelCallMetrics(metrics, Gateway())
    model = "gemini/gemini-2.5-flash"
    observe(CallRecord(role="observer", model=model, ok=False, seconds=0.5, attempt=1, entry=0,
                       error_kind="rate_limited"))
    observe(CallRecord(role="observer", model=model, ok=True, seconds=1.5, attempt=2, entry=0,
                       usage=Usage(1000, 200, cached_input_tokens=400), cost_usd=0.0012))
    observe(CallRecord(role="reflector", model="acme/private", ok=True, seconds=1.0, attempt=1, entry=0,
                       usage=Usage(10, 5), cost_usd=None))
    genai = {"gen_ai_operation_name": "chat", "gen_ai_provider_name": "gcp.gemini", "gen_ai_request_model": model,
             "om_role": "observer"}
    assert _value(metrics, "gen_ai_client_operation_duration_seconds_count", **genai, error_type="rate_limited") == 1
    assert _value(metrics, "gen_ai_client_operation_duration_seconds_sum", **genai, error_type="") == 1.5
    assert _value(metrics, "gen_ai_client_token_usage_sum", **genai, gen_ai_token_type="input") == 1000
    assert _value(metrics, "gen_ai_client_token_usage_sum", **genai, gen_ai_token_type="output") == 200
    short = {"gen_ai_request_model": model, "om_role": "observer"}
    assert _value(metrics, "om_model_cost_usd_total", **short) == pytest.approx(0.0012)
    assert _value(metrics, "om_model_cached_input_tokens_total", **short) == 400
    assert _value(metrics, "om_model_retries_total", **short) == 1
    assert _value(metrics, "om_model_calls_total", **short, outcome="error") == 1
    assert _value(metrics, "om_model_cost_unknown_calls_total", gen_ai_request_model="acme/private",
                  om_role="reflector") == 1
    assert _value(metrics, "om_model_cost_usd_total", gen_ai_request_model="acme/private", om_role="reflector") is None
    assert _value(metrics, "om_model_circuit_state", gen_ai_request_model=model) == 2  # read at scrape time


async def test_a_model_outside_the_gateway_and_the_cycle_hooks_feed_the_same_series() -> None:
    from om_stream.adapters.offline_model import OfflineModel
    from om_stream.core.prompts.chat import ChatMessage
    from om_stream.core.prompts.tasks import ReflectorTask
    from om_stream.observability.model_metrics import CycleMetrics, MeteredModel, ModelAttempt, ModelCallMetrics
    from om_stream.ports import ChatRequest
    from om_stream.runtime.cycles import CycleHookContext

    metrics = Metrics.create()
    records: list[ModelAttempt] = []
    calls = ModelCallMetrics(metrics)
    model = MeteredModel(OfflineModel(), lambda r: (records.append(r), calls(r)))
    task = ReflectorTask(observations="* 🔴 User is Ada.", level=0, target_tokens=100, input_tokens=10)
    await model.complete(ChatRequest(role="reflector", model="offline", task=task,
                                     messages=(ChatMessage(role="user", content="reflect"),)))
    assert records[0].model == "offline" and records[0].ok and records[0].cost_usd == 0.0
    assert _value(metrics, "om_model_cost_usd_total", gen_ai_request_model="offline", om_role="reflector") == 0.0
    cycles = CycleMetrics(metrics)
    end = CycleHookContext(phase="end", operation="observation", cycle_id="c1", thread_id="t", resource_id="r",
                           trigger="turn-sync", kind="sync", error_kind="budget_exceeded")
    cycles(end)
    cycles(CycleHookContext(phase="end", operation="reflection", cycle_id="c2", thread_id="t", resource_id="r",
                            trigger="turn-sync", kind="sync", offline=True))
    assert _value(metrics, "om_model_budget_rejections_total", om_role="observer") == 1
    assert _value(metrics, "om_model_offline_fallbacks_total", om_role="reflector") == 1


def test_buffer_to_activation_latency_comes_from_the_activation_events_of_a_step() -> None:
    from om_stream.core.commands import EmitEvent
    from om_stream.core.events import ActivationEvent, MarkerConfig
    from om_stream.core.state import ChunkRef, RecordState
    from om_stream.observability.lifecycle_metrics import activation_waits

    def chunk(chunk_id: str, at: int) -> ChunkRef:
        return ChunkRef(id=chunk_id, cycle_id="c", first_seq=0, last_seq=1, first_message_id="m0",
                        last_message_id="m1", message_count=2, message_tokens=100, tokens=20, last_message_at=at,
                        buffered_at=at, thread_ids=("t",))

    activation = ActivationEvent(
        record_id="t", thread_id="t", cycle_id="c", operation_type="observation", activated_at="2026-03-02T09:00:00Z",
        chunks_activated=1, tokens_activated=100, observation_tokens=20, messages_activated=2, generation_count=0,
        observations="", triggered_by="threshold", buffer_cycle_ids=["c"],
        config=MarkerConfig(message_tokens=30_000, observation_tokens=40_000, scope="thread"))
    before = RecordState(key="t", scope="thread", resource_id="r", buffered=[chunk("a", 1_000), chunk("b", 4_000)])
    step = [EmitEvent("t", activation, "ev-a", observations_from=("a",))]  # "b" was cleared: no event of its own
    assert activation_waits(before, step, 11_000) == [10.0]
    assert activation_waits(before, [], 11_000) == []


def test_consumer_lag_and_recovery_time() -> None:
    from om_stream.observability.worker_metrics import ConsumerLag, RecoveryTimer

    metrics = Metrics.create()
    lag = ConsumerLag(metrics)
    lag.update([("om.messages", 0, 7, 10), ("om.messages", 1, -1, 4)])
    assert _value(metrics, "om_consumer_lag_records", topic="om.messages", partition="0") == 7
    assert _value(metrics, "om_consumer_lag_records", topic="om.messages", partition="1") == 0
    lag.update([("om.messages", 1, 3, 4)])  # partition 0 was revoked: its series goes away
    assert _value(metrics, "om_consumer_lag_records", topic="om.messages", partition="0") is None
    now = [100.0]
    timer = RecoveryTimer(metrics, started_at=90.0, clock=lambda: now[0])
    timer.tick(False)
    timer.tick(True)
    assert _value(metrics, "om_table_recovery_seconds") == 10.0
    now[0] = 200.0
    timer.tick(False)  # a rebalance
    now[0] = 203.5
    timer.tick(True)
    assert _value(metrics, "om_table_recovery_seconds") == 3.5


# -- docs/operate.md -------------------------------------------------------------------------------------------

def test_operate_doc_tables_are_generated_from_the_code() -> None:
    from om_stream.observability.settings_doc import render

    doc = ROOT / "docs" / "operate.md"
    text = doc.read_text()
    assert "<!-- BEGIN GENERATED: settings-table -->" in text and "<!-- BEGIN GENERATED: metrics-table -->" in text
    assert render(text) == text, "run `make docs-operate`"


def test_the_documented_variable_names_are_the_ones_settings_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from om_stream.observability.settings_doc import settings_docs
    from om_stream.settings import Settings

    plain = [d for d in settings_docs() if d.type == "string" and not d.choices]
    for doc in plain:
        monkeypatch.setenv(doc.env, f"v_{doc.env}")
    dumped = Settings().model_dump()
    values = {f"OM_{group}_{key}".upper(): value for group, fields_ in dumped.items() if isinstance(fields_, dict)
              for key, value in fields_.items()}
    values.update({f"OM_{key}".upper(): v for key, v in dumped.items() if not isinstance(v, dict)})
    for doc in plain:
        got = values[doc.env]
        assert (got.get_secret_value() if hasattr(got, "get_secret_value") else got) == f"v_{doc.env}", doc.env
