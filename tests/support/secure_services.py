"""The services of the security tests: a Kafka broker with a SASL_SSL (SCRAM-SHA-512) listener and a Cassandra
node with password authentication and TLS, each with its own test CA. They are separate from the plain services of
``tests/support/services.py``: a test module wraps one in a session fixture, so it starts only when that module's
tests run; a service that cannot start fails its tests with the log tail (never a skip).

    @pytest.fixture(scope="session")
    def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafkaService]:
        with secure_kafka_service(tmp_path_factory.mktemp("secure-kafka")) as service:
            yield service
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from om_stream.devservices import kafka, secure
from om_stream.devservices.certs import CertificateSet, make_certificates
from om_stream.devservices.jvm import DevServiceError

USER = "om_stream"


@dataclass(frozen=True)
class SecureKafkaService:
    bootstrap: str  # the SASL_SSL listener
    ca_file: str
    user: str
    password: str  # random per session: a test can look for it in logs and messages
    ready_after_s: float


@dataclass(frozen=True)
class SecureCassandraService:
    hosts: str  # host:port of the TLS-only CQL port
    certificates: CertificateSet
    user: str  # a login role made by the fixture (not the superuser)
    password: str
    ready_after_s: float


def _fail(what: str, exc: DevServiceError) -> NoReturn:
    pytest.fail(f"the {what} needed by this test could not start:\n{exc}", pytrace=False)


@contextmanager
def secure_kafka_service(base: Path) -> Iterator[SecureKafkaService]:
    password = f"scram-{secrets.token_hex(8)}"
    started = time.monotonic()
    try:
        certificates = make_certificates(base / "certs")
        service = secure.start_kafka(base / "kafka", certificates, {USER: password})
    except DevServiceError as exc:
        _fail("SASL_SSL Kafka broker", exc)
    try:
        kafka.wait_ready(service.node)
    except DevServiceError as exc:
        service.node.stop(grace=5)
        _fail("SASL_SSL Kafka broker", exc)
    ready = time.monotonic() - started
    print(f"\nsecure kafka ready after {ready:.1f}s at {service.bootstrap}")  # a measurement
    try:
        yield SecureKafkaService(service.bootstrap, str(certificates.ca_file), USER, password, ready)
    finally:
        service.node.stop(grace=10)


def _create_role(hosts: str, certificates: CertificateSet, password: str) -> None:
    from cassandra.cluster import Cluster

    host, _, port = hosts.rpartition(":")
    # long timeouts: a TLS handshake and a bcrypt password check can take seconds on a loaded 2-core machine
    cluster = Cluster([host], port=int(port), protocol_version=5, connect_timeout=30, control_connection_timeout=30,
                      **secure.cassandra_connect_options(certificates, *secure.SUPERUSER))
    try:
        session = cluster.connect()
        session.execute(f"CREATE ROLE IF NOT EXISTS {USER} WITH PASSWORD = %s AND LOGIN = true", (password,),
                        timeout=30)
    finally:
        cluster.shutdown()


@contextmanager
def secure_cassandra_service(base: Path) -> Iterator[SecureCassandraService]:
    password = f"cql-{secrets.token_hex(8)}"
    started = time.monotonic()
    try:
        certificates = make_certificates(base / "certs")
        node = secure.start_cassandra(base / "cassandra", certificates)
    except DevServiceError as exc:
        _fail("TLS + password Cassandra node", exc)
    try:
        secure.wait_cassandra(node, certificates)
        _create_role(node.contact_point, certificates, password)
        ready = time.monotonic() - started
        print(f"\nsecure cassandra ready after {ready:.1f}s at {node.contact_point}")  # a measurement
        yield SecureCassandraService(node.contact_point, certificates, USER, password, ready)
    except DevServiceError as exc:
        _fail("TLS + password Cassandra node", exc)
    finally:
        node.process.stop(grace=20)
