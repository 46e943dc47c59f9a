"""Session-wide real services for tests: started once, in the background, as soon as collection shows a need.

``OM_KAFKA_BOOTSTRAP`` / ``OM_CASSANDRA_HOSTS`` / ``OM_JAEGER_QUERY`` (with ``OM_OTLP_ENDPOINT`` and
``OM_OTLP_GRPC_ENDPOINT``) point the tests at services that already run (``make services-up``); otherwise the
session starts its own Apache Kafka / Apache Cassandra from Maven Central jars, or Jaeger from the tools cache, and
stops them at the end. Jaeger's address is its OTLP/HTTP endpoint, its query URL and its OTLP/gRPC endpoint, space
separated. A service that cannot start fails every test that needs it with the service's log tail: nothing is
skipped.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from om_stream.devservices import cassandra, jaeger, kafka
from om_stream.devservices.jvm import DevServiceError, JvmProcess

ENV = {"kafka": "OM_KAFKA_BOOTSTRAP", "cassandra": "OM_CASSANDRA_HOSTS", "jaeger": "OM_JAEGER_QUERY"}


@dataclass(frozen=True)
class JaegerAddresses:
    otlp: str  # OTEL_EXPORTER_OTLP_ENDPOINT of what sends spans
    query: str  # the query service's HTTP API
    otlp_grpc: str = ""  # OTEL_EXPORTER_OTLP_ENDPOINT of what sends spans over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc)


@dataclass
class _Service:
    name: str
    address: str | None = None
    error: str | None = None
    process: JvmProcess | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    started_at: float = 0.0
    ready_after_s: float | None = None


class ServicePool:
    def __init__(self) -> None:
        self.run_dir = Path(tempfile.mkdtemp(prefix="om-stream-test-services-"))
        self.services: dict[str, _Service] = {}

    def start(self, names: set[str]) -> None:
        """Launch processes from this (main) thread; wait for readiness in background threads."""
        for name in sorted(names):
            if name in self.services:
                continue
            svc = self.services[name] = _Service(name, started_at=time.monotonic())
            external = os.environ.get(ENV[name])
            if external:
                otlp, grpc = os.environ.get("OM_OTLP_ENDPOINT", ""), os.environ.get("OM_OTLP_GRPC_ENDPOINT", "")
                svc.address = external if name != "jaeger" else f"{otlp} {external} {grpc}"
                svc.ready.set()
                continue
            try:
                if name == "jaeger":
                    node_j = jaeger.start(self.run_dir / "jaeger")
                    svc.process = node_j.process
                    threading.Thread(target=self._wait, args=(svc, partial(jaeger.wait_ready, node_j),
                                                               f"{node_j.otlp_endpoint} {node_j.query_url} "
                                                               f"{node_j.otlp_grpc_endpoint}"),
                                     daemon=True).start()
                elif name == "kafka":
                    node_k = kafka.start(self.run_dir / "kafka")
                    svc.process = node_k.process
                    threading.Thread(target=self._wait, args=(svc, partial(kafka.wait_ready, node_k),
                                                               node_k.bootstrap), daemon=True).start()
                else:
                    node_c = cassandra.start(self.run_dir / "cassandra")
                    svc.process = node_c.process
                    threading.Thread(target=self._wait, args=(svc, partial(cassandra.wait_ready, node_c),
                                                               node_c.contact_point), daemon=True).start()
            except DevServiceError as exc:
                svc.error = str(exc)
                svc.ready.set()

    @staticmethod
    def _wait(svc: _Service, wait: Callable[[], None], address: str) -> None:
        try:
            wait()
            svc.address = address
            svc.ready_after_s = time.monotonic() - svc.started_at
        except DevServiceError as exc:
            svc.error = str(exc)
        finally:
            svc.ready.set()

    def address(self, name: str) -> str:
        """Block until ``name`` is ready; raise with the service's log tail when it could not start."""
        if name not in self.services:
            self.start({name})
        svc = self.services[name]
        svc.ready.wait()
        if svc.error or not svc.address:
            raise DevServiceError(f"{name} is required by this test but could not start:\n{svc.error}")
        return svc.address

    def stop(self) -> None:
        threads = [threading.Thread(target=s.process.stop) for s in self.services.values() if s.process]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shutil.rmtree(self.run_dir, ignore_errors=True)
