"""Cassandra security settings on a real node: ``PasswordAuthenticator`` and TLS-only CQL with a certificate from
the test CA that names 127.0.0.1 only (``tests/support/secure_services.py``). The fixture creates a login role
``om_stream`` (the superuser cassandra/cassandra only creates it).

``om-stream migrate`` and the Cassandra content store connect with the role's password and the CA file, write and
read; a wrong password, a missing CA file, an address the certificate does not name (with hostname checking on) or
a plain connection each fail at once with an error that names the cause, never with the password in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from om_stream.adapters.cassandra_store import CassandraContentStore
from om_stream.adapters.cassandra_store.session import CassandraSession
from om_stream.errors import StorageError
from om_stream.settings import CassandraSettings
from tests.support.secure_services import SecureCassandraService, secure_cassandra_service
from tests.support.store_contract import message
from tests.support.tcp_forward import forwarded
from tests.support.worker import ROOT

pytestmark = pytest.mark.integration
FAST_S = 5.0  # a refused connection must be reported well within this (the connect timeout is 10 s)


@pytest.fixture(scope="session")
def secure_cassandra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCassandraService]:
    with secure_cassandra_service(tmp_path_factory.mktemp("secure-cassandra")) as service:
        yield service


def _settings(service: SecureCassandraService, **changes: Any) -> CassandraSettings:
    values: dict[str, Any] = {"hosts": service.hosts, "keyspace": "it_secure", "username": service.user,
                              "password": service.password, "tls": True,
                              "tls_ca_file": str(service.certificates.ca_file), "retry_deadline_s": 20}
    return CassandraSettings(**{**values, **changes})


def _env(settings: CassandraSettings) -> dict[str, str]:
    assert settings.password is not None
    return {**os.environ, "PYTHONPATH": str(ROOT), "OM_CASSANDRA_HOSTS": settings.hosts,
            "OM_CASSANDRA_KEYSPACE": settings.keyspace, "OM_CASSANDRA_USERNAME": settings.username or "",
            "OM_CASSANDRA_PASSWORD": settings.password.get_secret_value(), "OM_CASSANDRA_TLS": "true",
            "OM_CASSANDRA_TLS_CA_FILE": settings.tls_ca_file or ""}


def _migrate(settings: CassandraSettings) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "om_stream", "migrate"], cwd=ROOT, env=_env(settings),
                          capture_output=True, text=True, timeout=180, check=False)


async def _refusal(settings: CassandraSettings) -> tuple[str, float]:
    """The StorageError text of a store that cannot start, and how long it took to say so."""
    store = CassandraContentStore(settings)
    started = time.monotonic()
    try:
        with pytest.raises(StorageError) as caught:
            await store.start()
    finally:
        await store.close()
    return str(caught.value), time.monotonic() - started


async def test_migrate_and_the_store_write_and_read_with_password_and_tls(
        secure_cassandra: SecureCassandraService) -> None:
    settings = _settings(secure_cassandra, keyspace=f"it_secure_{uuid.uuid4().hex[:8]}")
    done = _migrate(settings)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"keyspace {settings.keyspace}: applied" in done.stdout
    store = CassandraContentStore(settings)
    try:
        await store.start()
        sent = message("secure-m1", "secure-thread", "r1", datetime(2026, 3, 1, 9, 0, tzinfo=UTC), "over TLS")
        await store.put_message("secure-thread", sent, 1, 3)
        assert await store.get_messages(["secure-m1"], resource_id="r1") == [sent]
    finally:
        await store.close()


async def test_a_wrong_password_is_refused_at_once(secure_cassandra: SecureCassandraService) -> None:
    wrong = "not-the-cql-password-42"
    text, elapsed = await _refusal(_settings(secure_cassandra, password=wrong))
    assert "refused the credentials" in text and "Bad credentials" in text, text
    assert "OM_CASSANDRA_PASSWORD" in text and wrong not in text
    assert elapsed < FAST_S, f"the refusal took {elapsed:.1f}s"
    done = _migrate(_settings(secure_cassandra, password=wrong))  # the same through `om-stream migrate`
    assert done.returncode == 2 and "refused the credentials" in done.stderr, done.stdout + done.stderr
    assert wrong not in done.stdout + done.stderr


@pytest.mark.parametrize(("changes", "expected"), [
    ({"tls_ca_file": None}, "self-signed certificate in certificate chain"),  # the system CAs: not the test CA
    ({"tls": False}, "unreachable"),  # plain CQL to a TLS-only port: the node hangs up
], ids=["tls-without-the-ca-file", "no-tls"])
async def test_a_connection_the_node_cannot_trust_fails_at_once(secure_cassandra: SecureCassandraService,
                                                                changes: dict[str, Any], expected: str) -> None:
    text, elapsed = await _refusal(_settings(secure_cassandra, **changes))
    assert expected in text, text
    if changes.get("tls", True):
        assert "the TLS handshake failed" in text and "CERTIFICATE_VERIFY_FAILED" in text, text
        assert "OM_CASSANDRA_TLS_CA_FILE" in text
    assert elapsed < FAST_S, f"the refusal took {elapsed:.1f}s"


async def test_the_hostname_check_follows_the_setting(secure_cassandra: SecureCassandraService) -> None:
    """Dialled as 127.0.0.2 (a forwarder to the node), the certificate, which names 127.0.0.1 only, is refused
    with hostname checking on (the default) and accepted with it off (the CA still verifies the chain)."""
    host, _, port = secure_cassandra.hosts.rpartition(":")
    with forwarded(host, int(port)) as elsewhere:
        checked = _settings(secure_cassandra, hosts=elsewhere)
        assert checked.tls_check_hostname
        text, elapsed = await _refusal(checked)
        assert "IP address mismatch, certificate is not valid for '127.0.0.2'" in text, text
        assert elapsed < FAST_S
        session = await CassandraSession.connect(_settings(secure_cassandra, hosts=elsewhere,
                                                           tls_check_hostname=False), None)
        try:
            rows = await session.execute(await session.prepare("SELECT release_version FROM system.local"))
            assert rows[0].release_version.startswith("5.0")
        finally:
            await session.close()
