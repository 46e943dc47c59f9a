"""Jaeger v2 as a development service: the tracing backend the tests send spans to and read traces back from.

The binary is built from the Go module proxy by ``infra/tools/install-jaeger.sh`` and cached under
``~/.cache/om-stream/tools`` (``OM_TOOLS_CACHE``); ``binary()`` runs the script when the cache has none. Jaeger v2
is an OpenTelemetry Collector distribution: it runs here with a configuration of its own (written into the run
folder) that keeps traces in memory and listens on loopback ports picked free, so that several runs share a machine:
OTLP over HTTP (``otlp_endpoint``, what ``OTEL_EXPORTER_OTLP_ENDPOINT`` names) and over gRPC
(``otlp_grpc_endpoint``), and the query service's HTTP API
(``query_url``: ``/api/traces/{id}``, ``/api/traces?service=...``; the UI's assets are not built in). Its own
telemetry is switched off (it would listen on 8888), and so is the query service's tracing of itself.

Never imported by the om_stream runtime: this is a development tool.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from om_stream.devservices.jvm import DevServiceError, JvmProcess, free_port, launch, tail

__all__ = ["JaegerNode", "binary", "start", "wait_ready"]

VERSION = "v1.75.0"  # the Go module's tag; its cmd/jaeger is Jaeger v2 (install-jaeger.sh's default)
READY_TIMEOUT_S = 60.0


@dataclass
class JaegerNode:
    process: JvmProcess
    run_dir: Path
    otlp_http_port: int
    otlp_grpc_port: int
    query_port: int

    @property
    def otlp_endpoint(self) -> str:
        """The OTLP/HTTP base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``; traces go to ``/v1/traces`` under it)."""
        return f"http://127.0.0.1:{self.otlp_http_port}"

    @property
    def otlp_grpc_endpoint(self) -> str:
        """The OTLP/gRPC endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` with ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``)."""
        return f"http://127.0.0.1:{self.otlp_grpc_port}"

    @property
    def query_url(self) -> str:
        return f"http://127.0.0.1:{self.query_port}"

    def stop(self, grace: float = 10.0) -> None:
        self.process.stop(grace)


def _repository() -> Path:
    return Path(__file__).resolve().parents[2]


def binary() -> Path:
    """The cached Jaeger binary, built by the install script first when the cache has none."""
    cache = Path(os.environ.get("OM_TOOLS_CACHE", Path.home() / ".cache" / "om-stream" / "tools"))
    cached = cache / f"jaeger-{VERSION}" / "jaeger"
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    script = _repository() / "infra" / "tools" / "install-jaeger.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False,
                          env={**os.environ, "JAEGER_VERSION": VERSION})
    found = [line.removeprefix("OM_JAEGER=") for line in done.stdout.splitlines() if line.startswith("OM_JAEGER=")]
    if done.returncode != 0 or not found:
        raise DevServiceError(f"install-jaeger.sh failed (rc={done.returncode}):\n{done.stderr[-3000:]}")
    return Path(found[-1])


def _config(otlp_http: int, otlp_grpc: int, query_http: int, query_grpc: int) -> str:
    # JSON is YAML: the collector reads either
    return json.dumps({
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"],
                                     "exporters": ["jaeger_storage_exporter"]}},
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
        },
        "extensions": {
            "jaeger_storage": {"backends": {"traces": {"memory": {"max_traces": 100_000}}}},
            # enable_tracing: the query service traces itself by default (to localhost:4317), into whatever listens
            "jaeger_query": {"storage": {"traces": "traces"}, "enable_tracing": False,
                             "http": {"endpoint": f"127.0.0.1:{query_http}"},
                             "grpc": {"endpoint": f"127.0.0.1:{query_grpc}"}},
        },
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{otlp_grpc}"},
                                             "http": {"endpoint": f"127.0.0.1:{otlp_http}"}}}},
        "processors": {"batch": {"timeout": "200ms"}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "traces"}},
    }, indent=2)


def start(run_dir: Path, *, detached: bool = False) -> JaegerNode:
    """Launch Jaeger on free loopback ports (from the calling thread: an attached process dies with it)."""
    executable = binary()
    run_dir.mkdir(parents=True, exist_ok=True)
    ports = [free_port() for _ in range(4)]
    while len(set(ports)) < 4:
        ports = [free_port() for _ in range(4)]
    otlp_http, otlp_grpc, query_http, query_grpc = ports
    config = run_dir / "jaeger.yaml"
    config.write_text(_config(otlp_http, otlp_grpc, query_http, query_grpc))
    process = launch("jaeger", [str(executable), "--config", str(config)], run_dir / "jaeger.log", detached=detached)
    return JaegerNode(process, run_dir, otlp_http, otlp_grpc, query_http)


def wait_ready(node: JaegerNode, timeout: float = READY_TIMEOUT_S) -> None:
    """Until the query API answers and the OTLP receiver takes a (empty) request."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        node.process.check_alive()
        try:
            with urllib.request.urlopen(f"{node.query_url}/api/services", timeout=2) as answer:
                answer.read()
            request = urllib.request.Request(f"{node.otlp_endpoint}/v1/traces", data=b"{}", method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=2) as answer:
                answer.read()
            return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.2)
    raise DevServiceError(f"jaeger not ready after {timeout:.0f}s ({last}); last lines of its log:\n"
                          f"{tail(node.process.log)}")
