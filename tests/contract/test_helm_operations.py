"""The chart's operational promises, on rendered manifests (``helm template`` + parsed YAML; kubeconform runs on the
same value sets in ``test_helm_chart.py``): the API token and the explicit choice to run without one, the
NetworkPolicy, one scrape per pod, migrations once in a hook Job with the workers' environment, service links off,
extra volumes everywhere, probe budgets and ports, static membership, the drain budget, bounded scaling (HPA or
KEDA), the alert rules (checked by promtool, their metrics against the worker's), NOTES.txt and default spreading.
The worker split by role is in ``test_helm_roles.py``.
"""

from __future__ import annotations

import base64
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from om_stream.observability.metrics import describe_metrics
from tests.support.helm import (
    CHART,
    EVERYTHING,
    FULL,
    HOOK,
    KEDA,
    MONITORING,
    ROOT,
    alert_rules,
    by_kind,
    env_of,
    job_pod,
    named,
    notes,
    render,
    resolved_env,
    resolved_mounts,
    rules_by_port,
    template,
    tools,
    worker_pod,
)

__all__ = ["tools"]  # the module-scoped fixture of tests/support/helm.py

DEFAULT_SELECTOR = {"app.kubernetes.io/name": "om-stream", "app.kubernetes.io/instance": "om"}

# -- a. the API token ---------------------------------------------------------------------------------------------

def test_a_token_is_generated_into_the_secret_and_given_to_the_worker(tools: Path, tmp_path: Path) -> None:
    first, second = (render(tools, tmp_path, {}) for _ in range(2))
    tokens = [base64.b64decode(named(d, "Secret", FULL)["data"]["OM_WORKER_API_TOKEN"]).decode()
              for d in (first, second)]
    assert all(re.fullmatch(r"[A-Za-z0-9]{48}", t) for t in tokens), tokens
    assert tokens[0] != tokens[1], "random per render when no Secret exists yet (lookup finds none here)"
    container = worker_pod(first)["containers"][0]
    assert env_of(container)["OM_WORKER_API_TOKEN"]["valueFrom"] == {
        "secretKeyRef": {"name": FULL, "key": "OM_WORKER_API_TOKEN"}}
    assert resolved_env(first, container)["OM_WORKER_API_TOKEN"] == tokens[0]
    assert named(first, "ConfigMap", FULL)["data"]["OM_WORKER_ALLOW_UNAUTHENTICATED"] == "false"


def test_a_given_token_or_existing_secret_is_used_and_none_is_generated(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {"secrets": {"OM_WORKER_API_TOKEN": "given-token-0123456789"}})
    assert resolved_env(docs, worker_pod(docs)["containers"][0])["OM_WORKER_API_TOKEN"] == "given-token-0123456789"
    docs = render(tools, tmp_path, {"existingSecret": "mine"})
    assert by_kind(docs, "Secret") == []
    for pod in (worker_pod(docs), job_pod(docs)):
        assert env_of(pod["containers"][0])["OM_WORKER_API_TOKEN"]["valueFrom"] == {
            "secretKeyRef": {"name": "mine", "key": "OM_WORKER_API_TOKEN"}}, "required: a missing key stops the pod"


def test_a_running_without_a_token_is_an_explicit_choice(tools: Path, tmp_path: Path) -> None:
    out = template(tools, tmp_path, {"apiAuth": {"generateToken": False}})
    assert out.returncode != 0 and "secrets.OM_WORKER_API_TOKEN" in out.stderr, out.stderr
    docs = render(tools, tmp_path, {"apiAuth": {"generateToken": False, "allowUnauthenticated": True}})
    container = worker_pod(docs)["containers"][0]
    assert "OM_WORKER_API_TOKEN" not in resolved_env(docs, container)
    assert resolved_env(docs, container)["OM_WORKER_ALLOW_UNAUTHENTICATED"] == "true"
    assert by_kind(docs, "Secret") == [], "no secret value at all: no Secret"
    out = template(tools, tmp_path, {"apiAuth": {"allowUnauthenticated": True},
                                     "secrets": {"OM_WORKER_API_TOKEN": "t0ken-0123456789"}})
    assert out.returncode != 0 and "choose one" in out.stderr, out.stderr


