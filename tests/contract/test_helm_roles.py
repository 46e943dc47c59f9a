"""The chart's worker split by role, on rendered manifests: with ``models``/``recall`` enabled the StatefulSet runs the
``memory`` role and Deployments run ``models`` and ``recall`` beside it, with the worker's environment, their own
scaling on their groups' lag, one scrape per pod and a metrics-only NetworkPolicy; with the defaults, one worker of
role ``all`` and nothing else (operations item o, after ``test_helm_operations.py``'s a to n).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.helm import (
    EVERYTHING,
    FULL,
    HOOK,
    KEDA,
    MONITORING,
    alert_rules,
    by_kind,
    env_of,
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

# -- o. worker roles ---------------------------------------------------------------------------------------------------

MODELS, RECALL = f"{FULL}-models", f"{FULL}-recall"
SPLIT: dict[str, Any] = {**EVERYTHING, "models": {"enabled": True}, "recall": {"enabled": True}}


def _pod_template(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return named(docs, kind, name)["spec"]["template"]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_o_defaults_run_one_worker_of_role_all_and_no_component(tools: Path, tmp_path: Path) -> None:
    docs = render(tools, tmp_path, {}, api_versions=[MONITORING, KEDA])
    assert env_of(worker_pod(docs)["containers"][0])["OM_WORKER_ROLE"] == {"name": "OM_WORKER_ROLE", "value": "all"}
    assert by_kind(docs, "Deployment") == []
    assert [s["metadata"]["name"] for s in by_kind(docs, "Service")] == [FULL, f"{FULL}-headless"]
    assert [p["metadata"]["name"] for p in by_kind(docs, "NetworkPolicy")] == [FULL]
    assert 'job="om-om-stream-headless"' in alert_rules(docs)[0]["expr"], "the default selector is unchanged"
    out = template(tools, tmp_path, {"recall": {"enabled": True}})
    assert out.returncode != 0 and "recall.enabled needs models.enabled" in out.stderr, out.stderr


@pytest.mark.parametrize("values", [SPLIT, {**SPLIT, "existingSecret": "om-creds"}],
                         ids=["everything", "existing-secret"])
def test_o_models_split_runs_memory_in_the_statefulset_and_models_in_a_deployment(tools: Path, tmp_path: Path,
                                                                                 values: dict[str, Any]) -> None:
    docs = render(tools, tmp_path, values)
    statefulset, pod = named(docs, "StatefulSet", FULL), worker_pod(docs)
    worker = pod["containers"][0]
    worker_env = resolved_env(docs, worker)
    assert worker_env.pop("OM_WORKER_ROLE") == "memory"
    assert worker_env.pop("OM_KAFKA_GROUP_INSTANCE_ID") == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert worker_env.pop("OM_WORKER_WEB_HOST") == "0.0.0.0", "the memory workers serve /v1"
    assert statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data", "the table's volume"
    for role, name in (("models", MODELS), ("recall", RECALL)):
        deployment = named(docs, "Deployment", name)
        template_ = deployment["spec"]["template"]
        spec = template_["spec"]
        container = spec["containers"][0]
        env = resolved_env(docs, container)
        assert env.pop("OM_WORKER_ROLE") == role
        assert env.pop("OM_WORKER_WEB_HOST") == "127.0.0.1", "no /v1 API: a loopback host passes the exposure check"
        assert "OM_KAFKA_GROUP_INSTANCE_ID" not in env, "no static membership: a Deployment's pod names change"
        # the same ConfigMap, Secret, extraEnvFrom and extraEnv, value by value (the token too)
        assert container["envFrom"] == worker["envFrom"]
        assert env == worker_env
        assert env_of(container)["HTTPS_PROXY"] == env_of(worker)["HTTPS_PROXY"]
        assert container["command"] == worker["command"] and container["image"] == worker["image"]
        # no table: no claim, the Faust data dir on a scratch volume; every other mount as the worker's
        assert "volumeClaimTemplates" not in deployment["spec"]
        mounts, worker_mounts = resolved_mounts(docs, spec, container), resolved_mounts(docs, pod, worker)
        assert mounts.pop("/var/lib/om-stream") == ({"emptyDir": {}}, False)
        assert worker_mounts.pop("/var/lib/om-stream") == ({"volumeClaimTemplate": "data"}, False)
        assert mounts == worker_mounts and "/etc/om-stream/ca" in mounts and "/etc/om-stream" in mounts
        # no /v1 API: the metrics port only, and the probes there, as the worker's
        assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [("metrics", 6067)]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe", "lifecycle"):
            assert container[probe] == worker[probe], probe
        assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
        assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "metrics"}
        assert spec["enableServiceLinks"] is False
        assert spec["terminationGracePeriodSeconds"] == pod["terminationGracePeriodSeconds"] == 95
        for key in ("securityContext", "nodeSelector", "tolerations", "serviceAccountName"):
            assert spec[key] == pod[key], key
        assert container["securityContext"] == worker["securityContext"]
        assert spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
            "podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
        # its own PDB, and none of the worker's selectors picks its pods (the StatefulSet's cannot change)
        labels = template_["metadata"]["labels"]
        assert _selects(deployment["spec"]["selector"]["matchLabels"], labels)
        pdb = named(docs, "PodDisruptionBudget", name)["spec"]
        assert _selects(pdb["selector"]["matchLabels"], labels) and pdb["maxUnavailable"] == 1
        assert not _selects(pdb["selector"]["matchLabels"], statefulset["spec"]["template"]["metadata"]["labels"])
        for kind, worker_selector in (
                ("StatefulSet", statefulset["spec"]["selector"]["matchLabels"]),
                ("Service", named(docs, "Service", FULL)["spec"]["selector"]),
                ("Service", named(docs, "Service", f"{FULL}-headless")["spec"]["selector"]),
                ("PodDisruptionBudget", named(docs, "PodDisruptionBudget", FULL)["spec"]["selector"]["matchLabels"]),
                ("NetworkPolicy", named(docs, "NetworkPolicy", FULL)["spec"]["podSelector"]["matchLabels"])):
            assert not _selects(worker_selector, labels), f"the worker's {kind} selects the {role} pods"
    annotations = _pod_template(render(tools, tmp_path, {**SPLIT, "podAnnotations": {"a": "1", "b": "1"},
                                                         "models": {"enabled": True, "podAnnotations": {"b": "2"}}}),
                                "Deployment", MODELS)["metadata"]["annotations"]
    assert (annotations["a"], annotations["b"]) == ("1", "2") and "checksum/config" in annotations


def test_o_models_scale_on_their_groups_lag_capped_at_the_partitions(tools: Path, tmp_path: Path) -> None:
    values = {"settings": {"OM_KAFKA_PARTITIONS": 8, "OM_WORKER_APP_ID": "om-prod", "OM_KAFKA_BOOTSTRAP": "k:9092",
                           "OM_KAFKA_TOPIC_MODEL_REQUESTS": "prod.model-requests"},
              "autoscaling": {"keda": {"authenticationRef": "kafka-auth"}},
              "models": {"enabled": True, "replicaCount": 30, "autoscaling": {
                  "enabled": True, "engine": "keda", "minReplicas": 2, "maxReplicas": 50, "keda": {"lagThreshold": 7}}},
              "recall": {"enabled": True, "autoscaling": {"enabled": True, "engine": "keda", "maxReplicas": 3}}}
    docs = render(tools, tmp_path, values, api_versions=[KEDA])
    assert by_kind(docs, "HorizontalPodAutoscaler") == [], "KEDA owns them: one autoscaler per workload"
    assert "replicas" not in named(docs, "Deployment", MODELS)["spec"]
    assert named(docs, "StatefulSet", FULL)["spec"]["replicas"] == 2, "the memory workers are not autoscaled here"
    scaled = {s["metadata"]["name"]: s["spec"] for s in by_kind(docs, "ScaledObject")}
    assert set(scaled) == {MODELS, RECALL}
    models = scaled[MODELS]
    assert models["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": MODELS}
    assert (models["minReplicaCount"], models["maxReplicaCount"]) == (2, 8), "capped at the partitions"
    trigger = models["triggers"][0]
    assert trigger["type"] == "kafka" and trigger["authenticationRef"] == {"name": "kafka-auth"}
    assert trigger["metadata"]["topic"] == "prod.model-requests"
    assert trigger["metadata"]["consumerGroup"] == "om-prod-models", "the models' group, not the memory workers'"
    assert trigger["metadata"]["lagThreshold"] == "7" and trigger["metadata"]["bootstrapServers"] == "k:9092"
    assert models["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"] == [
        {"type": "Pods", "value": 2, "periodSeconds": 60}]
    recall = scaled[RECALL]
    assert recall["triggers"][0]["metadata"]["topic"] == "om.recall.requests"
    assert recall["triggers"][0]["metadata"]["consumerGroup"] == "om-prod-recall"
    assert recall["maxReplicaCount"] == 3
    out = template(tools, tmp_path, values)
    assert out.returncode != 0 and "models.autoscaling.engine=keda" in out.stderr, "no silent fallback"
    docs = render(tools, tmp_path, {"models": {"enabled": True, "replicaCount": 30, "autoscaling": {
        "enabled": True, "maxReplicas": 40}}})
    assert named(docs, "Deployment", MODELS)["spec"].get("replicas") is None
    hpa = named(docs, "HorizontalPodAutoscaler", MODELS)["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": MODELS}
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 12)
    assert hpa["behavior"]["scaleDown"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 120}]
    fixed = render(tools, tmp_path, {"models": {"enabled": True, "replicaCount": 30}})
    assert named(fixed, "Deployment", MODELS)["spec"]["replicas"] == 12, "capped at the partitions"
    assert by_kind(fixed, "HorizontalPodAutoscaler") == []


@pytest.mark.parametrize("values", [{}, {"models": {"enabled": True}}, SPLIT], ids=["defaults", "models", "split"])
def test_o_each_pod_is_scraped_once_and_covered_by_the_alerts(tools: Path, tmp_path: Path,
                                                             values: dict[str, Any]) -> None:
    docs = render(tools, tmp_path, values, api_versions=[MONITORING])
    monitor = by_kind(docs, "ServiceMonitor")[0]["spec"]
    assert [e["port"] for e in monitor["endpoints"]] == ["metrics"]
    scraped = [s for s in by_kind(docs, "Service") if _selects(monitor["selector"]["matchLabels"],
                                                               s["metadata"]["labels"])]
    workloads = [d for d in docs if d["kind"] in ("StatefulSet", "Deployment")]
    assert len(workloads) == 1 + len([c for c in ("models", "recall") if values.get(c, {}).get("enabled")])
    lag = next(r for r in alert_rules(docs) if r["alert"] == "OMAgentCrashed")["expr"]
    matcher = re.search(r'job(=~?)"([^"]+)"', lag)
    assert matcher, lag
    for workload in workloads:
        pod = workload["spec"]["template"]
        through = [s for s in scraped if _selects(s["spec"]["selector"], pod["metadata"]["labels"])]
        assert len(through) == 1, f"{workload['metadata']['name']}: scraped through {len(through)} Services"
        port = {p["name"]: p for p in through[0]["spec"]["ports"]}["metrics"]
        assert port["targetPort"] == "metrics" and port["port"] == 6067
        assert "metrics" in {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
        assert through[0]["spec"]["publishNotReadyAddresses"] is True
        # Prometheus' job label is the Service's name: the alerts' selector must take it
        job = through[0]["metadata"]["name"]
        assert (re.fullmatch(matcher.group(2), job) if matcher.group(1) == "=~" else matcher.group(2) == job), job
    job_pod_labels = named(docs, "Job", HOOK)["spec"]["template"]["metadata"]["labels"]
    assert not [s for s in scraped if _selects(s["spec"]["selector"], job_pod_labels)]


def test_o_component_pods_admit_only_the_metrics_port_from_monitoring(tools: Path, tmp_path: Path) -> None:
    egress = [{"to": [{"ipBlock": {"cidr": "10.1.0.0/16"}}], "ports": [{"port": 9092}]}]
    docs = render(tools, tmp_path, {**SPLIT, "networkPolicy": {"egress": {"restrict": True, "to": egress},
                                                               "extraIngress": [{"from": [{"podSelector": {}}]}]}})
    worker_policy = named(docs, "NetworkPolicy", FULL)
    for name in (MODELS, RECALL):
        policy = named(docs, "NetworkPolicy", name)["spec"]
        labels = _pod_template(docs, "Deployment", name)["metadata"]["labels"]
        assert _selects(policy["podSelector"]["matchLabels"], labels)
        assert rules_by_port({"spec": policy}) == {6067: [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}}, "podSelector": {}}]}, "no API port, no extra ingress"
        assert policy["policyTypes"] == ["Ingress", "Egress"] and policy["egress"] == worker_policy["spec"]["egress"]
        assert policy["egress"][1:] == egress
    assert len(by_kind(render(tools, tmp_path, {**SPLIT, "networkPolicy": {"enabled": False}}), "NetworkPolicy")) == 0


def test_o_notes_name_the_split_and_the_unconsumed_recall_topic(tools: Path, tmp_path: Path) -> None:
    text = notes(tools, tmp_path, {"models": {"enabled": True}})
    assert f"Deployment {MODELS} runs role models (consumer group om-stream-models)" in text
    assert "StatefulSet runs role memory" in text and "no pod consumes om.recall.requests" in text
    assert "runs role" not in notes(tools, tmp_path / "defaults", {})
