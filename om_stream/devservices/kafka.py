"""Apache Kafka 4.x in KRaft mode (one combined broker + controller) on 127.0.0.1, from Maven Central jars."""

from __future__ import annotations

import asyncio
import base64
import logging
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

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


@dataclass
class KafkaNode:
    process: JvmProcess
    bootstrap: str
    run_dir: Path


def cluster_id() -> str:
    """A KRaft cluster id: URL-safe base64 of a random UUID without padding, never starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def start(run_dir: Path, *, detached: bool = False) -> KafkaNode:
    """Format a fresh data folder and launch the broker; call :func:`wait_ready` next."""
    lib = class_path("kafka")
    home = infra_dir() / "kafka"
    port, controller_port = free_port(), free_port()
    data, logs = run_dir / "data", run_dir / "logs"
    data.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    props = (home / "server.properties.in").read_text()
    for key, value in {"@DATA_DIR@": str(data), "@PORT@": str(port), "@CONTROLLER_PORT@": str(controller_port)}.items():
        props = props.replace(key, value)
    config = run_dir / "server.properties"
    config.write_text(props)
    java = java_binary()
    logging = [f"-Dkafka.logs.dir={logs}", f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}"]
    cp = ["-cp", f"{lib}/*"]
    fmt_log = logs / "format.log"
    with fmt_log.open("wb") as out:
        rc = subprocess.call(
            [java, "-Xmx256m", *logging, *cp, "kafka.tools.StorageTool", "format",
             "--cluster-id", cluster_id(), "--config", str(config), "--ignore-formatted"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=120,
        )
    if rc != 0:
        raise DevServiceError(f"kafka storage format failed (rc={rc}):\n{tail(fmt_log)}")
    argv = [java, "-Xms512m", "-Xmx512m", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
            "-Djava.awt.headless=true", *logging, *cp, "kafka.Kafka", str(config)]
    process = launch("kafka", argv, logs / "stdout.log", detached=detached, log=logs / "server.log")
    return KafkaNode(process, f"127.0.0.1:{port}", run_dir)


async def probe(bootstrap: str) -> None:
    """One metadata round trip through aiokafka's admin client."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
    try:
        await admin.start()
        await admin.describe_cluster()
    finally:
        await admin.close()


def wait_ready(node: KafkaNode, timeout: float = READY_TIMEOUT_S) -> None:
    # aiokafka logs every refused connection at ERROR while the JVM boots; that is expected here
    quiet = logging.getLogger("aiokafka")
    previous = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        _wait_ready(node, timeout)
    finally:
        quiet.setLevel(previous)


def _wait_ready(node: KafkaNode, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        node.process.check_alive()
        try:
            asyncio.run(probe(node.bootstrap))
            return
        except Exception as exc:  # noqa: BLE001 - connection refused while the JVM boots; retried until the deadline
            last = exc
        time.sleep(0.5)
    server_log = node.run_dir / "logs" / "server.log"
    raise DevServiceError(f"kafka not ready after {timeout:.0f}s ({last!r}); last lines of {server_log}:\n"
                          f"{tail(server_log)}")
