"""The Kafka security settings become the same aiokafka arguments for the worker's own clients, for Faust's
``broker_credentials`` and for the Python client (the real brokers: ``tests/integration/test_secure_kafka.py``)."""

from __future__ import annotations

import ssl

import faust
import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from om_stream.client.security import kafka_security_options
from om_stream.errors import ConfigError
from om_stream.runtime.worker.kafka_security import broker_credentials, client_options
from om_stream.settings import KafkaSettings


def _faust_arguments(kafka: KafkaSettings) -> dict[str, object]:
    return dict(credentials_to_aiokafka_auth(broker_credentials(kafka)))


def test_plaintext_needs_no_credentials() -> None:
    kafka = KafkaSettings()
    assert client_options(kafka) == {"security_protocol": "PLAINTEXT"}
    assert broker_credentials(kafka) is None
    assert _faust_arguments(kafka) == {"security_protocol": "PLAINTEXT"}


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_sasl_reaches_faust_as_it_reaches_aiokafka(protocol: str) -> None:
    kafka = KafkaSettings(security_protocol=protocol, sasl_mechanism="SCRAM-SHA-512", sasl_username="om",
                          sasl_password="pw-123")  # type: ignore[arg-type]
    direct, via_faust = client_options(kafka), _faust_arguments(kafka)
    assert via_faust["security_protocol"] == direct["security_protocol"] == protocol
    for key in ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password"):
        assert via_faust[key] == direct[key]
    assert direct["sasl_plain_password"] == "pw-123" and direct["sasl_mechanism"] == "SCRAM-SHA-512"
    assert isinstance(via_faust["ssl_context"], ssl.SSLContext) == (protocol == "SASL_SSL")
    assert "pw-123" not in repr(broker_credentials(kafka))


def test_ssl_alone_is_faust_ssl_credentials_verifying_the_broker() -> None:
    kafka = KafkaSettings(security_protocol="SSL")
    credentials = broker_credentials(kafka)
    assert isinstance(credentials, faust.SSLCredentials)
    context = _faust_arguments(kafka)["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


@pytest.mark.parametrize(("arguments", "field"), [
    ({"security_protocol": "TLS"}, "kafka.security_protocol"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "username": "u", "password": "p"},
     "kafka.sasl_mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "username": "u"}, "kafka.sasl_username"),
    ({"security_protocol": "SSL", "sasl_mechanism": "PLAIN"}, "kafka.sasl_mechanism"),
    ({"security_protocol": "SSL", "cafile": "/nonexistent/ca.pem"}, "kafka.ssl_cafile"),
])
def test_incomplete_security_settings_name_the_field(arguments: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        kafka_security_options(**arguments)  # type: ignore[arg-type]
    assert caught.value.field == field