@pytest.mark.parametrize("key", ["OM_WORKER_ALLOW_UNAUTHENTICATED", "OM_KAFKA_GROUP_INSTANCE_ID",
                                 "OM_WORKER_METRICS_PORT", "OM_WORKER_ROLE"])
def test_a_chart_managed_variables_cannot_be_set_twice(tools: Path, tmp_path: Path, key: str) -> None:
    out = template(tools, tmp_path, {"settings": {key: "x"}})
    assert out.returncode != 0 and key in out.stderr, out.stderr


# -- b. NetworkPolicy ---------------------------------------------------------------------------------------------

def test_b_network_policy_admits_labelled_clients_to_the_api_and_monitoring_to_metrics(tools: Path,
                                                                                      tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {})
    policy = named(docs, "NetworkPolicy", FULL)
    pod_labels = by_kind(docs, "StatefulSet")[0]["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"], "egress (Kafka, Cassandra, models) not restricted"
    rules = rules_by_port(policy)
    assert set(rules) == {6066, 6067}
    assert rules[6066] == [{"podSelector": {"matchLabels": {"om-stream-client": "true"}}}], (
        "no namespaceSelector: pods of the release namespace only")
    assert rules[6067] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                            "podSelector": {}}]


def test_b_network_policy_selectors_egress_and_off_are_configurable(tools: Path, tmp_path: Path) -> None:
    egress = [{"to": [{"ipBlock": {"cidr": "10.1.0.0/16"}}], "ports": [{"port": 9092}]}]
    docs = render(tools, tmp_path, {"networkPolicy": {
        "api": {"podSelector": {"matchLabels": {"om-stream-client": None, "role": "agent"}}, "namespaceSelector": {}},
        "metrics": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": None, "team": "obs"}}},
        "egress": {"restrict": True, "to": egress}}})
    policy = named(docs, "NetworkPolicy", FULL)["spec"]
    # one peer with both selectors: agent pods in any namespace (two peers would admit every pod of every namespace)
    assert rules_by_port({"spec": policy})[6066] == [{"podSelector": {"matchLabels": {"role": "agent"}},
                                                       "namespaceSelector": {}}]
    assert rules_by_port({"spec": policy})[6067][0]["namespaceSelector"] == {"matchLabels": {"team": "obs"}}
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["egress"][0] == {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    assert policy["egress"][1:] == egress
    assert by_kind(render(tools, tmp_path, {"networkPolicy": {"enabled": False}}), "NetworkPolicy") == []
    # helm merges maps: a label added without nulling the default one is required as well (values.yaml says so)
    added = render(tools, tmp_path, {"networkPolicy": {"api": {"podSelector": {"matchLabels": {"role": "agent"}}}}})
    assert rules_by_port(named(added, "NetworkPolicy", FULL))[6066] == [
        {"podSelector": {"matchLabels": {"om-stream-client": "true", "role": "agent"}}}]


# -- c. one scrape per pod ----------------------------------------------------------------------------------------

def test_c_service_monitor_selects_the_headless_service_and_its_metrics_port_only(tools: Path,
                                                                                tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {}, api_versions=[MONITORING])
    monitor = by_kind(docs, "ServiceMonitor")[0]["spec"]
    wanted = monitor["selector"]["matchLabels"]
    selected = [s for s in by_kind(docs, "Service") if wanted.items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in selected] == [f"{FULL}-headless"], "each pod scraped once"
    assert [e["port"] for e in monitor["endpoints"]] == ["metrics"]
    ports = {p["name"]: p for p in selected[0]["spec"]["ports"]}
    assert ports["metrics"]["port"] == 6067 and ports["metrics"]["targetPort"] == "metrics"
    assert selected[0]["spec"]["publishNotReadyAddresses"] is True, "a pod recovering its table is scraped too"
    api = named(docs, "Service", FULL)
    assert [p["name"] for p in api["spec"]["ports"]] == ["http"], "the load-balanced Service carries the API only"


# -- d, e, f. migrations once, same environment, service links off, extra volumes -----------------------------------

def _hook(doc: dict[str, Any]) -> tuple[set[str], int, set[str]]:
    notes = doc["metadata"].get("annotations") or {}
    return (set(notes.get("helm.sh/hook", "").split(",")) - {""}, int(notes.get("helm.sh/hook-weight", "0")),
            set(notes.get("helm.sh/hook-delete-policy", "").split(",")) - {""})


@pytest.mark.parametrize("values", [{}, EVERYTHING, {**EVERYTHING, "existingSecret": "om-creds"}],
                         ids=["defaults", "everything", "existing-secret"])
def test_d_migrations_run_once_in_a_hook_job_with_the_workers_environment(tools: Path, tmp_path: Path,
                                                                         values: dict[str, Any]) -> None:
    docs = render(tools, tmp_path, values)
    pod, job = worker_pod(docs), named(docs, "Job", HOOK)
    assert "initContainers" not in pod, "not once per pod"
    assert _hook(job) == ({"pre-install", "pre-upgrade"}, 0, {"before-hook-creation", "hook-succeeded"})
    assert job["spec"]["backoffLimit"] == 3 and job["spec"]["activeDeadlineSeconds"] == 600
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    migrate, worker = spec["containers"][0], pod["containers"][0]
    assert migrate["command"] == ["om-stream", "migrate"] and migrate["image"] == worker["image"]
    # a pre-install hook runs before any release object exists: whatever the Job reads is a hook that runs first
    refs = {("ConfigMap", s["configMapRef"]["name"]) for s in migrate["envFrom"] if "configMapRef" in s}
    refs |= {("Secret", s["secretRef"]["name"]) for s in migrate["envFrom"] if "secretRef" in s}
    refs |= {("ConfigMap", v["configMap"]["name"]) for v in spec["volumes"] if "configMap" in v}
    refs.add(("ServiceAccount", spec["serviceAccountName"]))
    user_objects = {("ConfigMap", "corp-env"), ("Secret", "corp-secrets"), ("ConfigMap", "corp-ca"),
                    ("Secret", "om-creds")}
    for kind, name in refs - user_objects:
        hooks, weight, delete = _hook(named(docs, kind, name))
        assert hooks == {"pre-install", "pre-upgrade"} and weight < 0, f"{kind}/{name} is not created before the Job"
        assert delete == {"before-hook-creation", "hook-succeeded"}, f"{kind}/{name} outlives the hook"
    # the environment the two processes see is the same, value by value (the group member id is the pod's own)
    worker_env = resolved_env(docs, worker)
    assert worker_env.pop("OM_KAFKA_GROUP_INSTANCE_ID") == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert worker_env.pop("OM_WORKER_ROLE") == "all", "the migration is no worker: it gets no role"
    assert resolved_env(docs, migrate) == worker_env
    assert worker_env["OM_WORKER_API_TOKEN"] and worker_env["OM_WORKER_WEB_HOST"] == "0.0.0.0"
    worker_mounts = resolved_mounts(docs, pod, worker)
    del worker_mounts["/var/lib/om-stream"]  # the table store's volume is the worker's alone
    assert resolved_mounts(docs, spec, migrate) == worker_mounts
    assert migrate["securityContext"] == worker["securityContext"]
    assert spec["securityContext"] == pod["securityContext"]
    assert spec.get("nodeSelector") == pod.get("nodeSelector") and spec.get("tolerations") == pod.get("tolerations")
    if values.get("serviceAccount"):
        account = named(docs, "ServiceAccount", spec["serviceAccountName"])
        assert account["metadata"]["annotations"]["iam.example/role"] == "om"


def test_d_no_job_without_the_cassandra_store_or_when_disabled(tools: Path, tmp_path: Path) -> None:
    for values in ({"settings": {"OM_MEMORY_STORE": "sqlite"}}, {"cassandraMigrations": {"enabled": False}}):
        docs = render(tools, tmp_path, values)
        assert [d for d in docs if _hook(d)[0]] == [], values


def test_e_service_links_are_off_on_every_pod(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, EVERYTHING)
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("StatefulSet", "Job", "Deployment")]
    assert len(pods) == 2
    assert all(p["enableServiceLinks"] is False for p in pods)


