"""Apache Cassandra 5.0 (one node, tuned for a 2-core test machine) on 127.0.0.1, from Maven Central jars.

A cluster of several nodes is ``cassandra_cluster``; it writes and launches its nodes with this module's
:func:`write_config` and :func:`launch_node`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from om_stream.devservices.jvm import (
    DevServiceError,
    JvmProcess,
    class_path,
    free_port,
    infra_dir,
    java_binary,
    launch,
    pid_alive,
    tail,
)

READY_TIMEOUT_S = 240.0
HOST = "127.0.0.1"
CommitlogSync = Literal["periodic", "group", "batch"]
_DIRS = ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "logs", "tmp")


@dataclass
class CassandraNode:
    process: JvmProcess
    host: str
    port: int
    run_dir: Path
    durable: bool = False  # schema changes logged, so they survive SIGKILL (a lone node: its commit log synced too)
    jvm_props: tuple[str, ...] = ()  # more -D options (kept for restarts)
    jvm_opts: tuple[str, ...] = ()  # heap and JIT options replacing the shared file's (kept for restarts)

    @property
    def contact_point(self) -> str:
        return f"{self.host}:{self.port}"


def start(run_dir: Path, *, detached: bool = False, commitlog_sync: CommitlogSync = "periodic",
          extra_yaml: str = "", jvm_props: Sequence[str] = ()) -> CassandraNode:
    """Write cassandra.yaml for fresh ports and launch CassandraDaemon; call :func:`wait_ready` next.

    ``extra_yaml`` is appended to cassandra.yaml (keys the template does not set: authentication, TLS, see
    ``devservices.secure``); ``jvm_props`` are more ``-D`` options for the JVM.

    ``commitlog_sync="periodic"`` (the test default) acknowledges writes before the commit log reaches the disk, and
    logs no schema change (``cassandra.unsafesystem``: fast DDL), so a node killed with SIGKILL may forget the last
    ~10 s of acknowledged writes and recent keyspaces; ``"group"`` or ``"batch"`` syncs before it acknowledges and
    logs schema changes (durable, a little slower): what a single node that must survive ``kill -9`` needs.
    """
    cql_port, storage_port = free_port(), free_port()
    write_config(run_dir, host=HOST, cql_port=cql_port, storage_port=storage_port,
                 seeds=f"{HOST}:{storage_port}", commitlog_sync=commitlog_sync, extra_yaml=extra_yaml)
    return launch_node(run_dir, HOST, cql_port, detached=detached, durable=commitlog_sync != "periodic",
                       jvm_props=tuple(jvm_props))


def write_config(run_dir: Path, *, host: str, cql_port: int, storage_port: int, seeds: str,
                 initial_token: int = 0, hints: bool = False, cluster_name: str = "om-stream-dev",
                 commitlog_sync: CommitlogSync = "periodic", extra_yaml: str = "") -> None:
    """``run_dir/cassandra.yaml`` from the template, and the folders it names. ``hints``: keep hints for replicas
    that are down (a lone node has none)."""
    for name in _DIRS:
        (run_dir / name).mkdir(parents=True, exist_ok=True)
    yaml = (infra_dir() / "cassandra" / "cassandra.yaml.in").read_text()
    for key, value in {"@RUN_DIR@": str(run_dir), "@CQL_PORT@": str(cql_port), "@STORAGE_PORT@": str(storage_port),
                       "@HOST@": host, "@SEEDS@": seeds, "@INITIAL_TOKEN@": str(initial_token),
                       "@HINTS@": "true" if hints else "false", "@CLUSTER_NAME@": cluster_name}.items():
        yaml = yaml.replace(key, value)
    if commitlog_sync != "periodic":
        yaml = re.sub(r"^commitlog_sync: periodic\n(commitlog_sync_period: .*\n)?",
                      f"commitlog_sync: {commitlog_sync}\n"
                      + ("commitlog_sync_group_window: 10ms\n" if commitlog_sync == "group" else ""),
                      yaml, flags=re.MULTILINE)
    (run_dir / "cassandra.yaml").write_text(yaml + (f"\n{extra_yaml}" if extra_yaml else ""))


def restart(node: CassandraNode, *, detached: bool = False) -> CassandraNode:
    """Launch Cassandra again on ``node``'s run dir, data and ports (after it stopped or was killed).

    The previous logs are kept with a ``.previous`` suffix, so :func:`wait_ready` waits for this start."""
    if pid_alive(node.process.pid):
        raise DevServiceError(f"cassandra (pid {node.process.pid}) is still running: stop it before a restart")
    logs = node.run_dir / "logs"
    for name in ("system.log", "stdout.log"):
        current = logs / name
        if current.exists():
            current.replace(logs / f"{name}.previous")
    return launch_node(node.run_dir, node.host, node.port, detached=detached, durable=node.durable,
                       jvm_props=node.jvm_props, jvm_opts=node.jvm_opts)


def launch_node(run_dir: Path, host: str, cql_port: int, *, detached: bool, durable: bool,
                jvm_props: tuple[str, ...] = (), jvm_opts: tuple[str, ...] = ()) -> CassandraNode:
    """Launch CassandraDaemon on the configuration :func:`write_config` left in ``run_dir``. ``jvm_opts`` follow
    the shared option file, so a heap size there replaces its own (the last ``-Xmx`` wins)."""
    lib = class_path("cassandra")
    home = infra_dir() / "cassandra"
    config = run_dir / "cassandra.yaml"
    jamm = next(lib.glob("*jamm-*.jar"), None)
    agent = [f"-javaagent:{jamm}"] if jamm else []
    argv = [
        java_binary(), f"@{home / 'jvm17.args'}", *jvm_opts, *agent,
        f"-Djna.tmpdir={run_dir / 'tmp'}",
        f"-Dcassandra.config=file://{config}",
        f"-Dcassandra.storagedir={run_dir}",
        f"-Dcassandra.logdir={run_dir / 'logs'}",
        f"-Dlogback.configurationFile={home / 'logback.xml'}",
        "-Dcassandra-foreground=yes",  # otherwise the daemon closes stdout/stderr
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        # no blocking flush of schema tables after each DDL: fast CREATE/DROP, but schema is lost on SIGKILL
        *([] if durable else ["-Dcassandra.unsafesystem=true"]),
        *jvm_props,
        "-cp", f"{lib}/*", "org.apache.cassandra.service.CassandraDaemon",
    ]
    process = launch("cassandra", argv, run_dir / "logs" / "stdout.log", detached=detached,
                     log=run_dir / "logs" / "system.log")
    return CassandraNode(process, host, cql_port, run_dir, durable, jvm_props, jvm_opts)


def probe(host: str, port: int, connect: Mapping[str, Any] | None = None) -> str:
    """Connect with cassandra-driver and read the release version; ``connect``: more ``Cluster`` arguments
    (``auth_provider``, ``ssl_context``)."""
    from cassandra.cluster import Cluster

    cluster = Cluster([host], port=port, connect_timeout=5, control_connection_timeout=5,
                      schema_metadata_enabled=False, token_metadata_enabled=False, **dict(connect or {}))
    try:
        session = cluster.connect()
        row = session.execute("SELECT release_version FROM system.local").one()
        return str(row.release_version)
    finally:
        cluster.shutdown()


def wait_ready(node: CassandraNode, timeout: float = READY_TIMEOUT_S, *,
               connect: Mapping[str, Any] | None = None) -> None:
    """Wait for "Startup complete" and a query answered (``connect``: as for :func:`probe`)."""
    deadline = time.monotonic() + timeout
    system_log = node.run_dir / "logs" / "system.log"
    last: BaseException | None = None
    while time.monotonic() < deadline:
        node.process.check_alive()
        # cheap log check first: the driver's connect attempts are slow and noisy while the port is closed
        if system_log.exists() and "Startup complete" in system_log.read_text(errors="replace"):
            try:
                probe(node.host, node.port, connect)
                return
            except Exception as exc:  # noqa: BLE001 - NoHostAvailable / OperationTimedOut while the node settles
                last = exc
        time.sleep(0.5)
    raise DevServiceError(f"cassandra not ready after {timeout:.0f}s ({last!r}); last lines of {system_log}:\n"
                          f"{tail(system_log)}")
