"""The clients' end-to-end tests reuse the test session's real Kafka and Jaeger (see tests/conftest.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.support

from tests.conftest import jaeger, kafka_bootstrap, pytest_collection_modifyitems, pytest_sessionfinish

__all__ = ["jaeger", "kafka_bootstrap", "pytest_collection_modifyitems", "pytest_sessionfinish"]
