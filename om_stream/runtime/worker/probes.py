"""The worker's second listener (``worker.metrics_host``:``worker.metrics_port``, 6067): Prometheus and the probes.

It is a plain aiohttp server of its own, started before the content store and the Faust app and stopped after
them, so it answers while the store connects and the state table recovers. No auth: it serves no thread data and
takes no command, so probes and scrapers need no secret (the ``/v1/*`` API is on the other port).

GET /healthz   startup: 200 once the state table is recovered, no rebalance is under way, and the worker is live;
               a models or recall worker has no table: 200 once its consumer joined its group. The body names the
               worker's ``role``
GET /readyz    readiness: 200 once the table was recovered after start (it stays 200 through later rebalances:
               this pod can still answer for the threads it holds) while the worker is live
GET /livez     liveness: 200 while no agent has crashed and no partition is stalled, or the stall is a content-store
               outage's within ``worker.store_outage_budget_s`` (then ``waiting`` says which store, why, what waits)
GET /metrics   Prometheus text format
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from om_stream.observability.metrics import Metrics
from om_stream.runtime.worker.faust_internals import recovery_completed
from om_stream.runtime.worker.liveness import Liveness

__all__ = ["ProbeServer", "Probed"]

log = logging.getLogger(__name__)


class Probed(Protocol):
    """What the probes read of the worker (which has all of it; this module never imports it)."""

    @property
    def app(self) -> Any: ...  # the Faust app: its recovery state

    @property
    def liveness(self) -> Liveness: ...

    @property
    def ready(self) -> bool: ...  # recovered, no rebalance, live

    @property
    def role(self) -> str: ...  # what the process runs (``roles``): all, memory, models or recall

    @property
    def draining(self) -> bool: ...  # a graceful stop began (SIGTERM): no new input or call is taken


class ProbeServer:
    def __init__(self, worker: Probed, metrics: Metrics, *, host: str, port: int) -> None:
        self.worker = worker
        self.metrics = metrics
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    def started(self) -> bool:
        """The state table was recovered once since the process started (Faust never clears this event)."""
        return recovery_completed(self.worker.app)

    async def start(self) -> None:
        """Listen; an address that cannot be bound raises ``OSError``."""
        application = web.Application()
        application.router.add_get("/healthz", self._healthz)
        application.router.add_get("/readyz", self._readyz)
        application.router.add_get("/livez", self._livez)
        application.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(application, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("metrics and probes on %s:%d (/metrics, /healthz, /readyz, /livez)", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def _dead(self) -> web.Response:
        return web.json_response({"status": "dead", "reasons": self.worker.liveness.reasons()}, status=503)

    async def _healthz(self, request: web.Request) -> web.Response:
        role = self.worker.role
        if self.worker.ready:
            return web.json_response({"status": "ready", "role": role})
        if not self.worker.liveness.live:
            return web.json_response({"status": "dead", "role": role, "reasons": self.worker.liveness.reasons()},
                                     status=503)
        return web.json_response({"status": "starting", "role": role,
                                  "in_recovery": bool(self.worker.app.in_recovery)}, status=503)

    async def _readyz(self, request: web.Request) -> web.Response:
        if not self.worker.liveness.live:
            return self._dead()
        if self.worker.draining:
            return web.json_response({"status": "draining"}, status=503)
        if self.started():
            return web.json_response({"status": "ready", "rebalancing": not self.worker.ready})
        return web.json_response({"status": "starting"}, status=503)

    async def _livez(self, request: web.Request) -> web.Response:
        if self.worker.liveness.live:
            waiting = self.worker.liveness.waiting()  # a store outage within its budget
            return web.json_response({"status": "live", **({"waiting": waiting} if waiting else {})})
        return self._dead()

    async def _metrics(self, request: web.Request) -> web.Response:
        # OpenMetrics to a scraper that asks for it (Prometheus does): only it carries the histograms' exemplars (the
        # traces behind latencies); the classic text format otherwise. The exposition content type carries
        # parameters, which aiohttp accepts only as a plain header
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        return web.Response(body=encode(self.metrics.registry), headers={"Content-Type": content_type})
