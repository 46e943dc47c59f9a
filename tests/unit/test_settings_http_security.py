"""The API token setting, the bearer check of the ``/v1/*`` API and the start-up rule on exposure."""

from __future__ import annotations

import hmac

import pydantic
import pytest

from om_stream.runtime.worker.auth import BearerToken, exposure_refusal, is_loopback
from om_stream.settings import Settings, WorkerSettings

TOKEN = "Zq7-long-random-token-0123456789abcdef"


def test_only_the_exact_token_is_admitted() -> None:
    check = BearerToken(pydantic.SecretStr(TOKEN))
    assert check.required
    assert check.admits(f"Bearer {TOKEN}")
    assert check.admits(f"bearer  {TOKEN} ")  # the scheme is case-insensitive (RFC 7235), spaces around are not
    for refused in (None, "", "Bearer", "Bearer ", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}x", f"Basic {TOKEN}",
                    TOKEN, f"Bearer {TOKEN.upper()}", f"Bearer {TOKEN[:8]}", "Bearer \udcff\udcfe",
                    "Bearer \ud800"):  # a lone surrogate cannot even be encoded
        assert not check.admits(refused), refused


def test_without_a_token_everyone_is_admitted() -> None:
    check = BearerToken(None)
    assert not check.required
    assert check.admits(None) and check.admits("Bearer whatever")


def test_the_comparison_is_hmac_compare_digest_on_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # a timing difference cannot be measured reliably in a test; what makes it constant-time is the function used
    seen: list[tuple[object, object]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    assert not BearerToken(pydantic.SecretStr(TOKEN)).admits(f"Bearer {TOKEN[:-1]}")
    assert seen == [(TOKEN[:-1].encode(), TOKEN.encode())]


def test_the_token_shows_in_no_repr_and_no_error() -> None:
    settings = WorkerSettings(api_token=pydantic.SecretStr(TOKEN))
    assert TOKEN not in repr(settings) and TOKEN not in str(settings)
    assert TOKEN not in repr(BearerToken(settings.api_token))
    with pytest.raises(pydantic.ValidationError) as refused:
        WorkerSettings(api_token=f"{TOKEN} with spaces")
    assert TOKEN not in str(refused.value) and "printable ASCII" in str(refused.value)


def test_a_token_is_trimmed_and_an_empty_one_is_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OM_WORKER_API_TOKEN", f"{TOKEN}\n")  # a Secret made from a file keeps its newline
    token = Settings().worker.api_token
    assert token is not None and token.get_secret_value() == TOKEN
    monkeypatch.setenv("OM_WORKER_API_TOKEN", "  ")
    assert Settings().worker.api_token is None


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.4.5", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LOCALHOST", True), ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.4", False),
    ("om-worker.svc", False), ("128.0.0.1", False)])
def test_loopback_is_127_8_and_ipv6_1_and_localhost(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_an_api_beyond_loopback_needs_a_token_or_an_explicit_waiver() -> None:
    message = exposure_refusal(WorkerSettings(web_host="0.0.0.0"))
    assert message is not None
    assert "OM_WORKER_API_TOKEN" in message and "OM_WORKER_ALLOW_UNAUTHENTICATED=true" in message
    assert "'0.0.0.0'" in message and "\n" not in message  # one paragraph, naming the address
    assert exposure_refusal(WorkerSettings(web_host="0.0.0.0", api_token=pydantic.SecretStr(TOKEN))) is None
    assert exposure_refusal(WorkerSettings(web_host="0.0.0.0", allow_unauthenticated=True)) is None
    assert exposure_refusal(WorkerSettings(web_host="127.0.0.1")) is None
    assert exposure_refusal(WorkerSettings(web_host="0.0.0.0", api_token="")) is not None


def test_the_api_and_the_metrics_listener_need_a_port_each() -> None:
    with pytest.raises(pydantic.ValidationError, match="a port each"):
        WorkerSettings(web_port=7000, metrics_port=7000)
    assert WorkerSettings(web_port=0, metrics_port=0).metrics_port == 0  # both ephemeral: fine


def test_the_refusal_holds_for_every_role_that_serves_the_api_and_for_no_other() -> None:
    # models and recall workers hold no table, so their /v1/* API never starts: nothing to protect
    for role in ("all", "memory"):
        assert exposure_refusal(WorkerSettings(web_host="0.0.0.0", role=role)) is not None
    for role in ("models", "recall"):
        assert exposure_refusal(WorkerSettings(web_host="0.0.0.0", role=role)) is None