def test_f_extra_volumes_env_from_and_mounts_reach_every_container(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, EVERYTHING)
    for pod in (worker_pod(docs), job_pod(docs)):
        assert {"name": "corp-ca", "configMap": {"name": "corp-ca"}} in pod["volumes"]
        for container in pod["containers"] + pod.get("initContainers", []):
            assert {"name": "corp-ca", "mountPath": "/etc/om-stream/ca", "readOnly": True} in container[
                "volumeMounts"], container["name"]
            assert EVERYTHING["extraEnvFrom"][0] in container["envFrom"]
            assert EVERYTHING["extraEnvFrom"][1] in container["envFrom"]
            assert EVERYTHING["extraEnv"][1] in container["env"]


# -- g, i. probes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("startup", "threshold"), [({}, 90), ({"recoverySeconds": 125, "periodSeconds": 10}, 13),
                                                     ({"recoverySeconds": 3600, "periodSeconds": 15}, 240)])
def test_g_startup_budget_covers_the_table_recovery_time(tools: Path, tmp_path: Path, startup: dict[str, Any],
                                                        threshold: int) -> None:
    docs = render(tools, tmp_path, {"probes": {"startup": startup}} if startup else {})
    probe = worker_pod(docs)["containers"][0]["startupProbe"]
    recovery = startup.get("recoverySeconds", 900)
    assert probe["failureThreshold"] == threshold == math.ceil(recovery / probe["periodSeconds"])
    assert probe["failureThreshold"] * probe["periodSeconds"] >= recovery
    assert "recoverySeconds" not in probe


