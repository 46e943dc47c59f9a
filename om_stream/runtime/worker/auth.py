"""Who may call the worker's ``/v1/*`` API, and whether the worker may start with the exposure it is given.

* :class:`BearerToken` admits a request whose ``Authorization`` header is ``Bearer <OM_WORKER_API_TOKEN>``; the
  comparison is :func:`hmac.compare_digest` on bytes (constant time in the token's content).
* :func:`exposure_refusal` is the start-up rule: an API listening beyond loopback must have a token, unless the
  operator says in so many words (``OM_WORKER_ALLOW_UNAUTHENTICATED=true``) that the network is trusted.

The token is held as a ``SecretStr`` and never leaves this module: no log line, error text or repr shows it.
"""

from __future__ import annotations

import hmac
import ipaddress

from pydantic import SecretStr

from om_stream.settings import WorkerSettings

__all__ = ["BearerToken", "exposure_refusal", "is_loopback"]


class BearerToken:
    """The API's bearer-token check; with no token configured every request is admitted."""

    __slots__ = ("_expected",)

    def __init__(self, token: SecretStr | None) -> None:
        self._expected = token.get_secret_value().encode() if token is not None else None

    @property
    def required(self) -> bool:
        return self._expected is not None

    def admits(self, authorization: str | None) -> bool:
        """Whether a request with this ``Authorization`` header value (None: no header) may pass."""
        if self._expected is None:
            return True
        scheme, _, presented = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        try:
            offered = presented.strip().encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(offered, self._expected)

    def __repr__(self) -> str:
        return f"BearerToken(required={self.required})"


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1 (an empty host means every interface)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:  # a host name other than localhost may resolve to anything
        return False


def exposure_refusal(worker: WorkerSettings) -> str | None:
    """Why the worker must not start with these settings (one paragraph for the operator), or None."""
    if worker.api_token is not None or worker.allow_unauthenticated or is_loopback(worker.web_host):
        return None
    if worker.role in ("models", "recall"):  # no table, so no /v1/* API: the web server never starts
        return None
    return (f"om-stream worker refuses to start: its HTTP API (/v1/*: thread contexts, status, manual commands and "
            f"recall over every tenant's memory) would listen on {worker.web_host!r}, which is not a loopback "
            f"address, and no token protects it. Set OM_WORKER_API_TOKEN to a long random secret (clients then send "
            f"'Authorization: Bearer <token>'), or set OM_WORKER_WEB_HOST=127.0.0.1 to keep the API on this host, "
            f"or, only on a network where every peer may read and change every thread's memory, set "
            f"OM_WORKER_ALLOW_UNAUTHENTICATED=true. /metrics and the probes are on OM_WORKER_METRICS_HOST:"
            f"OM_WORKER_METRICS_PORT and need no token.")
