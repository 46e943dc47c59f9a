"""Several Apache Cassandra 5.0 nodes on one machine, as one cluster: production's shape (replication 3) for tests.

Every node listens on a loopback address of its own (``127.A.B.1``, ``.2``, ``.3``: Linux routes all of 127/8 to
the loopback device without configuration) with the same ports, since a cluster's storage (gossip) port is one
for all its nodes. ``A.B`` are drawn at random and the ports are checked free on every address, so two clusters on
one machine do not meet. Every node is a seed with its own ``initial_token`` (one token each, evenly spread), so
all of them start at once and none bootstraps or streams. A node owns its folder (config, data, commit log,
hints, logs) for its whole life, so it can be stopped, killed and restarted on its data, or on an older copy of
it::

    cluster = cassandra_cluster.start(tmp_path / "cassandra")   # 3 nodes, hints kept for nodes that are down
    cassandra_cluster.wait_ready(cluster)                        # every node sees every other one up
    cluster.kill(2)                                              # SIGKILL the third node ...
    cluster.restart(2)                                           # ... start it again on its data
    cassandra_cluster.wait_ready(cluster)
    cluster.stop()

Readiness is what a LOCAL_QUORUM client needs, asked of the nodes themselves: every running node coordinates a
write that every running node must acknowledge (consistency ``ONE``/``TWO``/``THREE`` for as many running nodes)
to a keyspace replicated on all of them, so each has gossiped with the others and counts them alive; and all of
them report the same schema version, since a node back from a crash may lack schema changes for up to a minute and
a keyspace created meanwhile can be missing on it (docs/ci.md, 2026-12-07).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from om_stream.devservices import cassandra
from om_stream.devservices.jvm import DevServiceError, pid_alive, tail

__all__ = ["CLUSTER_JVM_OPTS", "DATACENTER", "CassandraCluster", "start", "wait_ready"]

READY_TIMEOUT_S = 300.0
# Three nodes share a 2-core machine with Kafka and the workers: a small fixed heap each (the memtables take a
# quarter of it; RSS about 0.9 GB a node once started), and C1 only, which halves the time three nodes take to start
# together (measured 39 s instead of 75 s on a busy 2-core machine) for a slower steady state that test loads do
# not notice.
CLUSTER_JVM_OPTS = ("-Xms512m", "-Xmx512m", "-XX:TieredStopAtLevel=1")
PROBE_KEYSPACE = "devservices_probe"
DATACENTER = "datacenter1"  # SimpleSnitch's one data center: what LOCAL_QUORUM counts replicas in
_LEVELS = {1: "ONE", 2: "TWO", 3: "THREE"}
# a node keeps the hints it writes in memory for up to hints_flush_period (10 s by default) before they are in a file,
# and only files are listed as pending: so many seconds with none listed mean none are held
HINTS_QUIET_S = 11.0


@dataclass
class CassandraCluster:
    nodes: list[cassandra.CassandraNode]
    run_dir: Path
    storage_port: int
    detached: bool = False
    down: set[int] = field(default_factory=set)  # nodes stopped or killed on purpose (not yet restarted)

    @property
    def hosts(self) -> str:
        """Every node's ``host:port``, comma separated (what ``OM_CASSANDRA_HOSTS`` takes)."""
        return ",".join(node.contact_point for node in self.nodes)

    def running(self) -> list[int]:
        """Indexes of the nodes meant to run (all but those stopped or killed on purpose)."""
        return [i for i in range(len(self.nodes)) if i not in self.down]

    def kill(self, index: int) -> None:
        """SIGKILL: no drain, no flush; the node replays its commit log when it restarts (periodic sync: the last
        seconds of acknowledged writes may be gone from it, as on a real crash, while its replicas hold them)."""
        self.down.add(index)
        process = self.nodes[index].process
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.popen.wait(timeout=30)

    def stop_node(self, index: int, grace: float = 60.0) -> None:
        """SIGTERM: the node drains (flushes its memtables, stops gossip), then exits; SIGKILL after ``grace``."""
        self.down.add(index)
        self.nodes[index].process.stop(grace)

    def restart(self, index: int) -> None:
        """Launch a stopped node again on its folder and address; call :func:`wait_ready` next (from the main
        thread when attached: the JVM's parent-death signal follows the launching thread)."""
        self.nodes[index] = cassandra.restart(self.nodes[index], detached=self.detached)
        self.down.discard(index)

    def data_dirs(self, index: int) -> list[Path]:
        """What a node persists: its sstables, commit log, saved caches and hints (not its config or logs)."""
        run_dir = self.nodes[index].run_dir
        return [run_dir / name for name in ("data", "commitlog", "saved_caches", "hints")]

    def stop(self, grace: float = 60.0) -> None:
        """SIGTERM every node still running at once and wait for all of them."""
        threads = [threading.Thread(target=node.process.stop, args=(grace,)) for node in self.nodes
                   if pid_alive(node.process.pid)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _free_on_all(hosts: list[str], count: int) -> list[int]:
    """``count`` distinct ports that every one of ``hosts`` can bind now."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as first:
            first.bind((hosts[0], 0))
            port = int(first.getsockname()[1])
        if port in ports:
            continue
        try:
            for host in hosts[1:]:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            continue
        ports.append(port)
    return ports


def _addresses(nodes: int) -> list[str]:
    # 127.0.0.x holds the shared development services; another cluster drawing the same A.B is also told apart by
    # its ports and its cluster name
    a, b = random.randint(1, 254), random.randint(1, 254)
    return [f"127.{a}.{b}.{i}" for i in range(1, nodes + 1)]


def _token(index: int, nodes: int) -> int:
    """Murmur3 tokens spread evenly: node ``index`` of ``nodes`` owns an equal share of the ring."""
    return -(2**63) + index * (2**64 // nodes)


def start(run_dir: Path, nodes: int = 3, *, detached: bool = False,
          jvm_opts: tuple[str, ...] = CLUSTER_JVM_OPTS) -> CassandraCluster:
    """Write every node's configuration (``run_dir/node-<n>``) and launch them all; then :func:`wait_ready`."""
    if nodes < 1:
        raise DevServiceError(f"a cluster needs at least one node, not {nodes}")
    hosts = _addresses(nodes)
    cql_port, storage_port = _free_on_all(hosts, 2)
    seeds = ",".join(f"{host}:{storage_port}" for host in hosts)
    name = f"om-stream-{uuid.uuid4().hex[:8]}"
    started: list[cassandra.CassandraNode] = []
    cluster = CassandraCluster(started, run_dir, storage_port, detached)
    try:
        for i, host in enumerate(hosts):
            folder = run_dir / f"node-{i + 1}"
            cassandra.write_config(folder, host=host, cql_port=cql_port, storage_port=storage_port, seeds=seeds,
                                   initial_token=_token(i, nodes), hints=nodes > 1, cluster_name=name)
            # durable: schema changes are written to disk (no cassandra.unsafesystem), so a node killed with SIGKILL
            # keeps the keyspaces it knew; forgetting them, it failed every request on them with INCOMPATIBLE_SCHEMA
            # once back. The commit log stays periodic, as production's: a killed node's replicas cover its last
            # seconds of writes
            started.append(cassandra.launch_node(folder, host, cql_port, detached=detached, durable=True,
                                                 jvm_opts=jvm_opts))
    except BaseException:
        cluster.stop(grace=5)
        raise
    return cluster


@contextlib.contextmanager
def _session(node: cassandra.CassandraNode) -> Iterator[Any]:
    """A driver session that talks to ``node`` alone (it coordinates every statement), shut down on leaving."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([node.host]), request_timeout=10)
    driver = Cluster([node.host], port=node.port, protocol_version=5, connect_timeout=5, control_connection_timeout=5,
                     execution_profiles={EXEC_PROFILE_DEFAULT: profile}, token_metadata_enabled=False)
    try:
        yield driver.connect()
    finally:
        driver.shutdown()


def _not_ready(cluster: CassandraCluster) -> str | None:
    """Why the running nodes are not yet all up in each other's eyes, or None."""
    from cassandra import ConsistencyLevel

    running = cluster.running()
    level = ConsistencyLevel.name_to_value[_LEVELS[min(len(running), 3)]]
    versions: dict[str, list[int]] = {}  # schema version -> the nodes that report it
    for i in running:
        node = cluster.nodes[i]
        log = node.run_dir / "logs" / "system.log"
        if not log.exists() or "Startup complete" not in log.read_text(errors="replace"):
            return f"node {i + 1} ({node.host}) is starting"
        try:
            with _session(node) as session:
                _probe(session, i, min(len(cluster.nodes), 3), level, versions)
        except Exception as exc:  # noqa: BLE001 - Unavailable / timeouts / refused while gossip settles
            return f"node {i + 1} ({node.host}): {type(exc).__name__}: {exc}"
    if len(versions) > 1:  # a node back from a crash pulls the schema changes it missed up to a minute later
        return "the nodes disagree on the schema: " + "; ".join(
            f"nodes {', '.join(map(str, nodes))} at {version}" for version, nodes in versions.items())
    return None


def _probe(session: Any, index: int, replicas: int, level: int, versions: dict[str, list[int]]) -> None:
    """Write node ``index``'s row through it at ``level``, and note the schema version it reports in ``versions``."""
    from cassandra.query import SimpleStatement

    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {PROBE_KEYSPACE} WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': {replicas}}}")
    session.execute(f"CREATE TABLE IF NOT EXISTS {PROBE_KEYSPACE}.seen (node int PRIMARY KEY, at timestamp)")
    session.execute(SimpleStatement(f"INSERT INTO {PROBE_KEYSPACE}.seen (node, at) VALUES (%s, toTimestamp(now()))",
                                    consistency_level=level), (index,))
    version = str(session.execute("SELECT schema_version FROM system.local").one()[0])
    versions.setdefault(version, []).append(index + 1)


def pending_hints(cluster: CassandraCluster) -> dict[int, int]:
    """The hint files each running node still holds for the others (``system_views.pending_hints``, which every node
    answers for itself), by node index; a node that holds none is left out."""
    pending: dict[int, int] = {}
    for i in cluster.running():
        node = cluster.nodes[i]
        with _session(node) as session:
            files = sum(int(row.files or 0) for row in session.execute("SELECT files FROM system_views.pending_hints"))
        if files:
            pending[i] = files
    return pending


def wait_hints_delivered(cluster: CassandraCluster, timeout: float = READY_TIMEOUT_S) -> float:
    """Wait until no running node has held a hint for another for :data:`HINTS_QUIET_S`; returns the seconds waited.
    A node back from a stop is sent its hints some seconds after the others see it up (in every node's dispatch
    round, 10 s apart). A schema change meanwhile races the hinted writes on the returning node: a keyspace dropped
    while they arrived failed its drop half-way on that node (``Unknown CF`` in its MigrationStage), which then never
    agreed on the schema with the others again (CI of c4ab8a7, docs/ci.md). Wait for this before a schema change."""
    began = time.monotonic()
    quiet_since: float | None = None
    while time.monotonic() - began < timeout:
        pending = pending_hints(cluster)
        now = time.monotonic()
        if pending:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= HINTS_QUIET_S:
            return now - began
        time.sleep(1.0)  # delivery gives no signal to wait on
    held = ", ".join(f"node {i + 1}: {files} file(s)" for i, files in sorted(pending.items()))
    raise DevServiceError(f"hints still undelivered after {timeout:.0f}s ({held or 'none for under the quiet time'})")


def wait_ready(cluster: CassandraCluster, timeout: float = READY_TIMEOUT_S) -> float:
    """Wait until every running node is up, counts every other running node alive and agrees with them on the
    schema; returns the seconds waited.
    A node that exits meanwhile fails it at once, with its log."""
    began = time.monotonic()
    reason: str | None = "not probed"
    while time.monotonic() - began < timeout:
        for i in cluster.running():
            cluster.nodes[i].process.check_alive()  # exited while it should run: its log says why
        reason = _not_ready(cluster)
        if reason is None:
            return time.monotonic() - began
        time.sleep(1.0)  # the nodes give no readiness signal to wait on
    logs = "\n".join(f"--- last lines of {log}:\n{tail(log)}"
                     for log in (n.run_dir / "logs" / "system.log" for n in cluster.nodes))
    raise DevServiceError(f"cassandra cluster not ready after {timeout:.0f}s ({reason})\n{logs}")
