"""Pytest plugin: no test reaches beyond loopback (a real model provider, above all) unless it opts in.

The session installs one :class:`~om_stream.testing.network.NetworkGuard`. A test that caused a refusal fails,
naming the hosts it tried, even when the code under test swallowed the error (litellm turns it into "Connection
error.", the gateway into ``ModelUnavailable``, an embedded cycle into a ``*-failed`` event); a test that failed on
its own gets the hosts in a "network guard" section of its report. A test that expects the refusal takes it
(``network_guard.take_refused()``); a test marked ``allow_remote_network`` is let through.

Loaded by ``tests/conftest.py``; ``pytest -p tests.support.network_guard`` loads it anywhere else.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

from om_stream.testing.network import NetworkGuard

_GUARD = pytest.StashKey[NetworkGuard]()
_OPT_IN = "allow_remote_network"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{_OPT_IN}: the test may connect beyond loopback (a real provider, with a "
                                       "real key); no test of the suite needs it")
    config.stash[_GUARD] = NetworkGuard().install()


def pytest_unconfigure(config: pytest.Config) -> None:
    guard = config.stash.get(_GUARD, None)
    if guard is not None:
        guard.uninstall()


@pytest.fixture
def network_guard(request: pytest.FixtureRequest) -> NetworkGuard:
    """The session's guard (to take the refusals a test expects)."""
    return request.config.stash[_GUARD]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    if item.get_closest_marker(_OPT_IN) is None:
        return (yield)
    with item.config.stash[_GUARD].allowed():  # setup, call and teardown alike
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    refused = item.config.stash[_GUARD].take_refused()
    if not refused:
        return report
    targets = ", ".join(sorted({r.target for r in refused}))
    message = (f"{item.nodeid} tried to reach {targets} beyond loopback (in its {call.when}): tests never call a "
               "real model provider. Answer with om_stream.testing.FunctionModel, point the model at "
               "om_stream.testing.FakeOpenAI (api_base=srv.base_url), or mark the test allow_remote_network.")
    if report.failed:
        report.sections.append(("network guard", message))
    else:
        report.outcome = "failed"
        report.longrepr = message
    return report
