"""Rendering the Helm chart and reading what it renders, for the chart's contract tests: helm, kubeconform and the
schemas built and cached by ``infra/tools/install-helm-tools.sh`` (the ``tools`` fixture), a render with given
values, the objects of a kind or a name, what a container's process sees of its environment and mounts, the
alert rules and NOTES.txt."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "om-stream"
INSTALL = ROOT / "infra" / "tools" / "install-helm-tools.sh"
MONITORING = "monitoring.coreos.com/v1"
KEDA = "keda.sh/v1alpha1"


@pytest.fixture(scope="module")
def tools() -> Path:
    out = subprocess.run(["bash", str(INSTALL)], check=False, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        pytest.fail(f"install-helm-tools.sh failed:\n{out.stderr[-4000:]}", pytrace=False)
    return Path(out.stdout.strip().splitlines()[-1].split("=", 1)[1])


def run(args: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=False, capture_output=True, text=True, input=stdin, timeout=300)


def values_file(tmp: Path, values: dict[str, Any]) -> Path:
    path = tmp / f"values-{abs(hash(json.dumps(values, sort_keys=True)))}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def template(tools: Path, tmp: Path, values: dict[str, Any], *, kube: str = "1.34.0",
             api_versions: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    args = [str(tools / "helm"), "template", "om", str(CHART), "--namespace", "agents", "--kube-version", kube,
            "-f", str(values_file(tmp, values))]
    for api in api_versions:
        args += ["--api-versions", api]
    return run(args)


def manifests(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def kubeconform(tools: Path, text: str, kube: str) -> subprocess.CompletedProcess[str]:
    schemas = tools / "kubernetes-json-schema"
    return run([str(tools / "kubeconform"), "-strict", "-summary", "-output", "text", "-kubernetes-version", kube,
                "-schema-location",
                f"{schemas}/{{{{ .NormalizedKubernetesVersion }}}}-standalone{{{{ .StrictSuffix }}}}/"
                "{{ .ResourceKind }}{{ .KindSuffix }}.json",
                "-schema-location", f"{schemas}/crds/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_"
                                    "{{ .ResourceAPIVersion }}.json", "-"], stdin=text)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def render(tools: Path, tmp: Path, values: dict[str, Any], api_versions: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The manifests of a render that must succeed."""
    out = template(tools, tmp, values, api_versions=api_versions)
    assert out.returncode == 0, out.stderr
    return manifests(out.stdout)


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


FULL = "om-om-stream"
HOOK = "om-om-stream-migrate"


def worker_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(docs, "StatefulSet")[0]["spec"]["template"]["spec"]


def job_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return named(docs, "Job", HOOK)["spec"]["template"]["spec"]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def resolved_env(docs: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, Any]:
    """What the container's process sees, as far as the render decides it: envFrom ConfigMaps and Secrets of the
    render read out, explicit env after them (it wins); references to objects not rendered (the user's) kept."""
    rendered = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("ConfigMap", "Secret")}
    env: dict[str, Any] = {}
    for source in container.get("envFrom", []):
        kind, ref = ("ConfigMap", source["configMapRef"]) if "configMapRef" in source else ("Secret",
                                                                                            source["secretRef"])
        obj = rendered.get((kind, ref["name"]))
        if obj is None:
            env[f"<envFrom {kind} {ref['name']}>"] = ref
            continue
        for key, value in (obj.get("data") or {}).items():
            env[key] = base64.b64decode(value).decode() if kind == "Secret" else value
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        key_ref = item["valueFrom"].get("secretKeyRef")
        obj = rendered.get(("Secret", key_ref["name"])) if key_ref else None
        env[item["name"]] = (base64.b64decode(obj["data"][key_ref["key"]]).decode() if obj is not None
                             else item["valueFrom"])
    return env


def resolved_mounts(docs: list[dict[str, Any]], pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """mountPath -> (what is mounted: a rendered ConfigMap's data, or the volume source as written, read-only)."""
    config_maps = {d["metadata"]["name"]: d["data"] for d in by_kind(docs, "ConfigMap")}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {}
    for mount in container["volumeMounts"]:
        source = volumes.get(mount["name"], {"volumeClaimTemplate": mount["name"]})  # a StatefulSet's claim
        volume = {k: v for k, v in source.items() if k != "name"}
        if "configMap" in volume and volume["configMap"]["name"] in config_maps:
            volume = {"configMap data": config_maps[volume["configMap"]["name"]]}
        mounts[mount["mountPath"]] = (volume, mount.get("readOnly", False))
    return mounts


def rules_by_port(policy: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    return {port["port"]: rule["from"] for rule in policy["spec"]["ingress"] for port in rule["ports"]}


EVERYTHING: dict[str, Any] = {
    "settings": {"OM_KAFKA_BOOTSTRAP": "kafka:9093", "OM_KAFKA_SECURITY_PROTOCOL": "SSL",
                 "OM_KAFKA_SSL_CAFILE": "/etc/om-stream/ca/ca.crt", "OM_CASSANDRA_TLS": True},
    "secrets": {"OM_CASSANDRA_PASSWORD": "pw", "OM_KAFKA_SASL_PASSWORD": "kpw"},
    "memoryConfig": {"observation": {"messageTokens": 20000}},
    "extraEnv": [{"name": "GEMINI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "gemini"}}},
                 {"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
    "extraEnvFrom": [{"configMapRef": {"name": "corp-env"}}, {"secretRef": {"name": "corp-secrets"}}],
    "extraVolumes": [{"name": "corp-ca", "configMap": {"name": "corp-ca"}}],
    "extraVolumeMounts": [{"name": "corp-ca", "mountPath": "/etc/om-stream/ca", "readOnly": True}],
    "nodeSelector": {"pool": "om"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    "serviceAccount": {"annotations": {"iam.example/role": "om"}},
}


def alert_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for group in by_kind(docs, "PrometheusRule")[0]["spec"]["groups"] for r in group["rules"]]


def notes(tools: Path, tmp_path: Path, values: dict[str, Any]) -> str:
    """NOTES.txt as helm renders it after an install: a copy of the chart renders the same text in a ConfigMap
    (``helm template`` skips NOTES.txt, ``helm install --dry-run`` needs a cluster)."""
    chart = tmp_path / "chart"
    if not chart.exists():
        shutil.copytree(CHART, chart)
        text = (chart / "templates" / "NOTES.txt").read_text()
        (chart / "templates" / "_test_notes.tpl").write_text('{{- define "test.notes" -}}\n' + text + "{{- end }}\n")
        (chart / "templates" / "test-notes.yaml").write_text(
            'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: test-notes}\n'
            'data:\n  NOTES.txt: {{ include "test.notes" . | quote }}\n')
    notes_values = tmp_path / "notes-values.yaml"
    notes_values.write_text(yaml.safe_dump(values))
    out = subprocess.run([str(tools / "helm"), "template", "om", str(chart), "--namespace", "agents",
                          "--kube-version", "1.34.0", "--api-versions", MONITORING, "-f", str(notes_values),
                          "--show-only", "templates/test-notes.yaml"], check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return str(manifests(out.stdout)[0]["data"]["NOTES.txt"])
