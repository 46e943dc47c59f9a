"""The worker's Kafka security settings (``OM_KAFKA_SECURITY_PROTOCOL``, ``OM_KAFKA_SASL_*``,
``OM_KAFKA_SSL_CAFILE``) translated once: into aiokafka arguments for the clients om-stream starts itself (the
admin client that creates topics) and into Faust's ``broker_credentials`` for the app's consumer and producer.
Both come from :func:`om_stream.client.security.kafka_security_options`, so the worker and an agent's client
connect the same way."""

from __future__ import annotations

from typing import Any

import faust
from faust.types.auth import CredentialsT

from om_stream.client.security import kafka_security_options
from om_stream.settings import KafkaSettings

__all__ = ["broker_credentials", "client_options"]


def client_options(kafka: KafkaSettings) -> dict[str, Any]:
    """``security_protocol``, ``sasl_*`` and ``ssl_context`` for an aiokafka client; raises ConfigError."""
    return kafka_security_options(
        security_protocol=kafka.security_protocol, sasl_mechanism=kafka.sasl_mechanism,
        username=kafka.sasl_username,
        password=kafka.sasl_password.get_secret_value() if kafka.sasl_password is not None else None,
        cafile=kafka.ssl_cafile)


def broker_credentials(kafka: KafkaSettings) -> CredentialsT | None:
    """Faust's ``broker_credentials`` (None for PLAINTEXT). Faust turns them back into the same aiokafka
    arguments: SASLCredentials with an SSL context is SASL_SSL, without one SASL_PLAINTEXT."""
    options = client_options(kafka)
    protocol = options["security_protocol"]
    if protocol == "PLAINTEXT":
        return None
    if protocol == "SSL":
        return faust.SSLCredentials(options["ssl_context"])
    return faust.SASLCredentials(username=options["sasl_plain_username"], password=options["sasl_plain_password"],
                                 ssl_context=options.get("ssl_context"), mechanism=options["sasl_mechanism"])
