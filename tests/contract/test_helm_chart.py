"""The Helm chart: ``helm lint``, ``helm template`` for several value sets, every manifest validated by kubeconform
(strict) against the Kubernetes schemas, and the rules the chart promises (probes, HPA cap, secrets, dashboards).
``test_helm_operations.py`` holds the operational rules (auth, network policy, migrations hook, probes, drain,
scaling, alerts, notes) on the same helpers.

helm and kubeconform are built from the Go module proxy and the schemas come from registry packages, all cached by
``infra/tools/install-helm-tools.sh`` (idempotent; run here if needed). kubeconform never downloads a schema.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from om_stream.observability.settings_doc import CHART_MANAGED, chart_settings_schema, settings_docs
from tests.support.helm import (
    CHART,
    KEDA,
    MONITORING,
    ROOT,
    by_kind,
    kubeconform,
    manifests,
    named,
    run,
    template,
    tools,
    values_file,
)

__all__ = ["tools"]  # the module-scoped fixture of tests/support/helm.py

KUBE_VERSIONS = ("1.30.0", "1.34.0")


FULL: dict[str, Any] = {
    "replicaCount": 3,
    "settings": {"OM_KAFKA_BOOTSTRAP": "kafka-0.kafka:9092,kafka-1.kafka:9092", "OM_KAFKA_PARTITIONS": 6,
                 "OM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "OM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
                 "OM_KAFKA_SASL_USERNAME": "om", "OM_MEMORY_STORE": "cassandra", "OM_CASSANDRA_TLS": True,
                 "OM_CASSANDRA_READ_CONSISTENCY": "LOCAL_QUORUM", "OM_QDRANT_URL": "http://qdrant:6333",
                 "OM_MEMORY_MODEL": "gemini/gemini-2.5-flash"},
    "secrets": {"OM_KAFKA_SASL_PASSWORD": "s3cret", "OM_MEMORY_API_KEY": "key", "OM_CASSANDRA_PASSWORD": "pw",
                "OM_QDRANT_API_KEY": None},
    "memoryConfig": {"observation": {"messageTokens": 30000}, "reflection": {"observationTokens": 40000}},
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 50},
    "grafanaDashboards": {"enabled": True, "annotations": {"grafana_folder": "om-stream"}},
    "metrics": {"serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"release": "kube-prometheus"}}},
    "extraEnv": [{"name": "GEMINI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "gemini"}}}],
    "extraEnvFrom": [{"configMapRef": {"name": "corp-proxy"}}],
    "extraVolumes": [{"name": "corp-ca", "configMap": {"name": "corp-ca"}}],
    "extraVolumeMounts": [{"name": "corp-ca", "mountPath": "/etc/om-stream/ca", "readOnly": True}],
}
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "full": FULL,
    "existing-secret-no-volume": {"existingSecret": "om-credentials", "persistence": {"enabled": False},
                                  "podDisruptionBudget": {"enabled": False}, "serviceAccount": {"create": False},
                                  "settings": {"OM_MEMORY_STORE": "sqlite", "OM_KAFKA_BOOTSTRAP": "kafka:9092"}},
    "keda-restricted-egress": {"autoscaling": {"enabled": True, "engine": "keda", "maxReplicas": 40},
                               "networkPolicy": {"api": {"namespaceSelector": {"matchLabels": {"team": "agents"}}},
                                                 "egress": {"restrict": True, "to": [
                                                     {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                                                      "ports": [{"port": 9092}, {"port": 9042}]}]}},
                               "apiAuth": {"generateToken": False, "allowUnauthenticated": True},
                               "staticMembership": {"enabled": False}, "affinity": {"podAntiAffinity": {
                                   "requiredDuringSchedulingIgnoredDuringExecution": [
                                       {"topologyKey": "kubernetes.io/hostname", "labelSelector": {
                                           "matchLabels": {"app.kubernetes.io/name": "om-stream"}}}]}}},
    # the worker split by role: a models Deployment scaled by KEDA on its group's lag, a recall Deployment by HPA
    "split-roles": {**{k: FULL[k] for k in ("settings", "secrets", "memoryConfig", "extraEnv", "extraEnvFrom",
                                            "extraVolumes", "extraVolumeMounts")},
                    "models": {"enabled": True, "autoscaling": {"enabled": True, "engine": "keda", "maxReplicas": 40},
                               "podAnnotations": {"team": "models"}},
                    "recall": {"enabled": True, "autoscaling": {"enabled": True}},
                    "networkPolicy": {"egress": {"restrict": True}}},
}


def _without_keda(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every KEDA autoscaler as hpa (helm lint cannot declare the keda.sh/v1alpha1 API)."""
    out = copy.deepcopy(values)
    for block in (out, out.get("models", {}), out.get("recall", {})):
        if block.get("autoscaling", {}).get("engine") == "keda":
            block["autoscaling"]["engine"] = "hpa"
    return out


