"""``python -m om_stream.runtime.worker``: the worker with settings from the environment (``om-stream worker``)."""

import logging
import sys

from om_stream.runtime.worker.main import run_worker
from om_stream.settings import Settings

settings = Settings()
logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
sys.exit(run_worker(settings))
