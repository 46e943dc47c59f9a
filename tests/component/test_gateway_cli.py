"""``om-stream replay --model ... --api-base ...`` and ``demo --model``: the CLI reaches any litellm model through the
gateway, and the replay report carries cost, failures, retries and offline fallback calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from om_stream.adapters.gateway import ModelGateway
from om_stream.cli import _model, main
from om_stream.replay.synthetic import write_jsonl
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    path = tmp_path / "conversation.jsonl"
    write_jsonl(path, 12, seed=7)
    return path


def replay(conversation: Path, tmp_path: Path, *extra: str) -> dict[str, object]:
    report = tmp_path / "report.json"
    assert main(["replay", str(conversation), "--report", str(report), "--message-tokens", "600",
                 "--observation-tokens", "2000", *extra]) == 0
    totals: dict[str, object] = json.loads(report.read_text())["totals"]
    return totals


def test_replay_with_a_litellm_model_and_api_base_reports_cost(srv: FakeOpenAI, conversation: Path,
                                                               tmp_path: Path) -> None:
    totals = replay(conversation, tmp_path, "--model", "openai/gpt-5-mini", "--api-base", srv.base_url)

    assert srv.requests and {r.model for r in srv.requests} == {"gpt-5-mini"}
    assert totals["cost_usd"] == pytest.approx(0.00125 * len(srv.requests))
    assert (totals["model_failures"], totals["retries"], totals["offline_fallback_calls"]) == (0, 0, 0)


def test_replay_reads_the_api_base_from_the_providers_env_var(srv: FakeOpenAI, conversation: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", srv.base_url)
    srv.enqueue(ErrorReply.rate_limit(retry_after=0.05))

    totals = replay(conversation, tmp_path, "--model", "openai/gpt-5-mini")

    assert len(srv.requests) >= 2
    assert totals["retries"] == 1
    assert totals["model_failures"] == 0  # the retry answered: no cycle failed


def test_the_cli_model_is_the_gateway() -> None:
    model, label = _model("openai/gpt-5-mini", "http://127.0.0.1:9/v1")

    assert isinstance(model, ModelGateway)
    assert label == "openai/gpt-5-mini"
    assert _model("offline", None) == (None, "offline")
    configured, _ = _model("config", None)
    assert isinstance(configured, ModelGateway)


def test_demo_with_a_model_goes_through_the_gateway(srv: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "openai/gpt-5-mini", "--api-base", srv.base_url]) == 0

    assert "model: openai/gpt-5-mini" in capsys.readouterr().out
    assert srv.requests and {r.model for r in srv.requests} == {"gpt-5-mini"}
