"""The network guard every test runs under: a real provider is refused at once, before any lookup leaves the
machine, and a test that reached for one fails even when the code under test swallowed the refusal."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from om_stream.adapters.gateway import GatewaySettings, ModelGateway
from om_stream.adapters.offline import import_litellm
from om_stream.errors import ModelUnavailable
from om_stream.ports import ChatMessage, ChatRequest
from om_stream.testing import NetworkGuard, RemoteNetworkBlocked
from om_stream.testing.network import is_loopback

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("model", "host"), [("openai/gpt-4o-mini", "api.openai.com"),
                                             ("google/gemini-2.5-flash", "generativelanguage.googleapis.com")])
async def test_a_real_provider_through_the_gateway_is_refused_at_once(network_guard: NetworkGuard, model: str,
                                                                      host: str) -> None:
    import_litellm()  # its import takes seconds: not part of what is timed
    gateway = ModelGateway(GatewaySettings(api_keys={"*": "sk-bogus"}, max_retries=0, timeout_s=30,
                                           deadline_s=30))
    request = ChatRequest(role="observer", model=model, messages=(ChatMessage("user", "Hi, I'm Ada."),))

    began = time.monotonic()
    with pytest.raises(ModelUnavailable):
        await gateway.complete(request)

    assert time.monotonic() - began < 5, "refused before any network wait (the call's timeout is 30 s)"
    refused = network_guard.take_refused()  # expected here: the session would fail this test otherwise
    assert {r.target for r in refused} == {f"{host}:443"}


_INNER = '''
import asyncio
import contextlib
import socket

import pytest

from om_stream.adapters.gateway import GatewaySettings, ModelGateway
from om_stream.errors import ModelError
from om_stream.ports import ChatMessage, ChatRequest


def call_a_provider():
    gateway = ModelGateway(GatewaySettings(api_keys={"*": "sk-bogus"}, max_retries=0))
    request = ChatRequest(role="observer", model="openai/gpt-4o-mini", messages=(ChatMessage("user", "hi"),))
    return asyncio.run(gateway.complete(request))


def test_calls_a_provider():
    call_a_provider()


def test_swallows_what_the_provider_call_raised():
    with contextlib.suppress(ModelError):
        call_a_provider()


def test_stays_on_loopback():
    with socket.create_server(("127.0.0.1", 0)) as server:
        socket.create_connection(server.getsockname(), timeout=5).close()


@pytest.mark.allow_remote_network
def test_opted_in():
    assert socket.getaddrinfo("203.0.113.9", 443, type=socket.SOCK_STREAM)  # numeric: no DNS server is asked
'''


def test_a_test_that_reaches_a_provider_fails_naming_the_host(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_inner=_INNER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))

    result = pytester.runpytest_subprocess("-p", "tests.support.network_guard", "-p", "no:cacheprovider",
                                           "-W", "ignore")

    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*test_swallows_what_the_provider_call_raised tried to reach api.openai.com:443 "
                                 "beyond loopback (in its call): tests never call a real model provider*"])
    result.stdout.fnmatch_lines(["*network guard*", "*test_calls_a_provider tried to reach api.openai.com:443*"])


# -- the guard itself ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "api.localhost", "127.0.0.1", "127.8.9.10", "::1",
                                  "[::1]", "::ffff:127.0.0.1", "0.0.0.0", "", None, b"127.0.0.1"])
def test_loopback_and_the_local_wildcard_stay_open(host: str | bytes | None) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["api.openai.com", "generativelanguage.googleapis.com", "10.0.0.7",
                                  "203.0.113.9", "2001:db8::1", "localhost.example.com", "my-laptop"])
def test_everything_else_is_beyond_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """A guard of its own over a resolver that answers every name (no DNS is ever asked)."""
    answer = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("203.0.113.9", 443))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *_a, **_k: answer)
    with NetworkGuard() as own:
        yield own


def test_a_lookup_beyond_loopback_is_refused_and_recorded(guard: NetworkGuard) -> None:
    with pytest.raises(RemoteNetworkBlocked, match=r"api\.openai\.com:443.*FunctionModel"):
        socket.getaddrinfo("api.openai.com", 443)
    assert [(r.target, r.call) for r in guard.take_refused()] == [("api.openai.com:443", "getaddrinfo")]
    assert guard.refused == []
    assert socket.getaddrinfo("localhost", 80)  # loopback goes through to the resolver


def test_a_connection_to_an_address_beyond_loopback_is_refused(guard: NetworkGuard) -> None:
    with socket.socket() as sock, pytest.raises(RemoteNetworkBlocked):
        sock.connect(("203.0.113.9", 443))
    with socket.socket() as sock, pytest.raises(RemoteNetworkBlocked):
        sock.connect_ex(("203.0.113.9", 443))
    assert [r.call for r in guard.take_refused()] == ["connect", "connect"]


def test_an_invalid_name_is_not_known_at_once_and_not_a_refusal(guard: NetworkGuard) -> None:
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("no-such-host.invalid", 9042)
    assert guard.take_refused() == []


def test_allowed_lets_everything_through_and_uninstall_restores_the_socket_module(guard: NetworkGuard) -> None:
    with guard.allowed():
        assert socket.getaddrinfo("api.openai.com", 443)[0][4] == ("203.0.113.9", 443)
    assert guard.take_refused() == []
    patched = socket.getaddrinfo
    guard.uninstall()
    assert socket.getaddrinfo is not patched and not guard.installed
    assert socket.getaddrinfo("api.openai.com", 443)[0][4] == ("203.0.113.9", 443)  # the fake resolver again
