"""Apache Kafka 4.x in KRaft mode on 127.0.0.1, from Maven Central jars: one node, or a cluster of several.

Every node is a combined broker + controller with a static quorum (``controller.quorum.voters``). A node owns its
folder (config, data, logs) and its ports for its whole life, so it can be stopped (SIGTERM) or killed (SIGKILL)
and then restarted as the same broker, on the same bootstrap address, with its data::

    cluster = kafka.start_cluster(tmp_path / "kafka")      # 3 nodes, replication 3, min.insync.replicas 2
    kafka.wait_ready(cluster)                               # all answer, a controller, every broker registered
    cluster.nodes[0].kill()                                 # crash one node ...
    cluster.nodes[0].restart()                              # ... bring it back (call from the main thread)
    await kafka.wait_ready_async(cluster.nodes[0])          # from inside an event loop
    cluster.stop()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from om_stream.devservices.jvm import (
    DevServiceError,
    JvmProcess,
    class_path,
    free_port,
    infra_dir,
    java_binary,
    launch,
    tail,
)

READY_TIMEOUT_S = 120.0
HOST = "127.0.0.1"
SINGLE_JVM_OPTS = ("-Xms512m", "-Xmx512m")
# Three cluster nodes share a 2-core machine with Cassandra and several Python workers: a small heap (measured RSS
# 150-300 MB per node, no full GC, after 100k acks=all writes), and C1 only, which saves about 40% of the CPU a node
# burns while it boots (3 s instead of 5 s per node) for a slower steady state that test loads do not notice.
CLUSTER_JVM_OPTS = ("-Xms256m", "-Xmx384m", "-XX:TieredStopAtLevel=1")


@dataclass
class KafkaNode:
    """One broker + controller JVM; its ports live in ``run_dir/server.properties`` and never change."""

    process: JvmProcess
    bootstrap: str
    run_dir: Path
    node_id: int = 1
    jvm_opts: tuple[str, ...] = SINGLE_JVM_OPTS  # heap and JIT: kept for restarts
    detached: bool = False

    @property
    def config(self) -> Path:
        return self.run_dir / "server.properties"

    @property
    def running(self) -> bool:
        return self.process.popen.poll() is None

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM and wait: a controlled shutdown (leaderships handed over, logs flushed); SIGKILL after ``grace``."""
        self.process.stop(grace)

    def kill(self) -> None:
        """SIGKILL, no shutdown hooks: the broker finds an unclean shutdown (log recovery) when it restarts."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.popen.wait(timeout=10)

    def restart(self) -> None:
        """Launch the node again on its config, data and ports (no format); call :func:`wait_ready` next.

        Call it from the main thread when attached: the JVM's parent-death signal follows the launching thread.
        """
        if self.running:
            raise DevServiceError(f"kafka node {self.node_id} (pid {self.process.pid}) is still running")
        self.process = _launch(self.run_dir, self.jvm_opts, detached=self.detached)


@dataclass
class KafkaCluster:
    nodes: list[KafkaNode]
    cluster_id: str
    run_dir: Path

    @property
    def bootstrap(self) -> str:
        """Every node's address: a client that knows all of them survives any one being down."""
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM every running node at once; about 6 s, as the quorum leader waits 5 s for a successor in vain."""
        threads = [threading.Thread(target=n.stop, args=(grace,)) for n in self.nodes if n.running]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def cluster_id() -> str:
    """A KRaft cluster id: URL-safe base64 of a random UUID without padding, never starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def start(run_dir: Path, *, detached: bool = False, extra_config: str = "",
          format_args: Sequence[str] = ()) -> KafkaNode:
    """Format a fresh data folder and launch a single broker; call :func:`wait_ready` next.

    ``extra_config`` is appended to ``server.properties`` (a later key wins: it may replace the listeners, see
    ``devservices.secure``); ``format_args`` go to ``kafka-storage format`` (e.g. ``--add-scram``).
    """
    port, controller_port = _distinct_free_ports(2)
    _write_config(run_dir, node_id=1, port=port, controller_port=controller_port,
                  voters=f"1@{HOST}:{controller_port}", replication=1, min_isr=1)
    if extra_config:
        extra = extra_config.replace("@PORT@", str(port)).replace("@CONTROLLER_PORT@", str(controller_port))
        with (run_dir / "server.properties").open("a") as props:
            props.write("\n" + extra)
    _format([run_dir], cluster_id(), format_args)
    process = _launch(run_dir, SINGLE_JVM_OPTS, detached=detached)
    return KafkaNode(process, f"{HOST}:{port}", run_dir, 1, SINGLE_JVM_OPTS, detached)


