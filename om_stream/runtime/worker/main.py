"""Starting ``om-stream worker``: topics, store, app, then Faust's worker loop until a signal or a crash stops it.

* The content store is started (connected and checked: reachable, migrated) before any agent runs; a store that
  cannot start stops the worker with a message that says why and exit status 2. The worker never answers
  ``/healthz`` before that.
* Crash-only: an agent that crashes stops the whole process with exit status 1 (see ``liveness``), so the
  orchestrator starts a fresh one; Faust would otherwise restart the agent in place, and it may never consume.
* Every stop is bounded: a graceful stop (SIGTERM, SIGINT, a crash) that has not finished after
  ``worker.shutdown_timeout_s`` ends the process at once.
* A log line repeated in a burst (a broker or store that stays down) is written a few times a minute, with a count.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from typing import Any

from om_stream.errors import StorageError
from om_stream.observability.log_limits import limit_repeats
from om_stream.runtime.worker.app import Worker
from om_stream.runtime.worker.deps import build_deps, kafka_client_options
from om_stream.runtime.worker.topics import ensure_topics
from om_stream.settings import Settings

__all__ = ["EXIT_CRASHED", "EXIT_STORE_UNUSABLE", "run_worker"]

log = logging.getLogger(__name__)
EXIT_CRASHED = 1
EXIT_STORE_UNUSABLE = 2


async def _prepare(worker: Worker) -> None:
    settings = worker.deps.settings
    await ensure_topics(settings.kafka, kafka_client_options(settings.kafka),
                        resource_scope=worker.deps.config.scope == "resource")


class _Deadline:
    """Ends the process if a stop takes longer than ``timeout_s`` (armed once, by the first stop)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.status = 0
        self._timer: threading.Timer | None = None

    def arm(self, why: str, status: int) -> None:
        self.status = max(self.status, status)
        if self._timer is not None:
            return
        log.info("stopping (%s); at most %.0fs", why, self.timeout_s)

        def expire() -> None:
            log.critical("the worker did not stop within %.0fs (%s); exiting now", self.timeout_s, why)
            for handler in logging.getLogger().handlers:
                handler.flush()
            os._exit(self.status or EXIT_CRASHED)

        self._timer = threading.Timer(self.timeout_s, expire)
        self._timer.daemon = True
        self._timer.start()


def run_worker(settings: Settings, worker: Worker | None = None) -> int:
    """Run the worker until it stops; returns the process exit status. ``worker``: an assembled one (tests)."""
    from faust.worker import Worker as FaustWorker

    held = worker or Worker(build_deps(settings))
    deadline = _Deadline(settings.worker.shutdown_timeout_s)

    class OMWorker(FaustWorker):
        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            # Faust's terminal spinner sets the root logger to DEBUG at WARNING and above, which makes every debug
            # call in aiokafka and Faust build a log record (~13 % of a busy worker's time): no spinner
            self.spinner = None
            limit_repeats(logger)

        async def on_execute(self) -> None:
            try:
                await held.deps.store.start()
            except StorageError as exc:
                log.critical("the content store cannot be used, so the worker stops: %s", exc)
                deadline.arm("content store unusable", EXIT_STORE_UNUSABLE)
                raise SystemExit(EXIT_STORE_UNUSABLE) from None
            log.info("content store ready (%s)", type(held.deps.store).__name__)

        async def on_stop(self) -> None:
            await held.offsets.close()  # commits what was handled while the consumer is still in the group
            await super().on_stop()

        def _schedule_shutdown(self, signal: signal.Signals) -> None:
            deadline.arm(f"signal {signal.name}", 0)
            super()._schedule_shutdown(signal)

    asyncio.run(_prepare(held))
    log.info("om-stream worker %s: HTTP on %s:%d", settings.worker.app_id, settings.worker.web_host,
             settings.worker.web_port)
    # logs to stderr (line-buffered even when redirected), not stdout: a container must see them as they happen
    faust_worker = OMWorker(held.app, loglevel=settings.log_level.upper(), quiet=True, redirect_stdouts=False,
                            logfile=sys.stderr)

    stopping: list[asyncio.Future[None]] = []

    def fatal(exc: BaseException) -> None:
        deadline.arm("an agent crashed", EXIT_CRASHED)
        stopping.append(asyncio.ensure_future(_stop(faust_worker)))

    held.liveness.on_fatal(fatal)
    try:
        faust_worker.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_CRASHED)
        return max(code, deadline.status)
    return deadline.status


async def _stop(faust_worker: Any) -> None:
    await faust_worker.stop()
