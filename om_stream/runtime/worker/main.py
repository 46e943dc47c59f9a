"""Starting ``om-stream worker``: topics, store, app, then Faust's worker loop until a signal stops it."""

from __future__ import annotations

import asyncio
import logging
import sys

from om_stream.runtime.worker.app import Worker
from om_stream.runtime.worker.deps import build_deps, kafka_client_options
from om_stream.runtime.worker.topics import ensure_topics
from om_stream.settings import Settings

__all__ = ["run_worker"]

log = logging.getLogger(__name__)


async def _prepare(worker: Worker) -> None:
    settings = worker.deps.settings
    await ensure_topics(settings.kafka, kafka_client_options(settings.kafka),
                        resource_scope=worker.deps.config.scope == "resource")


def run_worker(settings: Settings) -> int:
    from faust.worker import Worker as FaustWorker

    class QuietWorker(FaustWorker):
        """Faust's terminal spinner sets the root logger to DEBUG at WARNING and above, which makes every debug
        call in aiokafka and Faust build a log record (~13 % of a busy worker's time): no spinner."""

        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            self.spinner = None

    worker = Worker(build_deps(settings))
    asyncio.run(_prepare(worker))
    log.info("om-stream worker %s: HTTP on %s:%d", settings.worker.app_id, settings.worker.web_host,
             settings.worker.web_port)
    # logs to stderr (line-buffered even when redirected), not stdout: a container must see them as they happen
    faust_worker = QuietWorker(worker.app, loglevel=settings.log_level.upper(), quiet=True,
                               redirect_stdouts=False, logfile=sys.stderr)
    faust_worker.execute_from_commandline()
    return 0
