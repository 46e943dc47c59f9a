"""Fixtures and helpers for the Helm chart on a real Kubernetes API server (tests/deploy/test_helm_cluster.py).

The session starts one local control plane (``infra/kube/local_cluster.py``: etcd, kube-apiserver, controller
manager, scheduler, kwok with fake Ready nodes) from binaries ``infra/tools/install-kube-tools.sh`` builds and
caches, and drives it with helm from ``infra/tools/install-helm-tools.sh``. A missing tool or a component that does
not come up fails the test with the script's or the component's log tail; nothing is skipped.

:class:`KubeAPI` reads objects back through the API's own discovery (kind -> resource), so a test compares what
``helm template`` renders with what the server really holds.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from infra.kube.local_cluster import ClusterStartError, KubeTools, LocalCluster

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "om-stream"
VALUES = Path(__file__).resolve().parent / "values"
INSTALL_KUBE = ROOT / "infra" / "tools" / "install-kube-tools.sh"
INSTALL_HELM = ROOT / "infra" / "tools" / "install-helm-tools.sh"
RELEASE_NAME_ANNOTATION = "meta.helm.sh/release-name"
RELEASE_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"
HOOK_ANNOTATION = "helm.sh/hook"
HOOK_DELETE_ANNOTATION = "helm.sh/hook-delete-policy"

Manifest = dict[str, Any]


def _install(script: Path) -> dict[str, Path]:
    """Run an install script (cached after the first run) and return its KEY=path lines."""
    out = subprocess.run(["bash", str(script)], check=False, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        pytest.fail(f"{script.name} failed ({out.returncode}):\n{out.stderr[-4000:]}", pytrace=False)
    pairs = (line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    return {key: Path(value) for key, value in pairs}


@dataclass(frozen=True)
class Resource:
    group_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{base}{scope}/{self.plural}" + (f"/{name}" if name else "")


class KubeAPI:
    """The admin's view of the local cluster, through the API server's discovery."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self._resources: dict[tuple[str, str], Resource] | None = None

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.cluster.request(method, path, **kwargs)

    def ok(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self.request(method, path, **kwargs)
        assert response.is_success, f"{method} {path} -> {response.status_code}: {response.text}"
        body: dict[str, Any] = response.json()
        return body

    @property
    def git_version(self) -> str:
        return str(self.ok("GET", "/version")["gitVersion"])

    def resources(self) -> dict[tuple[str, str], Resource]:
        if self._resources is None:
            found: dict[tuple[str, str], Resource] = {}
            versions = ["v1", *(v["groupVersion"] for g in self.ok("GET", "/apis")["groups"] for v in g["versions"])]
            for group_version in versions:
                base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
                for item in self.ok("GET", base)["resources"]:
                    if "/" not in item["name"]:
                        found[(group_version, item["kind"])] = Resource(group_version, item["kind"], item["name"],
                                                                        item["namespaced"])
            self._resources = found
        return self._resources

    def api_versions(self) -> list[str]:
        """What ``helm template --api-versions`` needs to see this server's capabilities."""
        resources = self.resources()
        return sorted({gv for gv, _ in resources} | {f"{gv}/{kind}" for gv, kind in resources})

    def resource(self, api_version: str, kind: str) -> Resource:
        try:
            return self.resources()[(api_version, kind)]
        except KeyError:
            raise AssertionError(f"the API server serves no {kind} in {api_version}") from None

    def get(self, api_version: str, kind: str, name: str, namespace: str | None) -> Manifest | None:
        response = self.request("GET", self.resource(api_version, kind).path(namespace, name))
        if response.status_code == 404:
            return None
        assert response.is_success, f"GET {kind}/{name} -> {response.status_code}: {response.text}"
        body: Manifest = response.json()
        return body

    def list(self, api_version: str, kind: str, namespace: str | None, selector: str | None = None) -> list[Manifest]:
        params = {"labelSelector": selector} if selector else {}
        items: list[Manifest] = self.ok("GET", self.resource(api_version, kind).path(namespace), params=params)["items"]
        return items

    def apply_crds(self, paths: Sequence[Path]) -> None:
        """Create (or keep) CRDs and wait until each is Established, then re-read discovery."""
        for path in paths:
            crd = yaml.safe_load(path.read_text())
            name = crd["metadata"]["name"]
            base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            response = self.request("POST", base, json=crd)
            assert response.status_code in (201, 409), f"CRD {name} refused: {response.status_code} {response.text}"
            deadline = time.monotonic() + 30
            while not self._established(self.ok("GET", f"{base}/{name}")):
                assert time.monotonic() < deadline, f"CRD {name} not Established within 30s"
                time.sleep(0.2)
        self._resources = None

    @staticmethod
    def _established(crd: Manifest) -> bool:
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    def server_dry_run(self, manifest: Manifest, namespace: str, manager: str = "helm") -> httpx.Response:
        """Server-side apply with dryRun=All: every admission and validation step, nothing persisted."""
        meta = manifest["metadata"]
        resource = self.resource(manifest["apiVersion"], manifest["kind"])
        return self.request("PATCH", resource.path(namespace, meta["name"]),
                            params={"dryRun": "All", "fieldManager": manager, "force": "true"},
                            headers={"Content-Type": "application/apply-patch+yaml"},
                            content=yaml.safe_dump(manifest).encode())

    def wait_for(self, what: str, done: Any, timeout_s: float = 60) -> None:
        """Poll an asynchronous controller effect (garbage collection, binding) until ``done()`` or fail."""
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f}s"
            time.sleep(0.25)