def test_i_probes_use_their_own_endpoints_on_the_metrics_port_and_the_pdb_holds(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {"metrics": {"port": 7070}})
    statefulset = by_kind(docs, "StatefulSet")[0]
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 6066, "metrics": 7070}
    config = named(docs, "ConfigMap", FULL)["data"]
    assert (config["OM_WORKER_METRICS_HOST"], config["OM_WORKER_METRICS_PORT"]) == ("0.0.0.0", "7070")
    paths = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "readinessProbe", "livenessProbe")}
    # startup waits for the recovered table; readiness stays 200 through rebalances (this pod can still serve);
    # liveness fails only on a crash or a stall
    assert paths == {"startupProbe": {"path": "/healthz", "port": "metrics"},
                     "readinessProbe": {"path": "/readyz", "port": "metrics"},
                     "livenessProbe": {"path": "/livez", "port": "metrics"}}
    headless = named(docs, "Service", f"{FULL}-headless")
    assert {p["name"]: p["port"] for p in headless["spec"]["ports"]}["metrics"] == 7070
    pdb = by_kind(docs, "PodDisruptionBudget")[0]["spec"]
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert pdb["selector"]["matchLabels"].items() <= pod_labels.items()
    assert 0 < pdb["maxUnavailable"] < statefulset["spec"]["replicas"], "drains go one pod at a time"
    job_labels = named(docs, "Job", HOOK)["spec"]["template"]["metadata"]["labels"]
    assert not pdb["selector"]["matchLabels"].items() <= job_labels.items(), "the Job pod is not in the budget"


# -- h. static membership -----------------------------------------------------------------------------------------

def test_h_static_membership_uses_the_pod_name_and_a_restart_sized_session(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {})
    container = worker_pod(docs)["containers"][0]
    assert env_of(container)["OM_KAFKA_GROUP_INSTANCE_ID"]["valueFrom"] == {"fieldRef": {"fieldPath":
                                                                                         "metadata.name"}}
    assert named(docs, "ConfigMap", FULL)["data"]["OM_KAFKA_SESSION_TIMEOUT_S"] == "90"
    docs = render(tools, tmp_path, {"staticMembership": {"enabled": False},
                                    "settings": {"OM_KAFKA_SESSION_TIMEOUT_S": 20}})
    assert "OM_KAFKA_GROUP_INSTANCE_ID" not in env_of(worker_pod(docs)["containers"][0])
    assert named(docs, "ConfigMap", FULL)["data"]["OM_KAFKA_SESSION_TIMEOUT_S"] == "20"


