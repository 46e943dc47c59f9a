"""The scripted OpenAI-compatible provider the gateway tests share: the Observer always notes that the user is Ada,
the Reflector condenses it, every call reports 1000 input and 500 output tokens."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from om_stream.adapters.gateway import GatewaySettings
from om_stream.testing.fake_openai import FakeOpenAI, RecordedRequest, Reply, Response, Usage

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
OBSERVED = "<observations>\nDate: Jan 5, 2026\n* 🔴 (09:00) User stated their name is Ada.\n</observations>"
REFLECTED = "<observations>\nDate: Jan 5, 2026\n* 🔴 User is Ada.\n</observations>"


def answer(request: RecordedRequest) -> Response:
    text = REFLECTED if "Observations to reflect on" in request.prompt_text else OBSERVED
    return Reply(text, usage=Usage(1000, 500))


def fast_settings(srv: FakeOpenAI, **changes: Any) -> GatewaySettings:
    """Settings pointing every model at ``srv``, with short timeouts and backoffs and no retries unless changed."""
    base: dict[str, Any] = {"api_bases": {"*": srv.base_url}, "api_keys": {"*": "test"}, "timeout_s": 2.0,
                            "deadline_s": 5.0, "backoff_initial_s": 0.01, "backoff_max_s": 0.02, "max_retries": 0}
    return GatewaySettings(**{**base, **changes})