def start_cluster(run_dir: Path, nodes: int = 3, *, detached: bool = False,
                  jvm_opts: tuple[str, ...] = CLUSTER_JVM_OPTS) -> KafkaCluster:
    """Format ``nodes`` folders (``run_dir/node-<id>``) with one cluster id and launch them; then :func:`wait_ready`.

    Replication is ``min(nodes, 3)`` for every topic (internal ones too) and acks=all needs ``min(2, replication)``
    in-sync replicas, so a three-node cluster keeps accepting acks=all writes with any one node down.
    """
    if nodes < 1:
        raise DevServiceError(f"a cluster needs at least one node, not {nodes}")
    ports = _distinct_free_ports(2 * nodes)
    listen = {i + 1: (ports[2 * i], ports[2 * i + 1]) for i in range(nodes)}
    voters = ",".join(f"{i}@{HOST}:{controller}" for i, (_, controller) in listen.items())
    replication = min(nodes, 3)
    dirs = {i: run_dir / f"node-{i}" for i in listen}
    for i, (port, controller) in listen.items():
        _write_config(dirs[i], node_id=i, port=port, controller_port=controller, voters=voters,
                      replication=replication, min_isr=min(2, replication))
    cid = cluster_id()
    _format(list(dirs.values()), cid)
    started: list[KafkaNode] = []
    try:
        for i, (port, _) in listen.items():
            process = _launch(dirs[i], jvm_opts, detached=detached)
            started.append(KafkaNode(process, f"{HOST}:{port}", dirs[i], i, jvm_opts, detached))
    except BaseException:
        KafkaCluster(started, cid, run_dir).stop(grace=5)
        raise
    return KafkaCluster(started, cid, run_dir)


def _distinct_free_ports(count: int) -> list[int]:
    # each port is free when drawn, but a later draw may return an earlier one: skip repeats
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _write_config(run_dir: Path, *, node_id: int, port: int, controller_port: int, voters: str,
                  replication: int, min_isr: int) -> None:
    data = run_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    props = (infra_dir() / "kafka" / "server.properties.in").read_text()
    for key, value in {"@NODE_ID@": node_id, "@VOTERS@": voters, "@PORT@": port,
                       "@CONTROLLER_PORT@": controller_port, "@DATA_DIR@": data,
                       "@REPLICATION@": replication, "@MIN_ISR@": min_isr}.items():
        props = props.replace(key, str(value))
    (run_dir / "server.properties").write_text(props)


def _logging_opts(run_dir: Path) -> list[str]:
    return [f"-Dkafka.logs.dir={run_dir / 'logs'}",
            f"-Dlog4j2.configurationFile={infra_dir() / 'kafka' / 'log4j2.properties'}"]


