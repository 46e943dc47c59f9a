"""Kafka and Cassandra with authentication and TLS, for the tests that prove om-stream's security settings.

* Kafka (one KRaft node): clients connect to a SASL_SSL listener (SCRAM-SHA-512; the users are written into the
  metadata log by ``kafka-storage format --add-scram``, so they exist before the broker accepts a client). The
  PLAINTEXT loopback listener stays for the broker itself and for the readiness probe.
* Cassandra (one node): ``PasswordAuthenticator`` (superuser ``cassandra``/``cassandra``, made at once instead of
  after Cassandra's usual 10 s delay) and TLS on the CQL port (``client_encryption_options``), mutual TLS on request.

Both use the certificates of :mod:`om_stream.devservices.certs` (the node certificate names ``127.0.0.1`` only).
The plain services of :mod:`om_stream.devservices.kafka` / ``cassandra`` are left as they are.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from om_stream.devservices import cassandra, kafka
from om_stream.devservices.certs import STORE_PASSWORD, CertificateSet
from om_stream.devservices.jvm import DevServiceError, free_port, infra_dir

__all__ = ["SCRAM_MECHANISM", "SUPERUSER", "SecureKafka", "cassandra_connect_options", "start_cassandra",
           "start_kafka", "wait_cassandra"]

SCRAM_MECHANISM = "SCRAM-SHA-512"
SUPERUSER = ("cassandra", "cassandra")  # Cassandra's default superuser once PasswordAuthenticator is on


@dataclass
class SecureKafka:
    node: kafka.KafkaNode  # ``node.bootstrap`` is the PLAINTEXT loopback listener (readiness only)
    bootstrap: str  # the SASL_SSL listener: what clients use
    certificates: CertificateSet


def _plain_word(value: str, what: str) -> str:
    # the values go into a kafka-storage argument ("[name=...,password=...]"): keep them free of its separators
    if not value or not all(c.isalnum() or c in "-_." for c in value):
        raise DevServiceError(f"{what} {value!r} must be letters, digits, '-', '_' or '.'")
    return value


def start_kafka(run_dir: Path, certificates: CertificateSet, users: Mapping[str, str], *,
                detached: bool = False) -> SecureKafka:
    """Format and launch a broker with a SASL_SSL listener and SCRAM users ``users`` (name -> password); call
    :func:`om_stream.devservices.kafka.wait_ready` on ``.node`` next."""
    secure_port = free_port()
    extra = (infra_dir() / "kafka" / "sasl-ssl.properties.in").read_text()
    for key, value in {"@SECURE_PORT@": str(secure_port), "@KEYSTORE@": str(certificates.keystore),
                       "@STORE_PASSWORD@": STORE_PASSWORD}.items():
        extra = extra.replace(key, value)
    scram: list[str] = []
    for name, password in users.items():
        scram += ["--add-scram", f"{SCRAM_MECHANISM}=[name={_plain_word(name, 'user')},"
                                 f"password={_plain_word(password, 'password')}]"]
    node = kafka.start(run_dir, detached=detached, extra_config=extra, format_args=scram)
    if node.bootstrap.endswith(f":{secure_port}"):
        node.stop(grace=5)
        raise DevServiceError(f"port {secure_port} was drawn twice; start again")
    return SecureKafka(node, f"{kafka.HOST}:{secure_port}", certificates)


def start_cassandra(run_dir: Path, certificates: CertificateSet, *, mutual_tls: bool = False,
                    detached: bool = False) -> cassandra.CassandraNode:
    """Launch a node with password authentication and TLS-only CQL; call :func:`wait_cassandra` next.
    ``mutual_tls``: clients must also show a certificate the test CA signed (needs the truststore)."""
    client_auth = ""
    if mutual_tls:
        if not certificates.truststore.exists():
            raise DevServiceError("mutual TLS needs the truststore: make_certificates(..., truststore=True)")
        client_auth = (f"  require_client_auth: true\n  truststore: {certificates.truststore}\n"
                       f"  truststore_password: {STORE_PASSWORD}\n")
    extra = (infra_dir() / "cassandra" / "secure.yaml.in").read_text()
    for key, value in {"@KEYSTORE@": str(certificates.keystore), "@STORE_PASSWORD@": STORE_PASSWORD,
                       "@CLIENT_AUTH@": client_auth}.items():
        extra = extra.replace(key, value)
    return cassandra.start(run_dir, detached=detached, extra_yaml=extra,
                           jvm_props=("-Dcassandra.superuser_setup_delay_ms=0",))


def cassandra_connect_options(certificates: CertificateSet, username: str, password: str, *,
                              client_certificate: bool = False) -> dict[str, Any]:
    """``Cluster`` arguments for the secure node: password authentication, TLS trusting the test CA."""
    from cassandra.auth import PlainTextAuthProvider

    context = ssl.create_default_context(cafile=str(certificates.ca_file))
    if client_certificate:
        context.load_cert_chain(str(certificates.client_cert), str(certificates.client_key))
    return {"auth_provider": PlainTextAuthProvider(username=username, password=password), "ssl_context": context}


def wait_cassandra(node: cassandra.CassandraNode, certificates: CertificateSet, *, mutual_tls: bool = False,
                   timeout: float = cassandra.READY_TIMEOUT_S) -> None:
    """Ready: "Startup complete", and the superuser (made just after) logs in over TLS and runs a query."""
    cassandra.wait_ready(node, timeout, connect=cassandra_connect_options(certificates, *SUPERUSER,
                                                                           client_certificate=mutual_tls))