@dataclass(frozen=True)
class Helm:
    binary: Path
    kubeconfig: Path
    home: Path

    @cached_property
    def env(self) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig),
                "HELM_CACHE_HOME": str(self.home / "cache"), "HELM_CONFIG_HOME": str(self.home / "config"),
                "HELM_DATA_HOME": str(self.home / "data")}

    def run(self, *args: str, check: bool = True, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([str(self.binary), *args], check=False, capture_output=True, text=True,
                             env=self.env, timeout=timeout_s)
        if check and out.returncode != 0:
            pytest.fail(f"helm {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-4000:]}", pytrace=False)
        return out

    def install(self, release: str, namespace: str, *values: Path, extra: Sequence[str] = ()) -> None:
        self.run("install", release, str(CHART), "--namespace", namespace, "--create-namespace", "--wait",
                 "--timeout", "300s", *values_args(values), *extra, timeout_s=600)

    def template(self, release: str, namespace: str, kube: KubeAPI, *values: Path,
                 extra: Sequence[str] = ()) -> list[Manifest]:
        """Render offline, told this server's version and APIs, exactly as install would see them."""
        args = ["template", release, str(CHART), "--namespace", namespace, "--kube-version", kube.git_version,
                *values_args(values), *extra]
        for api in kube.api_versions():
            args += ["--api-versions", api]
        return [doc for doc in yaml.safe_load_all(self.run(*args).stdout) if doc]


def values_args(values: Sequence[Path]) -> list[str]:
    return [arg for path in values for arg in ("-f", str(path))]


def is_hook(manifest: Manifest) -> bool:
    return HOOK_ANNOTATION in (manifest["metadata"].get("annotations") or {})


def kinds_and_names(manifests: Sequence[Manifest]) -> set[tuple[str, str]]:
    return {(m["kind"], m["metadata"]["name"]) for m in manifests}


def release_objects(kube: KubeAPI, rendered: Sequence[Manifest], release: str, namespace: str) -> set[tuple[str, str]]:
    """Every object of the rendered kinds that the server says belongs to this Helm release."""
    found: set[tuple[str, str]] = set()
    for api_version, kind in {(m["apiVersion"], m["kind"]) for m in rendered if not is_hook(m)}:
        for item in kube.list(api_version, kind, namespace):
            annotations = item["metadata"].get("annotations") or {}
            if (annotations.get(RELEASE_NAME_ANNOTATION) == release
                    and annotations.get(RELEASE_NAMESPACE_ANNOTATION) == namespace):
                found.add((kind, item["metadata"]["name"]))
    return found


def statefulset(rendered: Sequence[Manifest]) -> Manifest:
    (workers,) = [m for m in rendered if m["kind"] == "StatefulSet"]
    return workers


def pods_of(kube: KubeAPI, workers: Manifest, namespace: str) -> list[Manifest]:
    labels = workers["spec"]["selector"]["matchLabels"]
    return kube.list("v1", "Pod", namespace, ",".join(f"{k}={v}" for k, v in sorted(labels.items())))


@pytest.fixture(scope="session", name="kube_tools")
def kube_tools_fixture() -> dict[str, Path]:
    return _install(INSTALL_KUBE)


@pytest.fixture(scope="session", name="cluster")
def cluster_fixture(kube_tools: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(KubeTools(kube_tools["OM_KUBE_TOOLS"]), tmp_path_factory.mktemp("kube") / "cluster")
    try:
        local.start()
    except ClusterStartError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="session", name="kube")
def kube_fixture(cluster: LocalCluster) -> KubeAPI:
    return KubeAPI(cluster)


@pytest.fixture(scope="session", name="helm")
def helm_fixture(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    binary = _install(INSTALL_HELM)["OM_HELM_TOOLS"] / "helm"
    return Helm(binary, cluster.kubeconfig(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session", name="crds")
def crds_fixture(kube_tools: dict[str, Path]) -> dict[str, Path]:
    """The CRD files by kind (ServiceMonitor, PrometheusRule, ScaledObject)."""
    found = {yaml.safe_load(p.read_text())["spec"]["names"]["kind"]: p
             for p in sorted(kube_tools["OM_KUBE_CRDS"].glob("*.yaml"))}
    missing = {"ServiceMonitor", "PrometheusRule", "ScaledObject"} - set(found)
    assert not missing, f"install-kube-tools.sh left no CRD for {sorted(missing)} in {kube_tools['OM_KUBE_CRDS']}"
    return found