def _format(run_dirs: list[Path], cid: str, extra_args: Sequence[str] = ()) -> None:
    """Run kafka.tools.StorageTool on every folder at once (one short JVM each), all with the same cluster id."""
    lib = class_path("kafka")
    running: list[tuple[Path, subprocess.Popen[bytes]]] = []
    for run_dir in run_dirs:
        fmt_log = run_dir / "logs" / "format.log"
        with fmt_log.open("wb") as out:
            # C1 only and a serial GC: this JVM lives about a second and must not compete for the 2 cores
            argv = [java_binary(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                    *_logging_opts(run_dir), "-cp", f"{lib}/*", "kafka.tools.StorageTool", "format",
                    "--cluster-id", cid, "--config", str(run_dir / "server.properties"), "--ignore-formatted",
                    *extra_args]
            running.append((fmt_log, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL)))
    failures = []
    for fmt_log, popen in running:
        try:
            rc = popen.wait(timeout=120)
        except subprocess.TimeoutExpired:
            popen.kill()
            rc = popen.wait()
        if rc != 0:
            failures.append(f"kafka storage format failed (rc={rc}):\n{tail(fmt_log)}")
    if failures:
        raise DevServiceError("\n\n".join(failures))


def _launch(run_dir: Path, jvm_opts: tuple[str, ...], *, detached: bool) -> JvmProcess:
    logs = run_dir / "logs"
    argv = [java_binary(), *jvm_opts, "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true", *_logging_opts(run_dir), "-cp", f"{class_path('kafka')}/*",
            "kafka.Kafka", str(run_dir / "server.properties")]
    # stdout.log and server.log are appended to, so a restarted node's logs follow those of its previous life
    return launch("kafka", argv, logs / "stdout.log", detached=detached, log=logs / "server.log")


async def describe(bootstrap: str) -> dict[str, Any]:
    """The cluster as seen through ``bootstrap``: ``brokers`` (registered, unfenced), ``controller_id``, ..."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await admin.start()
        seen: dict[str, Any] = await admin.describe_cluster()
        return seen
    finally:
        await admin.close()


async def probe(bootstrap: str) -> None:
    """One metadata round trip through aiokafka's admin client."""
    await describe(bootstrap)


def _members(target: KafkaNode | KafkaCluster) -> list[KafkaNode]:
    return target.nodes if isinstance(target, KafkaCluster) else [target]


async def _not_ready(target: KafkaNode | KafkaCluster) -> str | None:
    """Why ``target`` is not ready yet, or None: every node answers, and sees a controller and all of them."""
    nodes = _members(target)
    expected = {n.node_id for n in nodes}
    for node in nodes:
        node.process.check_alive()
        try:
            seen = await describe(node.bootstrap)
        except Exception as exc:  # noqa: BLE001 - connection refused while the JVM boots; retried until the deadline
            return f"node {node.node_id} at {node.bootstrap}: {exc!r}"
        brokers = {b["node_id"] for b in seen["brokers"]}
        if seen.get("controller_id", -1) in (None, -1) or not expected <= brokers:
            return f"node {node.node_id} sees brokers {sorted(brokers)}, controller {seen.get('controller_id')}"
    return None


@contextlib.contextmanager
def _quiet_aiokafka() -> Iterator[None]:
    # aiokafka logs every refused connection at ERROR while a JVM boots; that is expected here
    quiet = logging.getLogger("aiokafka")
    previous = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        quiet.setLevel(previous)


async def wait_ready_async(target: KafkaNode | KafkaCluster, timeout: float = READY_TIMEOUT_S) -> None:
    """Wait until every node of ``target`` answers and the cluster has a controller and all of them registered."""
    deadline = time.monotonic() + timeout
    reason: str | None = "not probed"
    with _quiet_aiokafka():
        while time.monotonic() < deadline:
            reason = await _not_ready(target)
            if reason is None:
                return
            await asyncio.sleep(0.5)  # poll interval: the JVM gives no readiness signal to wait on
    logs = "\n".join(f"--- last lines of {log}:\n{tail(log)}"
                     for log in (n.run_dir / "logs" / "server.log" for n in _members(target)))
    raise DevServiceError(f"kafka not ready after {timeout:.0f}s ({reason})\n{logs}")


def wait_ready(target: KafkaNode | KafkaCluster, timeout: float = READY_TIMEOUT_S) -> None:
    """Blocking :func:`wait_ready_async`, for callers outside an event loop (fixtures, ``make services-up``)."""
    asyncio.run(wait_ready_async(target, timeout))

