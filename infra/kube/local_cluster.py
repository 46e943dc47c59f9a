"""A throw-away Kubernetes control plane on loopback, for proving the Helm chart against a real API server.

It owns: a temp folder with etcd's data, a PKI made with openssl (a CA, the API server's serving certificate, the
service-account signing key pair), a token file with one identity per component, one kubeconfig per identity; and
the processes etcd, kube-apiserver (token auth, RBAC, ``--endpoint-reconciler-type=none``), kube-controller-manager,
kube-scheduler and kwok, each on free loopback ports, each logging to its own file. kwok plays the kubelet of a few
fake Ready nodes, so pods are scheduled and turn Ready (no container runs), and a pool of pre-provisioned
PersistentVolumes lets StatefulSet claims bind.

It never downloads anything (``infra/tools/install-kube-tools.sh`` builds the binaries) and never touches a port
or a file outside its folder. A component that does not come up raises :class:`ClusterStartError` with its log tail.

Run by hand: ``python infra/kube/local_cluster.py TOOLS_DIR`` starts one and prints the admin kubeconfig path; Ctrl-C
stops it and removes the folder.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from string import Template
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
KUBECONFIG_TEMPLATE = HERE / "kubeconfig.yaml.tmpl"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
ZONES = ("zone-a", "zone-b", "zone-c")
START_TIMEOUT_S = 60.0


class ClusterStartError(RuntimeError):
    """A component exited or did not become ready; the message carries its log tail."""


@dataclass(frozen=True)
class KubeTools:
    """Where install-kube-tools.sh put things."""

    bin_dir: Path  # kube-apiserver, kube-controller-manager, kube-scheduler, kwok, kwok-stages.yaml
    etcd: Path = Path("/usr/bin/etcd")

    def binary(self, name: str) -> Path:
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise ClusterStartError(f"{path} is missing: run infra/tools/install-kube-tools.sh")
        return path


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]
    token: str = field(default_factory=lambda: secrets.token_hex(16))


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(text[-lines:])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise ClusterStartError(f"openssl {' '.join(args)} failed:\n{out.stderr}")


def make_pki(pki: Path) -> None:
    """CA, API server certificate for 127.0.0.1/localhost/kubernetes.default.svc, service-account key pair."""
    pki.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=om-stream-test-ca", cwd=pki)
    (pki / "apiserver.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=pki)
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "apiserver.crt", "-days", "2", "-extfile", "apiserver.ext", cwd=pki)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


class LocalCluster:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok, started and stopped as one."""

    def __init__(self, tools: KubeTools, workdir: Path, *, nodes: int = 4, volumes: int = 24,
                 volume_size: str = "100Gi") -> None:
        self.tools = tools
        self.dir = workdir
        self.nodes = nodes
        self.volumes = volumes
        self.volume_size = volume_size
        self.api_port = free_port()
        self.server = f"https://127.0.0.1:{self.api_port}"
        self.admin = Identity("om-admin", ("system:masters",))
        self._identities = {
            "admin": self.admin,
            # the controller manager runs without per-controller service accounts, so it needs broad rights
            "controller-manager": Identity("system:kube-controller-manager", ("system:masters",)),
            # the scheduler runs as its real identity: RBAC's bootstrap roles must be enough for it
            "scheduler": Identity("system:kube-scheduler", ()),
            "kwok": Identity("kwok", ("system:masters",)),
        }
        self._components: list[Component] = []

    # -- paths --------------------------------------------------------------------------------------------------
    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    def kubeconfig(self, who: str = "admin") -> Path:
        return self.dir / f"{who}.kubeconfig"

    # -- lifecycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        make_pki(self.pki)
        self._write_identities()
        try:
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
            self._start_scheduler()
            self._start_kwok()
            self._add_nodes()
            self._add_volumes()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every component (newest first), then remove the folder."""
        for component in reversed(self._components):
            if component.process.poll() is None:
                component.process.send_signal(signal.SIGTERM)
                try:
                    component.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    component.process.kill()
                    component.process.wait(timeout=15)
        self._components.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> dict[str, str]:
        return {c.name: c.tail() for c in self._components}

    # -- identities ---------------------------------------------------------------------------------------------
    def _write_identities(self) -> None:
        rows = [f'{i.token},{i.user},{i.user},"{",".join(i.groups)}"' for i in self._identities.values()]
        tokens = self.pki / "tokens.csv"
        tokens.write_text("\n".join(rows) + "\n")
        tokens.chmod(0o600)
        template = Template(KUBECONFIG_TEMPLATE.read_text())
        for who, identity in self._identities.items():
            path = self.kubeconfig(who)
            path.write_text(template.substitute(server=self.server, ca_file=self.ca_file, user=identity.user,
                                                token=identity.token))
            path.chmod(0o600)

    # -- components ---------------------------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Component:
        log = self.dir / f"{name}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       cwd=self.dir, start_new_session=True, env={**os.environ, **(env or {})})
        component = Component(name, process, log)
        self._components.append(component)
        return component

    def _await(self, component: Component, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ClusterStartError(f"{component.name} exited with {component.process.returncode} before "
                                        f"{what}; log tail:\n{component.tail()}")
            try:
                if ready():
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.2)
        raise ClusterStartError(f"{component.name}: no {what} within {START_TIMEOUT_S:.0f}s; log tail:\n"
                                f"{component.tail()}")

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self._etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._spawn("etcd", [
            str(self.tools.etcd), "--name=om-local", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={self._etcd_url}", f"--advertise-client-urls={self._etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=om-local=http://127.0.0.1:{peer}", "--log-level=warn",
        ])
        self._await(etcd, lambda: httpx.get(f"{self._etcd_url}/health", timeout=2).json().get("health") == "true",
                    "healthy etcd")

    def _start_apiserver(self) -> None:
        pki = self.pki
        apiserver = self._spawn("kube-apiserver", [
            str(self.tools.binary("kube-apiserver")), f"--etcd-servers={self._etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--cert-dir={self.dir / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={self.ca_file}", f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none", "--profiling=false",
            # kwok's client asks for watch-list streams, which need etcd's RequestWatchProgress (3.4.31+; Debian
            # ships 3.4.23): the server ended each stream at once with an error, so kwok saw pods only when its
            # reflector listed again after a backoff, 10-47 s per pod change. Without the server's WatchList the
            # request itself is refused and the client falls back to a plain list and watch: a rolling update of
            # three pods went from 116-148 s to under a second.
            "--feature-gates=WatchList=false",
        ])
        self._await(apiserver, lambda: self.request("GET", "/readyz").status_code == 200, "/readyz 200")

    def _start_controller_manager(self) -> None:
        kubeconfig = self.kubeconfig("controller-manager")
        port = free_port()
        manager = self._spawn("kube-controller-manager", [
            str(self.tools.binary("kube-controller-manager")), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", f"--cert-dir={self.dir / 'kcm-certs'}",
            "--leader-elect=false", f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.ca_file}", "--profiling=false",
        ])
        # the service-account controller making "default" in kube-system proves the controllers run
        self._await(manager, lambda: self.request("GET", "/api/v1/namespaces/kube-system/serviceaccounts/default")
                    .status_code == 200, "default ServiceAccount in kube-system")

    def _start_scheduler(self) -> None:
        kubeconfig = self.kubeconfig("scheduler")
        port = free_port()
        scheduler = self._spawn("kube-scheduler", [
            str(self.tools.binary("kube-scheduler")), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={port}", "--leader-elect=false", "--profiling=false",
        ])
        self._await(scheduler, lambda: httpx.get(f"https://127.0.0.1:{port}/readyz", verify=False, timeout=2)
                    .status_code == 200, "/readyz 200")

    def _start_kwok(self) -> None:
        self._kwok = self._spawn("kwok", [
            str(self.tools.binary("kwok")), f"--kubeconfig={self.kubeconfig('kwok')}",
            f"--config={self.tools.bin_dir / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
            "--cidr=10.244.0.0/16", "--node-ip=10.0.0.1", f"--server-address=127.0.0.1:{free_port()}",
        ])

    def _add_nodes(self) -> None:
        for index in range(self.nodes):
            name = f"kwok-node-{index}"
            resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "500Gi"}
            self.create("/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {FAKE_NODE_ANNOTATION: "fake"},
                             "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "kwok",
                                        "topology.kubernetes.io/zone": ZONES[index % len(ZONES)]}},
                "status": {"capacity": resources, "allocatable": resources},
            })
        self._await(self._kwok, self._nodes_ready, f"{self.nodes} Ready nodes")

    def _nodes_ready(self) -> bool:
        items = self.request("GET", "/api/v1/nodes").json()["items"]
        ready = [n for n in items if any(c["type"] == "Ready" and c["status"] == "True"
                                         for c in n.get("status", {}).get("conditions", []))]
        return len(ready) == self.nodes

    def _add_volumes(self) -> None:
        """Pre-provisioned volumes (no provisioner runs here) for the StatefulSets' claims to bind to."""
        for index in range(self.volumes):
            self.create("/api/v1/persistentvolumes", {
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-pv-{index:03d}"},
                "spec": {"capacity": {"storage": self.volume_size}, "accessModes": ["ReadWriteOnce"],
                         "persistentVolumeReclaimPolicy": "Retain",
                         "hostPath": {"path": f"/var/lib/om-local/pv-{index:03d}"}},
            })

    # -- API access (admin) -------------------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.admin.token}", **kwargs.pop("headers", {})}
        return httpx.request(method, f"{self.server}{path}", headers=headers, verify=self._tls, timeout=30, **kwargs)

    @cached_property
    def _tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.request("POST", path, json=body)
        if response.status_code != 201:
            raise ClusterStartError(f"POST {path} -> {response.status_code}: {response.text}")
        result: dict[str, Any] = response.json()
        return result


@contextmanager
def running_cluster(tools: KubeTools, workdir: Path, **options: Any) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tools, workdir, **options)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: local_cluster.py TOOLS_DIR   (OM_KUBE_TOOLS printed by install-kube-tools.sh)", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="om-local-cluster-"))
    with running_cluster(KubeTools(Path(argv[0])), workdir) as cluster:
        print(f"KUBECONFIG={cluster.kubeconfig()}", flush=True)
        stop_signals = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        signal.sigwait(stop_signals)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
