"""Starting ``om-stream worker``: topics, store, app, then Faust's worker loop until a signal stops it."""

from __future__ import annotations

import asyncio
import logging

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

    worker = Worker(build_deps(settings))
    asyncio.run(_prepare(worker))
    log.info("om-stream worker %s: HTTP on %s:%d", settings.worker.app_id, settings.worker.web_host,
             settings.worker.web_port)
    faust_worker = FaustWorker(worker.app, loglevel=settings.log_level.upper(), quiet=True,
                               redirect_stdouts=False)
    faust_worker.execute_from_commandline()
    return 0