def test_helm_lint(tools: Path, tmp_path: Path) -> None:
    # helm lint cannot declare API versions: the KEDA value sets (which require keda.sh/v1alpha1) are linted as hpa
    for name, given in VALUE_SETS.items():
        values = _without_keda(given)
        out = run([str(tools / "helm"), "lint", "--strict", str(CHART), "--kube-version", "1.34.0",
                    "-f", str(values_file(tmp_path, values))])
        assert out.returncode == 0, f"{name}:\n{out.stdout}\n{out.stderr}"


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_templates_pass_kubeconform(tools: Path, tmp_path: Path, name: str, kube: str) -> None:
    out = template(tools, tmp_path, VALUE_SETS[name], kube=kube, api_versions=[MONITORING, KEDA])
    assert out.returncode == 0, out.stderr
    checked = kubeconform(tools, out.stdout, kube)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    summary = checked.stdout.strip().splitlines()[-1]
    assert "Invalid: 0, Errors: 0, Skipped: 0" in summary, summary
    assert f"{len(manifests(out.stdout))} resources found" in summary


def test_kubeconform_really_checks_the_manifests(tools: Path, tmp_path: Path) -> None:
    """A misspelt field and a wrong type must fail: the schemas are applied, not skipped."""
    docs = manifests(template(tools, tmp_path, FULL, api_versions=[MONITORING]).stdout)
    statefulset = by_kind(docs, "StatefulSet")[0]
    assert kubeconform(tools, yaml.safe_dump(statefulset), "1.34.0").returncode == 0
    statefulset["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    assert kubeconform(tools, yaml.safe_dump(statefulset), "1.34.0").returncode != 0
    monitor = by_kind(docs, "ServiceMonitor")[0]
    monitor["spec"]["endpoints"][0]["interval"] = 15
    assert kubeconform(tools, yaml.safe_dump(monitor), "1.34.0").returncode != 0
    rule = by_kind(docs, "PrometheusRule")[0]
    rule["spec"]["groups"][0]["rules"][0]["for"] = 60
    assert kubeconform(tools, yaml.safe_dump(rule), "1.34.0").returncode != 0
    scaled = by_kind(manifests(template(tools, tmp_path, VALUE_SETS["keda-restricted-egress"],
                                        api_versions=[KEDA]).stdout), "ScaledObject")[0]
    assert kubeconform(tools, yaml.safe_dump(scaled), "1.34.0").returncode == 0
    scaled["spec"]["maxReplicas"] = 3  # the HPA's field name, not KEDA's (maxReplicaCount)
    assert kubeconform(tools, yaml.safe_dump(scaled), "1.34.0").returncode != 0


def test_defaults_render_a_statefulset_with_probes_volume_and_web_bind(tools: Path, tmp_path: Path) -> None:
    docs = manifests(template(tools, tmp_path, {}).stdout)
    assert {d["kind"] for d in docs} == {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget",
                                         "ServiceAccount", "Secret", "NetworkPolicy", "Job"}
    assert by_kind(docs, "ServiceMonitor") == [], "no ServiceMonitor without the monitoring.coreos.com/v1 API"
    assert by_kind(docs, "PrometheusRule") == [], "no PrometheusRule without the monitoring.coreos.com/v1 API"
    config = named(docs, "ConfigMap", "om-om-stream")["data"]
    assert config["OM_WORKER_WEB_HOST"] == "0.0.0.0"
    assert config["OM_WORKER_WEB_PORT"] == "6066"
    statefulset = by_kind(docs, "StatefulSet")[0]
    assert statefulset["spec"]["replicas"] == 2
    pod = statefulset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert config["OM_WORKER_TABLE_STORE"] == "rocksdb://", "the durable table store on the pod's volume"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/var/lib/om-stream"}
    assert statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert by_kind(docs, "PodDisruptionBudget")[0]["spec"]["maxUnavailable"] == 1
    assert "initContainers" not in pod, "migrations run once, in the hook Job, not in every pod"
    assert [j["metadata"]["name"] for j in by_kind(docs, "Job")] == ["om-om-stream-migrate"]
    secret = named(docs, "Secret", "om-om-stream")
    assert sorted(secret["data"]) == ["OM_WORKER_API_TOKEN"], "no secret value given: only the generated token"


def test_full_values_cap_the_hpa_at_the_partitions_and_add_monitor_dashboards_secret(tools: Path,
                                                                                    tmp_path: Path) -> None:
    docs = manifests(template(tools, tmp_path, FULL, api_versions=[MONITORING]).stdout)
    hpa = by_kind(docs, "HorizontalPodAutoscaler")[0]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 6), "maxReplicas is capped at OM_KAFKA_PARTITIONS"
    assert "replicas" not in by_kind(docs, "StatefulSet")[0]["spec"], "the HPA owns the replica count"
    monitor = by_kind(docs, "ServiceMonitor")[0]
    assert monitor["spec"]["endpoints"][0] == {"port": "metrics", "path": "/metrics", "interval": "15s",
                                               "scrapeTimeout": "10s"}
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    secret = named(docs, "Secret", "om-om-stream")
    assert sorted(secret["data"]) == ["OM_CASSANDRA_PASSWORD", "OM_KAFKA_SASL_PASSWORD", "OM_MEMORY_API_KEY",
                                      "OM_WORKER_API_TOKEN"]
    assert base64.b64decode(secret["data"]["OM_CASSANDRA_PASSWORD"]).decode() == "pw"
    config_maps = {c["metadata"]["name"]: c for c in by_kind(docs, "ConfigMap")}
    settings = config_maps["om-om-stream"]["data"]
    assert settings["OM_CASSANDRA_TLS"] == "true" and settings["OM_KAFKA_PARTITIONS"] == "6"
    assert "OM_KAFKA_SASL_PASSWORD" not in settings, "secrets never land in the ConfigMap"
    assert settings["OM_MEMORY_CONFIG_FILE"] == "/etc/om-stream/memory.yaml"
    memory = yaml.safe_load(config_maps["om-om-stream-memory"]["data"]["memory.yaml"])
    assert memory == {"observationalMemory": FULL["memoryConfig"]}
    dashboards = [c for c in config_maps.values() if c["metadata"]["labels"].get("grafana_dashboard") == "1"]
    shipped = {p.name: p.read_text() for p in (ROOT / "grafana" / "dashboards").glob("*.json")}
    assert {name: json.loads(text) for c in dashboards for name, text in c["data"].items()} == {
        name: json.loads(text) for name, text in shipped.items()}
    env_from = by_kind(docs, "StatefulSet")[0]["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert {"secretRef": {"name": "om-om-stream"}} in env_from


def test_existing_secret_is_referenced_and_not_rendered(tools: Path, tmp_path: Path) -> None:
    docs = manifests(template(tools, tmp_path, VALUE_SETS["existing-secret-no-volume"]).stdout)
    assert by_kind(docs, "Secret") == []
    statefulset = by_kind(docs, "StatefulSet")[0]
    assert "volumeClaimTemplates" not in statefulset["spec"]
    pod = statefulset["spec"]["template"]["spec"]
    assert {"secretRef": {"name": "om-credentials"}} in pod["containers"][0]["envFrom"]
    token = {e["name"]: e for e in pod["containers"][0]["env"]}["OM_WORKER_API_TOKEN"]
    assert token["valueFrom"] == {"secretKeyRef": {"name": "om-credentials", "key": "OM_WORKER_API_TOKEN"}}
    assert {"name": "data", "emptyDir": {}} in pod["volumes"]
    assert by_kind(docs, "Job") == [], "no Cassandra migrations for the SQLite store"


@pytest.mark.parametrize(("values", "complaint"), [
    ({"iamge": {"repository": "x"}}, "iamge"),
    ({"settings": {"OM_KAFKA_BOOTSTRAPP": "kafka:9092"}}, "OM_KAFKA_BOOTSTRAPP"),
    ({"settings": {"OM_CASSANDRA_READ_CONSISTENCY": "SOMETIMES"}}, "OM_CASSANDRA_READ_CONSISTENCY"),
    ({"settings": {"OM_KAFKA_PARTITIONS": [12]}}, "OM_KAFKA_PARTITIONS"),
    ({"settings": {"OM_WORKER_WEB_HOST": "127.0.0.1"}}, "OM_WORKER_WEB_HOST"),
    ({"secrets": {"OM_GEMINI_KEY": "x"}}, "OM_GEMINI_KEY"),
    ({"autoscaling": {"enabled": True, "maxReplica": 3}}, "maxReplica"),
    ({"autoscaling": {"engine": "cpu"}}, "engine"),
    ({"terminationGracePeriodSeconds": 60}, "terminationGracePeriodSeconds"),
    ({"probes": {"startup": {"failureThreshold": 90}}}, "failureThreshold"),
    ({"networkPolicy": {"api": {"podSelectr": {}}}}, "podSelectr"),
    ({"metrics": {"prometheusRule": {"alerts": {"OMConsumerGroupLag": {"for": "ten minutes"}}}}}, "for"),
    ({"apiAuth": {"generateTokens": True}}, "generateTokens"),
    ({"settings": {"OM_WORKER_ROLE": "models"}}, "OM_WORKER_ROLE"),
    ({"models": {"enabled": True, "autoscalng": {}}}, "autoscalng"),
    ({"recall": {"autoscaling": {"engine": "cpu"}}}, "engine"),
])
def test_values_schema_rejects_unknown_keys_and_bad_values(tools: Path, tmp_path: Path, values: dict[str, Any],
                                                           complaint: str) -> None:
    out = template(tools, tmp_path, values)
    assert out.returncode != 0
    assert complaint in out.stderr, out.stderr


def test_settings_and_secrets_map_one_to_one_to_settings_py() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    generated = chart_settings_schema()
    assert schema["properties"]["settings"] == generated["settings"], (
        "run `python -m om_stream.observability.settings_doc --sync-chart helm/om-stream/values.schema.json`")
    assert schema["properties"]["secrets"] == generated["secrets"]
    docs = settings_docs()
    assert set(schema["properties"]["secrets"]["properties"]) == {d.env for d in docs if d.secret}
    assert set(schema["properties"]["settings"]["properties"]) | set(CHART_MANAGED) == {
        d.env for d in docs if not d.secret}
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values["secrets"]) == {d.env for d in docs if d.secret}
    assert set(values["settings"]) <= set(schema["properties"]["settings"]["properties"])
