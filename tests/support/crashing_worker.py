"""``python -m tests.support.crashing_worker``: a real worker (settings from the environment) whose memory agent
has a defect: handling a batch that holds a record keyed ``crash-here`` raises. It stands for any bug outside the
per-record isolation, so a test can watch what the process does when one of its agents dies."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from om_stream.runtime.worker.app import Worker
from om_stream.runtime.worker.deps import build_deps
from om_stream.runtime.worker.kafka_records import SourceRecord
from om_stream.runtime.worker.main import run_worker
from om_stream.settings import Settings

settings = Settings()
logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
worker = Worker(build_deps(settings))
handle = worker.processor.process


async def process(records: Sequence[SourceRecord], **commit: Any) -> bool:
    if any(record.key == b"crash-here" for record in records):
        raise RuntimeError("a defect in the memory agent")
    return await handle(records, **commit)


worker.processor.process = process  # type: ignore[method-assign]
sys.exit(run_worker(settings, worker))
