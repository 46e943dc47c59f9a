"""The Helm chart on a real Kubernetes API server (v1.34, built from source): install, upgrade, uninstall.

What templates and kubeconform accept, the server may still refuse (admission, immutable fields, RBAC, CRD
schemas). Each test installs a release in its own namespace with ``helm ... --wait``: the controller manager,
scheduler and kwok's fake nodes make pods Ready, so a release that cannot become healthy fails here. Objects are
read back through the API and compared with what ``helm template`` renders for the same server.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.deploy.kube_support import (
    CHART,
    VALUES,
    Helm,
    KubeAPI,
    Manifest,
    cluster_fixture,  # noqa: F401  (a session fixture)
    crds_fixture,  # noqa: F401  (a session fixture)
    helm_fixture,  # noqa: F401  (a session fixture)
    is_hook,
    kinds_and_names,
    kube_fixture,  # noqa: F401  (a session fixture)
    kube_tools_fixture,  # noqa: F401  (a session fixture)
    pods_of,
    release_objects,
    statefulset,
)

HOOK_DELETE = "helm.sh/hook-delete-policy"
RELEASE_NAME = "meta.helm.sh/release-name"


def _assert_release_on_server(kube: KubeAPI, rendered: list[Manifest], release: str, namespace: str) -> None:
    """Same kinds and names on the server as rendered; hooks present unless deleted on success."""
    expected = kinds_and_names([m for m in rendered if not is_hook(m)])
    assert release_objects(kube, rendered, release, namespace) == expected
    for hook in filter(is_hook, rendered):
        meta = hook["metadata"]
        kept = "hook-succeeded" not in (meta.get("annotations") or {}).get(HOOK_DELETE, "")
        found = kube.get(hook["apiVersion"], hook["kind"], meta["name"], namespace)
        assert (found is not None) == kept, f"hook {hook['kind']}/{meta['name']}: on server={found is not None}"


def _ready_workers(kube: KubeAPI, rendered: list[Manifest], namespace: str) -> Manifest:
    workers = statefulset(rendered)
    live = kube.get("apps/v1", "StatefulSet", workers["metadata"]["name"], namespace)
    assert live is not None
    status = live["status"]
    assert status["readyReplicas"] == live["spec"]["replicas"] == status["updatedReplicas"], status
    assert status["currentRevision"] == status["updateRevision"], status
    return live


def test_default_install_creates_every_rendered_object(helm: Helm, kube: KubeAPI) -> None:
    release, namespace = "om", "om-default"
    helm.install(release, namespace)
    rendered = helm.template(release, namespace, kube)

    _assert_release_on_server(kube, rendered, release, namespace)
    live = _ready_workers(kube, rendered, namespace)
    assert live["spec"]["replicas"] == 2
    pods = pods_of(kube, live, namespace)
    assert len(pods) == 2
    assert all(p["status"]["phase"] == "Running" and p["spec"]["nodeName"].startswith("kwok-node-") for p in pods)
    claims = kube.list("v1", "PersistentVolumeClaim", namespace)
    assert sorted(c["metadata"]["name"] for c in claims) == [f"data-{live['metadata']['name']}-{i}" for i in (0, 1)]
    assert {c["status"]["phase"] for c in claims} == {"Bound"}


def test_production_values_install_with_monitoring(helm: Helm, kube: KubeAPI, crds: dict[str, Path]) -> None:
    kube.apply_crds([crds["ServiceMonitor"], crds["PrometheusRule"]])
    release, namespace, values = "prod", "om-prod", VALUES / "production.yaml"
    helm.install(release, namespace, values)
    rendered = helm.template(release, namespace, kube, values)

    kinds = {m["kind"] for m in rendered}
    assert {"StatefulSet", "HorizontalPodAutoscaler", "ServiceMonitor", "Secret", "PodDisruptionBudget"} <= kinds
    if _chart_renders("PrometheusRule"):
        assert "PrometheusRule" in kinds
    assert "StatefulSet" in kinds
    _assert_release_on_server(kube, rendered, release, namespace)

    # the HPA owns replicas: the chart leaves them out (1 by default), the HPA controller raises them to its minimum
    workers = statefulset(rendered)
    assert "replicas" not in workers["spec"]
    name = workers["metadata"]["name"]

    def scaled_up() -> bool:
        live = kube.get("apps/v1", "StatefulSet", name, namespace)
        return live is not None and live["spec"]["replicas"] == 3 and live["status"].get("readyReplicas") == 3

    kube.wait_for("HPA scaled the workers to minReplicas=3", scaled_up, timeout_s=90)
    live = _ready_workers(kube, rendered, namespace)
    pods = pods_of(kube, live, namespace)
    assert len({p["spec"]["nodeName"] for p in pods}) == len(pods) == 3, "anti-affinity: one worker per node"
    worker = next(c for c in pods[0]["spec"]["containers"] if c["name"] == "worker")
    assert worker["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "3Gi"}}
    secret = kube.get("v1", "Secret", next(m["metadata"]["name"] for m in rendered if m["kind"] == "Secret"),
                      namespace)
    assert secret is not None
    assert "OM_QDRANT_API_KEY" in secret["data"]


def _chart_renders(kind: str) -> bool:
    return any(f"kind: {kind}" in path.read_text() for path in (CHART / "templates").glob("*.yaml"))


def test_upgrade_with_changed_values_rolls_the_pods(helm: Helm, kube: KubeAPI) -> None:
    release, namespace = "om", "om-upgrade"
    helm.install(release, namespace)
    before = _ready_workers(kube, helm.template(release, namespace, kube), namespace)
    old_pods = {p["metadata"]["uid"] for p in pods_of(kube, before, namespace)}

    values = VALUES / "upgrade.yaml"
    # a rolling update replaces the pods one at a time (under a second here since the local API server refuses
    # watch-list requests, see infra/kube/local_cluster.py; the timeout is for a loaded machine)
    helm.run("upgrade", release, str(CHART), "--namespace", namespace, "-f", str(values), "--wait",
             "--timeout", "600s", timeout_s=900)
    rendered = helm.template(release, namespace, kube, values)
    _assert_release_on_server(kube, rendered, release, namespace)
    after = _ready_workers(kube, rendered, namespace)

    assert after["spec"]["replicas"] == 3
    assert after["status"]["updateRevision"] != before["status"]["updateRevision"]
    pods = pods_of(kube, after, namespace)
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in pods} == {after["status"]["updateRevision"]}
    assert not old_pods & {p["metadata"]["uid"] for p in pods}, "every old pod was replaced"
    configs = {m["metadata"]["name"]: m for m in rendered if m["kind"] == "ConfigMap" and not is_hook(m)}
    live_data = {}
    for name, config in configs.items():
        live = kube.get("v1", "ConfigMap", name, namespace)
        assert live is not None
        assert live["data"] == config["data"]
        live_data.update(live["data"])
    assert live_data["OM_LOG_LEVEL"] == "debug"
    memory_files = [yaml.safe_load(text) for text in live_data.values() if "observationalMemory" in text]
    assert memory_files == [{"observationalMemory": yaml.safe_load(values.read_text())["memoryConfig"]}]


IMMUTABLE_STATEFULSET = (
    "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
    "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
    "forbidden"
)


def test_upgrade_touching_an_immutable_field_is_caught_by_a_server_dry_run(helm: Helm, kube: KubeAPI) -> None:
    """Which step catches a changed persistence.size: not the template, not helm's own dry run, the server's."""
    release, namespace, bigger = "om", "om-immutable", VALUES / "bigger-volume.yaml"
    helm.install(release, namespace)
    workers = statefulset(helm.template(release, namespace, kube))["metadata"]["name"]

    # template time: the chart cannot know the size a running release was created with, so it renders
    rendered = helm.template(release, namespace, kube, bigger)
    claim = statefulset(rendered)["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    # helm v3's --dry-run=server only lets templates look objects up; it never sends them to the server
    dry = helm.run("upgrade", release, str(CHART), "--namespace", namespace, "-f", str(bigger), "--dry-run=server")
    assert dry.returncode == 0

    # the pre-flight that does catch it: server-side apply with dryRun=All of every rendered object
    refused = {}
    for manifest in rendered:
        if is_hook(manifest):
            continue
        response = kube.server_dry_run(manifest, namespace)
        if not response.is_success:
            refused[(manifest["kind"], manifest["metadata"]["name"])] = (response.status_code, response.json())
    assert list(refused) == [("StatefulSet", workers)], refused
    code, status = refused[("StatefulSet", workers)]
    assert code == 422
    assert status["reason"] == "Invalid"
    assert IMMUTABLE_STATEFULSET in status["message"]

    # without the pre-flight the real upgrade is refused with the same words, and nothing changed
    upgrade = helm.run("upgrade", release, str(CHART), "--namespace", namespace, "-f", str(bigger), check=False)
    assert upgrade.returncode != 0
    assert IMMUTABLE_STATEFULSET in upgrade.stderr
    live = kube.get("apps/v1", "StatefulSet", workers, namespace)
    assert live is not None
    assert live["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "5Gi"


def test_uninstall_removes_every_object_but_the_claims(helm: Helm, kube: KubeAPI) -> None:
    release, namespace = "om", "om-uninstall"
    helm.install(release, namespace)
    rendered = helm.template(release, namespace, kube)
    workers = _ready_workers(kube, rendered, namespace)
    claims = sorted(c["metadata"]["name"] for c in kube.list("v1", "PersistentVolumeClaim", namespace))
    assert claims == [f"data-{workers['metadata']['name']}-{i}" for i in (0, 1)]

    helm.run("uninstall", release, "--namespace", namespace, "--wait", "--timeout", "300s", timeout_s=600)

    left = [(m["kind"], m["metadata"]["name"]) for m in rendered
            if kube.get(m["apiVersion"], m["kind"], m["metadata"]["name"], namespace) is not None]
    assert left == []
    # the garbage collector removes the pods once their StatefulSet is gone
    kube.wait_for("worker pods deleted", lambda: not pods_of(kube, workers, namespace))
    # StatefulSets never delete their claims unless asked to (persistentVolumeClaimRetentionPolicy: Retain)
    kept = kube.list("v1", "PersistentVolumeClaim", namespace)
    assert sorted(c["metadata"]["name"] for c in kept) == claims
    assert {c["status"]["phase"] for c in kept} == {"Bound"}
    assert all(RELEASE_NAME not in (c["metadata"].get("annotations") or {}) for c in kept)


def test_keda_option_installs_a_scaled_object_and_no_hpa(helm: Helm, kube: KubeAPI, crds: dict[str, Path]) -> None:
    kube.apply_crds([crds["ServiceMonitor"], crds["PrometheusRule"], crds["ScaledObject"]])
    release, namespace = "prod", "om-keda"
    values = (VALUES / "production.yaml", VALUES / "keda.yaml")
    helm.install(release, namespace, *values)
    rendered = helm.template(release, namespace, kube, *values)

    kinds = {m["kind"] for m in rendered}
    assert "ScaledObject" in kinds
    assert "HorizontalPodAutoscaler" not in kinds
    _assert_release_on_server(kube, rendered, release, namespace)
    scaled = next(m for m in rendered if m["kind"] == "ScaledObject")
    live = kube.get(scaled["apiVersion"], "ScaledObject", scaled["metadata"]["name"], namespace)
    assert live is not None
    # the CRD's structural schema kept every field the chart wrote (an unknown one would have been pruned)
    assert live["spec"] == scaled["spec"]
    _ready_workers(kube, rendered, namespace)
