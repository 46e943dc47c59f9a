"""Starting ``om-stream worker``: topics, store, app, then Faust's worker loop until a signal or a crash stops it.

* The content store is started (connected and checked: reachable, migrated) before any agent runs; a store that
  cannot start stops the worker with a message that says why and exit status 2, and so does a Kafka that refuses
  the credentials or the certificate, or where no broker answers. ``/healthz`` and ``/readyz`` never answer 200
  before that.
* Crash-only: an agent that crashes stops the whole process with exit status 1 (see ``liveness``), so the
  orchestrator starts a fresh one; Faust would otherwise restart the agent in place, and it may never consume.
* Settings are checked first, before the framework starts or anything connects; each refusal names the ``OM_*``
  variable and its value (never a secret), and the worker stops with exit status 3: settings that cannot be read;
  an HTTP API beyond loopback without ``OM_WORKER_API_TOKEN`` (and without ``OM_WORKER_ALLOW_UNAUTHENTICATED=true``);
  every setting that names a path, a host or a port (``preflight``: a missing data directory is created, a listener
  port another process holds is refused); the observationalMemory options. A metrics/probes address that cannot
  be bound when the listener starts (taken in the meantime) stops it with exit status 3 too.
* The metrics and probes listener (``probes``) starts before the content store and stops last.
* The topics are checked against the lifecycle settings before anything starts (``topics``): one that would keep
  erased data longer than they promise stops the worker with a line per breaking key and exit status 4. Local
  copies of the state table older than the tombstone window are then wiped (``local_state``).
* Every stop is bounded: a graceful stop (SIGTERM, SIGINT, a crash) that has not finished after
  ``worker.shutdown_timeout_s`` ends the process at once.
* A log line repeated in a burst (a broker or store that stays down) is written a few times a minute, with a count.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
from typing import Any, NoReturn

from pydantic import ValidationError
from pydantic_settings import SettingsError

from om_stream.client.security import KafkaConnectError
from om_stream.errors import ConfigError, LifecycleBreach, StorageError
from om_stream.observability.log_limits import limit_repeats
from om_stream.runtime.worker.app import Worker
from om_stream.runtime.worker.auth import exposure_refusal, is_loopback
from om_stream.runtime.worker.deps import build_deps, kafka_client_options
from om_stream.runtime.worker.faust_internals import SignalledWorker
from om_stream.runtime.worker.preflight import check, settings_refusals
from om_stream.runtime.worker.probes import ProbeServer
from om_stream.runtime.worker.roles import with_role
from om_stream.runtime.worker.topics import ensure_topics
from om_stream.settings import Settings, WorkerRole, unknown_settings

__all__ = ["EXIT_CRASHED", "EXIT_LIFECYCLE", "EXIT_REFUSED", "EXIT_STORE_UNUSABLE", "main", "run_worker"]

log = logging.getLogger(__name__)
EXIT_CRASHED = 1
EXIT_STORE_UNUSABLE = 2  # the content store or Kafka cannot be used at start-up
EXIT_REFUSED = 3  # settings refused (unsafe exposure, an unusable path, host or port, ...): nothing was started
EXIT_LIFECYCLE = 4  # a topic (or the settings) would keep erased data longer than promised: nothing was started


async def _prepare(worker: Worker) -> None:
    settings = worker.deps.settings
    await ensure_topics(settings.kafka, settings.lifecycle, kafka_client_options(settings.kafka),
                        resource_scope=worker.deps.config.scope == "resource", internal=worker.internal_topics(),
                        changelogs=worker.changelogs(),
                        copartitioned=(settings.kafka.topic_context, settings.kafka.topic_context_index,
                                       settings.kafka.topic_context_blocks) if settings.context_wire == "v2" else ())
    if worker.plan.holds_table and worker.local_state is not None:
        worker.local_state.wipe_stale()  # before Faust opens any copy: see local_state.py


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
    """Run the worker until it stops, then end the process with its exit status (``_end_process``); returns only
    the status of a refusal (nothing started). ``worker``: an assembled one (tests)."""
    refusal = exposure_refusal(settings.worker)
    if refusal is not None:
        log.critical(refusal)
        return EXIT_REFUSED
    refusals = check(settings)
    if refusals:
        return _refuse(refusals)
    _warn_about(settings)
    try:
        held = worker or Worker(build_deps(settings))
    except ConfigError as exc:  # what only the assembly finds out (an unknown store, ...)
        return _refuse([exc])
    deadline = _Deadline(settings.worker.drain_timeout_s + settings.worker.shutdown_timeout_s)
    probes = ProbeServer(held, held.deps.metrics, host=settings.worker.metrics_host,
                         port=settings.worker.metrics_port)

    class OMWorker(SignalledWorker):
        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            # Faust's terminal spinner sets the root logger to DEBUG at WARNING and above, which makes every debug
            # call in aiokafka and Faust build a log record (~13 % of a busy worker's time): no spinner
            self.spinner = None
            limit_repeats(logger)

        async def on_execute(self) -> None:
            try:
                await probes.start()
            except OSError as exc:
                log.critical("the worker cannot listen for /metrics and the probes on %s:%d (%s); set "
                             "OM_WORKER_METRICS_HOST/OM_WORKER_METRICS_PORT to an address it may bind",
                             probes.host, probes.port, exc)
                deadline.arm("metrics address unusable", EXIT_REFUSED)
                raise SystemExit(EXIT_REFUSED) from None
            try:
                await held.deps.store.start()
            except StorageError as exc:
                log.critical("the content store cannot be used, so the worker stops: %s", exc)
                deadline.arm("content store unusable", EXIT_STORE_UNUSABLE)
                raise SystemExit(EXIT_STORE_UNUSABLE) from None
            log.info("content store ready (%s)", type(held.deps.store).__name__)
            # everything loaded so far (the libraries' modules, classes and schemas: most of the heap) lives as long
            # as the process: kept out of the collector's full passes, which otherwise scan it every few seconds
            # under load and stop every agent meanwhile (measured at 200 msgs/s: the longest pauses 84-90 ms
            # before, 41-51 ms after). What startup leaves as garbage stays: a few objects, once
            gc.freeze()

        async def on_stop(self) -> None:
            await held.drain()  # in-flight calls finish or are handed back while the consumer is in the group
            await super().on_stop()

        async def on_shutdown(self) -> None:
            await super().on_shutdown()
            held.deps.tracing.shutdown()  # the spans still buffered are exported (SIGKILL loses them)
            await probes.stop()  # last: the probes answer through the whole stop

        def on_stop_signal(self, signal: signal.Signals) -> None:
            deadline.arm(f"signal {signal.name}", 0)

        def on_worker_shutdown(self) -> None:
            deadline.arm("the worker stopped", 0)  # every way out (a crash Faust reports itself, too) is bounded
            super().on_worker_shutdown()

    try:
        asyncio.run(_prepare(held))
    except KafkaConnectError as exc:  # refused credentials or certificate, or no broker answered in time
        log.critical("Kafka cannot be used, so the worker stops: %s", exc)
        return EXIT_STORE_UNUSABLE
    except LifecycleBreach as exc:
        for problem in exc.problems:
            log.critical("%s", problem)
        log.critical("the worker refuses to start: erased data would outlive what the OM_LIFECYCLE_* settings "
                     "promise (exit status %d; docs/lifecycle.md)", EXIT_LIFECYCLE)
        return EXIT_LIFECYCLE
    except ConfigError as exc:  # topics that cannot carry the settings' contract (partition counts)
        log.critical("the worker refuses to start: %s", exc)
        return EXIT_REFUSED
    log.info("om-stream worker %s: HTTP API on %s:%d (%s)", settings.worker.app_id, settings.worker.web_host,
             settings.worker.web_port, "bearer token required" if settings.worker.api_token else "no token")
    # logs to stderr (line-buffered even when redirected), not stdout: a container must see them as they happen
    faust_worker = OMWorker(held.app, loglevel=settings.log_level.upper(), quiet=True, redirect_stdouts=False,
                            logfile=sys.stderr)

    stopping: list[asyncio.Future[None]] = []

    def fatal(exc: BaseException) -> None:
        deadline.arm("an agent crashed", EXIT_CRASHED)
        stopping.append(asyncio.ensure_future(_stop(faust_worker)))

    held.liveness.on_fatal(fatal)
    status = EXIT_CRASHED
    try:
        faust_worker.execute_from_commandline()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_CRASHED)
        status = max(code, deadline.status)
    except BaseException:
        log.critical("the worker failed", exc_info=True)
    return _end_process(status)


def main(role: WorkerRole | None = None) -> int:
    """``om-stream worker`` and ``python -m om_stream.runtime.worker``: the settings from the environment (``role``:
    ``--role``), logging at their level unless the caller configured it already, then ``run_worker``."""
    try:
        settings = with_role(Settings(), role)
    except (ValidationError, SettingsError) as exc:
        logging.basicConfig(format=_LOG_FORMAT)
        return _refuse(settings_refusals(exc))
    level = settings.log_level.upper()
    logging.basicConfig(level=level if isinstance(logging.getLevelName(level), int) else logging.INFO,
                        format=_LOG_FORMAT)
    return run_worker(settings)


_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def _refuse(refusals: list[ConfigError]) -> int:
    for refusal in refusals:
        log.critical("om-stream worker refuses to start: %s", refusal)
    log.critical("nothing was started: fix the setting%s above and start the worker again",
                 "s" if len(refusals) > 1 else "")
    return EXIT_REFUSED


def _end_process(status: int) -> NoReturn:
    """Ends the process now, logs flushed, without the interpreter's own shutdown: once Faust has closed its loop
    that shutdown joins non-daemon threads and then collects the heap module by module (with litellm loaded, seconds
    of CPU; many more on a busy node), and the deadline cannot cut it short, since a daemon thread (its timer) is
    stopped as soon as it needs the interpreter again. Every stop is thus bounded by drain + shutdown."""
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _warn_about(settings: Settings) -> None:
    """Settings that are allowed but likely wrong: names only, never values."""
    for name, closest in unknown_settings(os.environ).items():
        log.warning("%s is not an om-stream setting and is ignored%s", name,
                    f" (did you mean {closest}?)" if closest else "")
    worker = settings.worker
    if worker.api_token is None and not is_loopback(worker.web_host):
        log.warning("the HTTP API on %s accepts requests without a token (OM_WORKER_ALLOW_UNAUTHENTICATED=true): "
                    "anyone who reaches the port can read and change every thread's memory", worker.web_host)


async def _stop(faust_worker: Any) -> None:
    await faust_worker.stop()
