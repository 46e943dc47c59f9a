"""``NetworkGuard``: keeps a process on loopback, so that no test reaches a real model provider by accident.

A test that names a real model (``openai/gpt-4o-mini``, the default ``google/gemini-2.5-flash``) and forgets to
point it at :class:`~om_stream.testing.fake_openai.FakeOpenAI` would otherwise call the provider, with whatever
key the environment holds, or hang on a network it does not have. While the guard is installed, every host name
lookup (``socket.getaddrinfo``) and every socket connection (``socket.socket.connect``) to anything beyond
loopback raises :class:`RemoteNetworkBlocked` at once, before a byte leaves the machine: litellm, the openai SDK,
httpx, aiohttp and the Kafka and Cassandra drivers all go through those two calls. Loopback (``localhost``,
``127.0.0.0/8``, ``::1``), the unspecified address and Unix sockets stay open, so a fake server, a local broker and
the project's own Kafka and Cassandra keep working; a name under ``.invalid`` is answered "not known" on the spot,
as any resolver would answer it.

The libraries on the way translate the error (litellm reports a bare "Connection error."), and code under test
may swallow it, so the guard also keeps a record of what it refused (:attr:`NetworkGuard.refused`): the test
suite's plugin (``tests/support/network_guard.py``) fails any test that caused a refusal, naming the host.

    guard = NetworkGuard().install()
    ...                                # a test run
    guard.uninstall()

It patches the ``socket`` module of this process only; a subprocess is not guarded.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["NetworkGuard", "Refusal", "RemoteNetworkBlocked", "is_loopback"]

log = logging.getLogger(__name__)

_LOOPBACK_NAMES = frozenset({"", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


class RemoteNetworkBlocked(ConnectionRefusedError):
    """A connection beyond loopback, refused by :class:`NetworkGuard`.

    A ``ConnectionRefusedError`` (not an ``OMError``) on purpose: every library on the way must see what a network
    failure looks like, and om-stream's own ``except OMError`` handlers must not mistake it for a model's answer.
    """

    def __init__(self, host: str, port: object) -> None:
        super().__init__(f"om-stream's network guard refused {host}:{port}: tests stay on loopback (a real model "
                         "provider? answer with om_stream.testing.FunctionModel, or point the model at "
                         "om_stream.testing.FakeOpenAI)")
        self.host = host
        self.port = port


@dataclass(frozen=True)
class Refusal:
    """One refused lookup or connection."""

    host: str
    port: object
    call: str  # "getaddrinfo" or "connect"

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"


def is_loopback(host: str | bytes | None) -> bool:
    """Whether ``host`` (a name or an address, as ``getaddrinfo`` and ``connect`` get it) stays on this machine."""
    if host is None:
        return True  # getaddrinfo(None, port): the local wildcard, for a server to bind
    name = (host.decode("ascii", "replace") if isinstance(host, bytes) else host).strip("[]").rstrip(".").lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])  # an IPv6 zone (fe80::1%eth0) is not part of it
    except ValueError:
        return False  # a name that would have to be resolved: beyond loopback
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


class NetworkGuard:
    """Refuses name lookups and connections beyond loopback while installed. Thread-safe; install it once."""

    def __init__(self) -> None:
        self.refused: list[Refusal] = []
        self._lock = threading.Lock()
        self._open = 0  # > 0 inside allowed()
        self._originals: tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]] | None = None

    @property
    def installed(self) -> bool:
        return self._originals is not None

    def install(self) -> NetworkGuard:
        if self._originals is not None:
            raise RuntimeError("this NetworkGuard is already installed")
        getaddrinfo, connect, connect_ex = socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex
        self._originals = (getaddrinfo, connect, connect_ex)
        guard = self

        def guarded_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            guard._check(host, port, "getaddrinfo")
            return getaddrinfo(host, port, *args, **kwargs)

        def guarded_connect(sock: Any, address: Any) -> None:
            guard._check_address(sock, address)
            connect(sock, address)

        def guarded_connect_ex(sock: Any, address: Any) -> int:
            guard._check_address(sock, address)
            result: int = connect_ex(sock, address)
            return result

        # asyncio, httpx (anyio), aiohttp's default resolver and socket.create_connection look these up at call time
        socket.getaddrinfo = guarded_getaddrinfo
        socket.socket.connect = guarded_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign]
        return self

    def uninstall(self) -> None:
        """Put back what :meth:`install` replaced. Idempotent."""
        if self._originals is None:
            return
        socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex = self._originals  # type: ignore[method-assign]
        self._originals = None

    def __enter__(self) -> NetworkGuard:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    @contextlib.contextmanager
    def allowed(self) -> Iterator[None]:
        """Let everything through for the duration (a test that opted in to the real network)."""
        with self._lock:
            self._open += 1
        try:
            yield
        finally:
            with self._lock:
                self._open -= 1

    def take_refused(self) -> list[Refusal]:
        """The refusals recorded so far, forgotten by the guard (a test that expected them)."""
        with self._lock:
            taken, self.refused = self.refused, []
        return taken

    def _check_address(self, sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple) and address:
            self._check(address[0], address[1] if len(address) > 1 else None, "connect")

    def _check(self, host: Any, port: Any, call: str) -> None:
        if self._open or is_loopback(host):
            return
        name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
        if name.rstrip(".").lower().endswith(".invalid"):
            # RFC 6761: never resolves anywhere. Answer as every resolver must, so tests of "an unknown host" keep
            # the error they expect, without asking a DNS server
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        with self._lock:
            self.refused.append(Refusal(name, port, call))
        log.error("network guard: refused %s %s:%s", call, name, port)
        raise RemoteNetworkBlocked(name, port)
