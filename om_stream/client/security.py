"""Kafka security for om-stream's Kafka clients (the agent's client and the worker alike), and saying why a broker
refused a connection.

    options = kafka_security_options(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                                     username="agent", password=secret, cafile="ca.pem")
    async with OMClient("broker:9093", kafka_options=options) as om: ...

aiokafka reports every failed start the same way ("Unable to bootstrap from [...]", a ``KafkaConnectionError``),
whether the broker is down, refused the credentials or the certificate did not verify. :func:`start_checked`
starts an aiokafka client and, when it cannot bootstrap, connects once more itself to name the cause: a
:class:`KafkaConnectError` whose ``reason`` is ``authentication_failed``, ``tls`` or ``unreachable``. It comes at
once (a refused login is not retried). No message here ever contains a password.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Mapping
from typing import Any, Protocol

from om_stream.errors import ConfigError, OMError

__all__ = ["MECHANISMS", "PROTOCOLS", "KafkaConnectError", "kafka_security_options", "start_checked"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_PROBE_TIMEOUT_S = 10.0


class KafkaConnectError(OMError, ConnectionError):
    """No Kafka broker accepted the connection. ``reason``: ``authentication_failed`` (SASL credentials refused or
    mechanism not enabled), ``tls`` (handshake or certificate verification failed) or ``unreachable``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason

    def __str__(self) -> str:
        return str(self.args[0])


def kafka_security_options(*, security_protocol: str = "PLAINTEXT", sasl_mechanism: str | None = None,
                           username: str | None = None, password: str | None = None, cafile: str | None = None,
                           certfile: str | None = None, keyfile: str | None = None,
                           check_hostname: bool = True) -> dict[str, Any]:
    """The aiokafka arguments (``security_protocol``, ``sasl_*``, ``ssl_context``) for one way of connecting.

    SSL and SASL_SSL verify the broker's certificate against ``cafile`` (else the system's CAs) and, with
    ``check_hostname``, that it names the address dialled; ``certfile``/``keyfile`` present a client certificate.
    """
    protocol = security_protocol.upper()
    if protocol not in PROTOCOLS:
        raise ConfigError("kafka.security_protocol", f"{security_protocol!r} is not one of {', '.join(PROTOCOLS)}")
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol.startswith("SASL_"):
        mechanism = (sasl_mechanism or "").upper()
        if mechanism not in MECHANISMS:
            raise ConfigError("kafka.sasl_mechanism", f"{protocol} needs one of {', '.join(MECHANISMS)}, not "
                                                      f"{sasl_mechanism!r}")
        if not username or password is None:
            raise ConfigError("kafka.sasl_username", f"{protocol} with {mechanism} needs a user name and a password")
        options.update(sasl_mechanism=mechanism, sasl_plain_username=username, sasl_plain_password=password)
    elif sasl_mechanism:
        raise ConfigError("kafka.sasl_mechanism", f"SASL needs security_protocol SASL_SSL or SASL_PLAINTEXT, "
                                                  f"not {protocol}")
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = ssl.create_default_context(cafile=cafile)
            if certfile:
                context.load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("kafka.ssl_cafile", f"cannot load the TLS files: {exc}") from exc
        context.check_hostname = check_hostname
        options["ssl_context"] = context
    return options


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    found = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().removeprefix("kafka://").rpartition(":")
        found.append((host.strip("[]") or item.strip(), int(port) if port.isdigit() else 9092))
    return found


def _explain(host: str, port: int, options: Mapping[str, Any], exc: BaseException) -> KafkaConnectError:
    from aiokafka.errors import SaslAuthenticationFailed, UnsupportedSaslMechanismError

    where = f"Kafka at {host}:{port}"
    protocol = options.get("security_protocol", "PLAINTEXT")
    if isinstance(exc, SaslAuthenticationFailed | UnsupportedSaslMechanismError):
        user, mechanism = options.get("sasl_plain_username"), options.get("sasl_mechanism")
        return KafkaConnectError("authentication_failed",
                                 f"{where}: SASL authentication failed for user {user!r} with {mechanism} over "
                                 f"{protocol}: {exc}; check the user name and password")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return KafkaConnectError("tls", f"{where}: TLS certificate verification failed: {exc.verify_message}; check "
                                        "the CA file (it must sign the broker's certificate) and that the certificate "
                                        "names the address dialled")
    if isinstance(exc, ssl.SSLError):
        return KafkaConnectError("tls", f"{where}: TLS handshake failed: {exc}")
    return KafkaConnectError("unreachable", f"{where} unreachable over {protocol}: {type(exc).__name__}: {exc}")


async def diagnose(bootstrap: str, options: Mapping[str, Any]) -> KafkaConnectError | None:
    """Connect to each bootstrap address as a client with ``options`` would; None once one accepts."""
    from aiokafka.conn import create_conn

    keys = ("security_protocol", "ssl_context", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password")
    arguments = {key: options[key] for key in keys if key in options}
    first: KafkaConnectError | None = None
    for host, port in _addresses(bootstrap):
        try:
            conn = await asyncio.wait_for(create_conn(host, port, request_timeout_ms=int(_PROBE_TIMEOUT_S * 1000),
                                                      **arguments), _PROBE_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - every failure is classified; the first one is reported
            explained = _explain(host, port, options, exc)
            if first is None or (first.reason == "unreachable" and explained.reason != "unreachable"):
                first = explained
            continue
        conn.close()
        return None
    return first


class _Startable(Protocol):
    async def start(self) -> None: ...


async def start_checked(client: _Startable, bootstrap: str, options: Mapping[str, Any],
                        close: Any = None) -> None:
    """``await client.start()``; when it cannot bootstrap, raise the :class:`KafkaConnectError` that says why
    (``close``: an async callable releasing the half-started client first)."""
    from aiokafka.errors import KafkaConnectionError

    try:
        await client.start()
    except KafkaConnectionError as exc:
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
        cause = await diagnose(bootstrap, options)
        if cause is None:
            raise
        raise cause from exc
