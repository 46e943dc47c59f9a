"""Deployment tests (``make test-deploy``): the container image built and run, the Helm chart on a real Kubernetes
API server. They need tools ``make test-deploy`` installs first; a missing tool fails the test, never skips it."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.deploy)