# -- j. drain budget ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("values", "sleep", "grace"), [
    ({}, 10, 10 + 45 + 30 + 10),
    ({"settings": {"OM_WORKER_DRAIN_TIMEOUT_S": 120, "OM_WORKER_SHUTDOWN_TIMEOUT_S": "40"},
      "lifecycle": {"preStopSleepSeconds": 5, "terminationMarginSeconds": 15}}, 5, 5 + 120 + 40 + 15),
    ({"settings": {"OM_WORKER_DRAIN_TIMEOUT_S": 12.5}}, 10, 63),  # 10 + 12.5 + 30 + 10, rounded up
])
def test_j_grace_period_is_prestop_plus_drain_plus_shutdown_plus_margin(tools: Path, tmp_path: Path,
                                                                       values: dict[str, Any], sleep: int,
                                                                       grace: int) -> None:
    docs = render(tools, tmp_path, values)
    pod = worker_pod(docs)
    assert pod["terminationGracePeriodSeconds"] == grace
    assert pod["containers"][0]["lifecycle"]["preStop"] == {"exec": {"command": ["sleep", str(sleep)]}}
    config = named(docs, "ConfigMap", FULL)["data"]
    for key in ("OM_WORKER_DRAIN_TIMEOUT_S", "OM_WORKER_SHUTDOWN_TIMEOUT_S"):
        if key in values.get("settings", {}):
            assert float(config[key]) == float(values["settings"][key]), "the worker gets the figures the chart used"


# -- k. scaling ---------------------------------------------------------------------------------------------------

def test_k_hpa_scales_up_in_bounded_steps(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {"autoscaling": {"enabled": True, "maxReplicas": 30,
                                                    "scaleUp": {"pods": 2, "periodSeconds": 240}}})
    hpa = by_kind(docs, "HorizontalPodAutoscaler")[0]["spec"]
    assert hpa["maxReplicas"] == 12, "capped at OM_KAFKA_PARTITIONS (12 by default)"
    up, down = hpa["behavior"]["scaleUp"], hpa["behavior"]["scaleDown"]
    assert up["policies"] == [{"type": "Pods", "value": 2, "periodSeconds": 240}] and up["selectPolicy"] == "Max"
    assert up["stabilizationWindowSeconds"] == 120
    assert down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 300}]
    assert down["stabilizationWindowSeconds"] == 600
    assert by_kind(docs, "ScaledObject") == []


