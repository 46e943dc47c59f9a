"""Real Apache Kafka and Apache Cassandra for development and tests, started from Maven Central jars, and Jaeger
(the tracing backend, built from the Go module proxy: ``jaeger.py``).

There is no Docker engine on the machines this project is built on, so the services run as local JVMs started by
this package: ``make services-up`` / ``make services-down`` (detached, remembered in a state file) and the
session-scoped pytest fixtures in ``tests/conftest.py`` (attached: they die with the test run).

Never imported by the om_stream runtime: this is a development tool.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from om_stream.devservices import cassandra, cassandra_cluster, jaeger, kafka
from om_stream.devservices.jvm import DevServiceError, JvmProcess, pid_alive, stop_pid

__all__ = ["DevServiceError", "RunningServices", "services_down", "services_up", "start_services", "state_file"]


@dataclass
class RunningServices:
    run_dir: Path
    kafka: kafka.KafkaNode | None = None
    cassandra: cassandra.CassandraNode | None = None
    cassandra_cluster: cassandra_cluster.CassandraCluster | None = None  # instead of ``cassandra``: several nodes
    jaeger: jaeger.JaegerNode | None = None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def processes(self) -> list[JvmProcess]:
        nodes = [self.kafka, self.cassandra, *(self.cassandra_cluster.nodes if self.cassandra_cluster else []),
                 self.jaeger]
        return [node.process for node in nodes if node is not None]

    def env(self) -> dict[str, str]:
        """The settings that point om-stream at these services (a cluster: every node, replication 3, its data
        center)."""
        env = {}
        if self.kafka is not None:
            env["OM_KAFKA_BOOTSTRAP"] = self.kafka.bootstrap
        if self.cassandra is not None:
            env["OM_CASSANDRA_HOSTS"] = self.cassandra.contact_point
        if self.cassandra_cluster is not None:
            env["OM_CASSANDRA_HOSTS"] = self.cassandra_cluster.hosts
            env["OM_CASSANDRA_REPLICATION_FACTOR"] = str(min(len(self.cassandra_cluster.nodes), 3))
            env["OM_CASSANDRA_LOCAL_DATACENTER"] = cassandra_cluster.DATACENTER
        if self.jaeger is not None:
            # not settings of om-stream: where the tests send spans (OTEL_EXPORTER_OTLP_ENDPOINT of a worker they
            # start) and read traces back
            env["OM_OTLP_ENDPOINT"] = self.jaeger.otlp_endpoint
            env["OM_OTLP_GRPC_ENDPOINT"] = self.jaeger.otlp_grpc_endpoint
            env["OM_JAEGER_QUERY"] = self.jaeger.query_url
        return env

    def stop(self) -> None:
        """Stop every process concurrently (Cassandra drains for a while), then delete the run folder."""
        threads = [threading.Thread(target=p.stop) for p in self.processes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shutil.rmtree(self.run_dir, ignore_errors=True)


def start_services(which: tuple[str, ...] = ("kafka", "cassandra", "jaeger"), *, detached: bool = False,
                   run_dir: Path | None = None, cassandra_nodes: int = 1) -> RunningServices:
    """Launch the requested services (from the calling thread) and wait for all of them in parallel; Cassandra as
    a cluster of ``cassandra_nodes`` nodes when more than one (``cassandra_cluster``).

    Failures are collected per service in ``errors`` (with the log tail) instead of raised, so a caller that only
    needs Kafka can still use it when Cassandra failed, and can report both.
    """
    base = run_dir or Path(tempfile.mkdtemp(prefix="om-stream-services-"))
    running = RunningServices(base)
    waiters: list[threading.Thread] = []

    def wait(name: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except DevServiceError as exc:
            running.errors[name] = str(exc)

    if "kafka" in which:
        try:
            running.kafka = kafka.start(base / "kafka", detached=detached)
            node_k = running.kafka
            waiters.append(threading.Thread(target=wait, args=("kafka", lambda: kafka.wait_ready(node_k))))
        except DevServiceError as exc:
            running.errors["kafka"] = str(exc)
    if "cassandra" in which and cassandra_nodes > 1:
        try:
            running.cassandra_cluster = cassandra_cluster.start(base / "cassandra", cassandra_nodes,
                                                                detached=detached)
            cluster = running.cassandra_cluster
            waiters.append(threading.Thread(target=wait, args=("cassandra",
                                                               lambda: cassandra_cluster.wait_ready(cluster))))
        except DevServiceError as exc:
            running.errors["cassandra"] = str(exc)
    elif "cassandra" in which:
        try:
            running.cassandra = cassandra.start(base / "cassandra", detached=detached)
            node_c = running.cassandra
            waiters.append(threading.Thread(target=wait, args=("cassandra", lambda: cassandra.wait_ready(node_c))))
        except DevServiceError as exc:
            running.errors["cassandra"] = str(exc)
    if "jaeger" in which:
        try:
            running.jaeger = jaeger.start(base / "jaeger", detached=detached)
            node_j = running.jaeger
            waiters.append(threading.Thread(target=wait, args=("jaeger", lambda: jaeger.wait_ready(node_j))))
        except DevServiceError as exc:
            running.errors["jaeger"] = str(exc)
    for t in waiters:
        t.start()
    for t in waiters:
        t.join()
    return running


def state_file() -> Path:
    default = Path(__file__).resolve().parents[2] / ".devservices" / "state.json"
    return Path(os.environ.get("OM_DEVSERVICES_STATE", default))


def services_up(cassandra_nodes: int = 1) -> dict[str, str]:
    """Start the services detached (Cassandra as a cluster of ``cassandra_nodes``) and remember them; returns the
    settings to export. Services already running are kept, whatever their shape."""
    path = state_file()
    if path.exists():
        state = json.loads(path.read_text())
        if all(pid_alive(pid) for pid in state["pids"]):
            return dict(state["env"])
        services_down()
    running = start_services(detached=True, cassandra_nodes=cassandra_nodes)
    if running.errors:
        running.stop()
        raise DevServiceError("\n\n".join(f"[{name}] {err}" for name, err in running.errors.items()))
    env = running.env()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run_dir": str(running.run_dir), "pids": [p.pid for p in running.processes],
                                "env": env}, indent=2))
    return env


def services_down() -> bool:
    """Stop what :func:`services_up` started. Returns False when nothing was running."""
    path = state_file()
    if not path.exists():
        return False
    state = json.loads(path.read_text())
    threads = [threading.Thread(target=stop_pid, args=(pid,)) for pid in state["pids"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shutil.rmtree(state["run_dir"], ignore_errors=True)
    path.unlink()
    return True
