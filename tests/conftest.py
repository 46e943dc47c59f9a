"""Test-session wiring: real Kafka, Cassandra and Jaeger, started once and only when collected tests need them, and the
network guard (``tests/support/network_guard.py``): no test reaches beyond loopback."""

from __future__ import annotations

import pytest

from tests.support.services import JaegerAddresses, ServicePool

pytest_plugins = ["tests.support.network_guard", "tests.support.spans"]

_pool = ServicePool()
_FIXTURE_SERVICE = {"kafka_bootstrap": "kafka", "cassandra_hosts": "cassandra", "jaeger": "jaeger"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needed = {svc for item in items for fx, svc in _FIXTURE_SERVICE.items() if fx in getattr(item, "fixturenames", ())}
    for item in items:
        if any(fx in getattr(item, "fixturenames", ()) for fx in _FIXTURE_SERVICE):
            item.add_marker(pytest.mark.integration)
    # boot the JVMs now so they come up while the unit tests run
    _pool.start(needed)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _pool.stop()


def _address(name: str) -> str:
    try:
        return _pool.address(name)
    except Exception as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap address of a real Apache Kafka broker (``OM_KAFKA_BOOTSTRAP`` or started for this session)."""
    return _address("kafka")


@pytest.fixture(scope="session")
def cassandra_hosts() -> str:
    """``host:port`` of a real Apache Cassandra node (``OM_CASSANDRA_HOSTS`` or started for this session)."""
    return _address("cassandra")


@pytest.fixture(scope="session")
def jaeger() -> JaegerAddresses:
    """A real Jaeger v2 (``OM_JAEGER_QUERY`` and ``OM_OTLP_ENDPOINT``, or started for this session from the tools
    cache): where spans go, and where traces are read back."""
    otlp, query, otlp_grpc = _address("jaeger").split(" ")
    if not otlp:
        pytest.fail("OM_JAEGER_QUERY is set without OM_OTLP_ENDPOINT", pytrace=False)
    return JaegerAddresses(otlp, query, otlp_grpc)