def test_k_keda_scales_on_the_groups_lag_instead_of_the_hpa(tools: Path, tmp_path: Path) -> None:
    values = {"autoscaling": {"enabled": True, "engine": "keda", "minReplicas": 1, "maxReplicas": 50,
                              "keda": {"lagThreshold": 250, "authenticationRef": "kafka-auth"}},
              "settings": {"OM_KAFKA_PARTITIONS": 8, "OM_WORKER_APP_ID": "om-prod",
                           "OM_KAFKA_TOPIC_MESSAGES": "chat.in", "OM_KAFKA_BOOTSTRAP": "k:9092"}}
    docs = render(tools, tmp_path, values, api_versions=[KEDA])
    assert by_kind(docs, "HorizontalPodAutoscaler") == [], "KEDA owns the HPA: one autoscaler, not two"
    assert "replicas" not in by_kind(docs, "StatefulSet")[0]["spec"]
    scaled = by_kind(docs, "ScaledObject")[0]["spec"]
    assert scaled["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": FULL}
    assert (scaled["minReplicaCount"], scaled["maxReplicaCount"]) == (1, 8), "capped at the partitions"
    trigger = scaled["triggers"][0]
    assert trigger["type"] == "kafka" and trigger["authenticationRef"] == {"name": "kafka-auth"}
    assert trigger["metadata"]["topic"] == "chat.in" and trigger["metadata"]["consumerGroup"] == "om-prod"
    assert trigger["metadata"]["lagThreshold"] == "250" and trigger["metadata"]["bootstrapServers"] == "k:9092"
    assert trigger["metadata"]["allowIdleConsumers"] == "false"
    behavior = scaled["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 180}]
    out = template(tools, tmp_path, values)
    assert out.returncode != 0 and "keda.sh/v1alpha1" in out.stderr, "no silent fallback without KEDA"


# -- l. alerts ----------------------------------------------------------------------------------------------------

_FUNCTIONS_AND_KEYWORDS = {"sum", "max", "min", "by", "rate", "increase", "without", "on", "and", "or", "unless"}


def test_l_alerts_have_for_severity_runbook_and_use_only_the_workers_metrics(tools: Path, tmp_path: Path) -> None:
    assert by_kind(render(tools, tmp_path, {}), "PrometheusRule") == [], "only where the monitoring API exists"
    docs = render(tools, tmp_path, {}, api_versions=[MONITORING])
    rules = alert_rules(docs)
    assert {r["alert"] for r in rules} == {"OMConsumerGroupLag", "OMDeadLetterRecords", "OMTokenBudgetExhausted",
                                           "OMAgentCrashed", "OMWorkerNotLive", "OMRebalanceStorm",
                                           "OMTableRecoverySlow"}
    home = yaml.safe_load((CHART / "Chart.yaml").read_text())["home"]
    series = {s for info in describe_metrics() for s in info.series}
    for rule in rules:
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["runbook_url"] == f"{home}#{rule['alert'].lower()}"
        names = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*[{(\[]", rule["expr"])) - _FUNCTIONS_AND_KEYWORDS
        assert names and names <= series, f"{rule['alert']}: {sorted(names - series)} not exported by the worker"
        assert 'namespace="agents"' in rule["expr"], "scoped to this release's series"
    lag = next(r for r in rules if r["alert"] == "OMConsumerGroupLag")["expr"]
    assert "om_consumer_group_lag_records" in lag and "max by (namespace, topic, partition)" in lag, (
        "broker-side lag, every worker exports it: max over workers before summing partitions")


def test_l_alert_thresholds_base_url_and_switches_are_values(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {"metrics": {"prometheusRule": {
        "runbookBaseUrl": "https://git.example/om-stream/blob/main/docs/operate.md/",
        "labels": {"release": "kps"},
        "alerts": {"OMConsumerGroupLag": {"threshold": 500, "for": "5m"},
                   "OMDeadLetterRecords": {"enabled": False}}}},
        "probes": {"startup": {"recoverySeconds": 300}}}, api_versions=[MONITORING])
    assert by_kind(docs, "PrometheusRule")[0]["metadata"]["labels"]["release"] == "kps"
    rules = {r["alert"]: r for r in alert_rules(docs)}
    assert "OMDeadLetterRecords" not in rules
    assert rules["OMConsumerGroupLag"]["expr"].endswith("> 500") and rules["OMConsumerGroupLag"]["for"] == "5m"
    assert rules["OMTableRecoverySlow"]["expr"].endswith("> 240"), "0.8 of the startup budget"
    assert rules["OMRebalanceStorm"]["annotations"]["runbook_url"] == (
        "https://git.example/om-stream/blob/main/docs/operate.md#omrebalancestorm")


@pytest.fixture(scope="module")
def promtool() -> Path:
    out = subprocess.run(["bash", str(ROOT / "infra" / "tools" / "install-prometheus.sh")], check=False,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        pytest.fail(f"install-prometheus.sh failed:\n{out.stderr[-3000:]}", pytrace=False)
    return Path(out.stdout.strip().splitlines()[-1].split("=", 1)[1]).with_name("promtool")


def test_l_promtool_accepts_the_rules_and_they_fire_on_the_series_the_worker_exports(
        tools: Path, tmp_path: Path, promtool: Path) -> None:
    """promtool parses every expression, then replays series shaped like the worker's (two pods exporting the
    same broker-side lag; a DLQ counter; a stalled pod) and checks which alerts fire."""
    docs = render(tools, tmp_path, {}, api_versions=[MONITORING])
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"groups": by_kind(docs, "PrometheusRule")[0]["spec"]["groups"]}))
    checked = subprocess.run([str(promtool), "check", "rules", str(rules_file)], check=False, capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    def sample(name: str, values: str, **labels: str) -> dict[str, str]:
        matchers = ", ".join([f'{k}="{v}"' for k, v in {"namespace": "agents", "job": f"{FULL}-headless",
                                                         **labels}.items()])
        return {"series": f"{name}{{{matchers}}}", "values": values}

    pods = (f"{FULL}-0", f"{FULL}-1")
    series = [sample("om_consumer_group_lag_records", f"{value}x40", pod=pod, topic="om.messages",
                     partition=str(part)) for pod in pods for part, value in ((0, 6000), (1, 4500))]
    series += [sample("om_dlq_records_total", "0+6x40", pod=pods[0], reason="invalid_json"),
               sample("om_worker_live", "1 1 0x38", pod=pods[1]), sample("om_worker_live", "1x40", pod=pods[0])]
    # both workers see each of the rebalances, one a minute: 15 in a quarter hour, not 30
    series += [sample("om_rebalances_total", "0+1x40", pod=pod) for pod in pods]
    at_lag = {"exp_labels": {"severity": "warning", "namespace": "agents", "topic": "om.messages"}}
    tests = {"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [
            # 10 500 records behind (not 21 000: the two workers' copies are not added up), for 15 minutes
            {"eval_time": "14m", "alertname": "OMConsumerGroupLag", "exp_alerts": []},
            {"eval_time": "20m", "alertname": "OMConsumerGroupLag", "exp_alerts": [{
                **at_lag, "exp_annotations": _annotations(docs, "OMConsumerGroupLag", topic="om.messages",
                                                          value="10500")}]},
            {"eval_time": "30m", "alertname": "OMDeadLetterRecords", "exp_alerts": [{"exp_labels": {
                "severity": "warning", "namespace": "agents", "reason": "invalid_json"},
                "exp_annotations": _annotations(docs, "OMDeadLetterRecords", reason="invalid_json", value="0.1")}]},
            {"eval_time": "30m", "alertname": "OMWorkerNotLive", "exp_alerts": [{"exp_labels": {
                "severity": "critical", "namespace": "agents", "pod": f"{FULL}-1"},
                "exp_annotations": _annotations(docs, "OMWorkerNotLive", pod=f"{FULL}-1", value="0")}]},
            {"eval_time": "18m", "alertname": "OMRebalanceStorm", "exp_alerts": []},
            {"eval_time": "35m", "alertname": "OMRebalanceStorm", "exp_alerts": [{"exp_labels": {
                "severity": "warning", "namespace": "agents"},
                "exp_annotations": _annotations(docs, "OMRebalanceStorm", value="15")}]},
            {"eval_time": "30m", "alertname": "OMAgentCrashed", "exp_alerts": []},
        ]}]}
    tests_file = tmp_path / "rules_test.yaml"
    tests_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    replayed = subprocess.run([str(promtool), "test", "rules", str(tests_file)], check=False, capture_output=True,
                              text=True, timeout=60)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def _annotations(docs: list[dict[str, Any]], alert: str, value: str, **labels: str) -> dict[str, str]:
    """The rule's annotations as Prometheus expands them ({{ $labels.x }}, {{ $value }})."""
    rule = next(r for r in alert_rules(docs) if r["alert"] == alert)
    out = {}
    for key, template_text in rule["annotations"].items():
        text = template_text.replace("{{ $value }}", value)
        for name, label in labels.items():
            text = text.replace("{{ $labels." + name + " }}", label)
        out[key] = text
    return out


