"""``python -m om_stream.runtime.worker``: the worker with settings from the environment (``om-stream worker``)."""

import sys

from om_stream.runtime.worker.main import main

sys.exit(main())
