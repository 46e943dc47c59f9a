"""``python -m om_stream`` is the ``om-stream`` command."""

import sys

from om_stream.cli import main

sys.exit(main())