# -- m. NOTES.txt -------------------------------------------------------------------------------------------------

def test_m_notes_send_owner_specific_calls_to_the_pod_not_the_balanced_service(tools: Path, tmp_path: Path) -> None:
    text = notes(tools, tmp_path, {"replicaCount": 3})
    balanced = f"http://{FULL}.agents.svc:6066"
    owner_lines = [line for line in text.splitlines() if "/v1/threads/{id}/context" in line]
    assert owner_lines and all(balanced not in line for line in owner_lines), owner_lines
    assert "404" in owner_lines[0] and "om.context" in text
    assert f"{FULL}-<n>.{FULL}-headless.agents.svc:6066" in text and "n = 0 .. 2" in text
    balanced_lines = [line for line in text.splitlines() if balanced in line]
    assert balanced_lines and all("/v1/recall" in line for line in balanced_lines), "only for calls any pod answers"
    assert "Authorization: Bearer" in text and "port-forward svc/" not in text
    assert "Authentication: none" in notes(tools, tmp_path, {"apiAuth": {"allowUnauthenticated": True,
                                                                         "generateToken": False}})


# -- n. spreading -------------------------------------------------------------------------------------------------

def test_n_default_anti_affinity_and_zone_spread_unless_the_user_sets_them(tools: Path, tmp_path: Path) -> None:
    pod = worker_pod(render(tools, tmp_path, {}))
    preferred = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [{"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                             "labelSelector": {"matchLabels": DEFAULT_SELECTOR}}}]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
    assert pod["topologySpreadConstraints"] == [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                 "whenUnsatisfiable": "ScheduleAnyway",
                                                 "labelSelector": {"matchLabels": DEFAULT_SELECTOR}}]
    mine_affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["om"]}]}]}}}
    mine_spread = [{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": DEFAULT_SELECTOR}}]
    pod = worker_pod(render(tools, tmp_path, {"affinity": mine_affinity, "topologySpreadConstraints": mine_spread}))
    assert pod["affinity"] == mine_affinity and pod["topologySpreadConstraints"] == mine_spread
