"""The metric names om-stream exposes are a contract with dashboards, alerts and users' queries.

A rename must be deliberate: it changes the list below, the dashboards and the docs in the same commit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

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
    "om_buffer_to_activation_seconds_bucket", "om_buffer_to_activation_seconds_count",
    "om_buffer_to_activation_seconds_sum",
    "om_compression_ratio_bucket", "om_compression_ratio_count", "om_compression_ratio_sum",
    "om_consumer_lag_records",
    "om_contexts_published_total",
    "om_decide_seconds_bucket", "om_decide_seconds_count", "om_decide_seconds_sum",
    "om_dlq_records_total",
    "om_events_published_total",
    "om_generations_total",
    "om_message_to_context_seconds_bucket", "om_message_to_context_seconds_count",
    "om_message_to_context_seconds_sum",
    "om_messages_in_total",
    "om_model_budget_rejections_total",
    "om_model_cached_input_tokens_total",
    "om_model_calls_total",
    "om_model_circuit_state",
    "om_model_cost_unknown_calls_total",
    "om_model_cost_usd_total",
    "om_model_offline_fallbacks_total",
    "om_model_retries_total",
    "om_observations_total",
    "om_rebalances_total",
    "om_record_buffered_chunks_bucket", "om_record_buffered_chunks_count", "om_record_buffered_chunks_sum",
    "om_record_observation_tokens_bucket", "om_record_observation_tokens_count", "om_record_observation_tokens_sum",
    "om_record_unobserved_message_tokens_bucket", "om_record_unobserved_message_tokens_count",
    "om_record_unobserved_message_tokens_sum",
    "om_reflections_total",
    "om_store_errors_total",
    "om_table_recovery_seconds",
    "om_threads_near_block_after",
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
