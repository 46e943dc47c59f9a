"""``python -m tests.support.stalling_worker``: a real worker (settings from the environment) whose content store
stalls on demand: while the file named by ``OM_TEST_STALL_FILE`` exists, every content-store write waits. It stands
for a Cassandra node in a long GC pause or a saturated disk, seen by this worker only, so a test can hold one
member's batch in its first phase for as long as it likes while the group rebalances around it."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

from om_stream.runtime.worker.app import Worker
from om_stream.runtime.worker.deps import build_deps
from om_stream.runtime.worker.main import run_worker
from om_stream.settings import Settings

settings = Settings()
logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
worker = Worker(build_deps(settings))
stall = Path(os.environ["OM_TEST_STALL_FILE"])
write = worker.effects.write
log = logging.getLogger("stalling_worker")


async def stalled_write(commands: Any) -> None:
    if stall.exists():
        log.warning("content-store write stalled (%s exists)", stall)
        while stall.exists():
            await asyncio.sleep(0.05)
        log.warning("content-store write released")
    await write(commands)


worker.effects.write = stalled_write  # type: ignore[method-assign]
sys.exit(run_worker(settings, worker))
