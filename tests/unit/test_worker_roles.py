"""Worker roles: which agents a role defines and in which consumer group, how a role is chosen (``OM_WORKER_ROLE``,
``om-stream worker --role``), and the assembled worker of each role (its Faust app, agents, table and topics),
built without a broker."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from om_stream.cli import WORKER_ROLES, build_parser
from om_stream.observability.metrics import Metrics
from om_stream.retention import changelog_config
from om_stream.runtime.worker.app import Worker
from om_stream.runtime.worker.deps import build_deps
from om_stream.runtime.worker.roles import ROLES, role_plan, with_role
from om_stream.settings import LifecycleSettings, Settings, WorkerRole


@pytest.mark.parametrize(("role", "agents", "group"), [
    ("all", ("memory", "model_workers", "recall"), "om-x"),
    ("memory", ("memory",), "om-x"),
    ("models", ("model_workers",), "om-x-models"),
    ("recall", ("recall",), "om-x-recall"),
])
def test_each_role_defines_its_agents_in_its_own_group(role: WorkerRole, agents: tuple[str, ...], group: str) -> None:
    plan = role_plan(role, "om-x", resource_scope=False)
    assert (plan.agents, plan.group_id) == (agents, group)
    assert plan.holds_table == ("memory" in agents)


def test_resource_scope_adds_ingest_to_the_roles_that_hold_the_table_only() -> None:
    plans = {role: role_plan(role, "om-x", resource_scope=True) for role in ROLES}
    assert plans["all"].agents == ("memory", "ingest", "model_workers", "recall")
    assert plans["memory"].agents == ("memory", "ingest")
    assert plans["models"].agents == ("model_workers",) and plans["recall"].agents == ("recall",)


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown worker role 'model'"):
        role_plan("model", "om-x", resource_scope=False)  # type: ignore[arg-type]


def test_the_role_setting_defaults_to_all_and_reads_om_worker_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OM_WORKER_ROLE", raising=False)
    assert Settings().worker.role == "all"
    monkeypatch.setenv("OM_WORKER_ROLE", "models")
    assert Settings().worker.role == "models"
    monkeypatch.setenv("OM_WORKER_ROLE", "reflector")
    with pytest.raises(ValidationError, match="role"):
        Settings()


def test_the_cli_flag_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert WORKER_ROLES == get_args(WorkerRole) == ROLES  # the CLI spells the roles out: they must not drift
    assert build_parser().parse_args(["worker"]).role is None
    assert build_parser().parse_args(["worker", "--role", "recall"]).role == "recall"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker", "--role", "observer"])
    monkeypatch.setenv("OM_WORKER_ROLE", "memory")
    settings = Settings()
    assert with_role(settings, None).worker.role == "memory"
    chosen = with_role(settings, "models")
    assert chosen.worker.role == "models" and settings.worker.role == "memory"
    assert chosen.worker.app_id == settings.worker.app_id and chosen.kafka == settings.kafka


def _worker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, role: WorkerRole, scope: str = "thread") -> Worker:
    for name in [n for n in os.environ if n.startswith("OM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OM_WORKER_APP_ID", "om-roles")
    monkeypatch.setenv("OM_WORKER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OM_MEMORY_STORE", "memory")
    monkeypatch.setenv("OM_MEMORY_MODEL", "offline")
    monkeypatch.setenv("OM_MEMORY_OPTIONS", json.dumps({"scope": scope}))
    return Worker(build_deps(with_role(Settings(), role)))


def _role_gauge(metrics: Metrics) -> dict[str, Any]:
    return {role: metrics.registry.get_sample_value("om_worker_role", {"role": role}) for role in ROLES}


async def test_a_models_worker_has_no_table_no_api_and_consumes_model_requests_only(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    worker = _worker(monkeypatch, tmp_path, "models")
    kafka = worker.deps.settings.kafka
    assert worker.app.conf.id == "om-roles-models" and worker.role == "models"
    assert set(worker.agents) == {"model_workers"}
    assert len(worker.app.agents) == 1 and len(worker.app.tables) == 0
    assert not worker.app.conf.web_enabled
    assert worker.consumed_topics() == (kafka.topic_model_requests,)
    assert not hasattr(worker, "table") and not hasattr(worker, "processor")
    assert _role_gauge(worker.deps.metrics) == {"all": None, "memory": None, "models": 1.0, "recall": None}


async def test_a_memory_worker_holds_the_table_and_the_api_and_takes_no_model_or_recall_request(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    worker = _worker(monkeypatch, tmp_path, "memory", scope="resource")
    kafka = worker.deps.settings.kafka
    assert worker.app.conf.id == "om-roles"
    assert set(worker.agents) == {"memory", "ingest"} and len(worker.app.agents) == 2
    assert set(worker.app.tables) == {"om_records", "om_erasures"} and worker.app.conf.web_enabled
    assert set(worker.consumed_topics()) == {kafka.topic_records, kafka.topic_model_results, kafka.topic_messages,
                                             kafka.topic_commands}
    assert _role_gauge(worker.deps.metrics)["memory"] == 1.0


async def test_the_all_role_is_one_app_with_every_agent_in_the_app_id_group(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    worker = _worker(monkeypatch, tmp_path, "all")
    kafka = worker.deps.settings.kafka
    assert worker.app.conf.id == "om-roles" and worker.role == "all"
    assert set(worker.agents) == {"memory", "model_workers", "recall"} and len(worker.app.agents) == 3
    assert set(worker.app.tables) == {"om_records", "om_erasures"} and worker.app.conf.web_enabled
    assert worker.consumed_topics() == (kafka.topic_messages, kafka.topic_commands, kafka.topic_model_results,
                                        kafka.topic_model_requests, kafka.topic_recall_requests)
    assert str(worker.app.conf.datadir).endswith("om-roles-data")


async def test_a_recall_worker_consumes_recall_requests_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    worker = _worker(monkeypatch, tmp_path, "recall")
    assert worker.app.conf.id == "om-roles-recall" and set(worker.agents) == {"recall"}
    assert len(worker.app.tables) == 0 and len(worker.app.agents) == 1
    assert worker.consumed_topics() == (worker.deps.settings.kafka.topic_recall_requests,)


# compacted with the lifecycle settings' bounds, and segments of OM_KAFKA_CHANGELOG_SEGMENT_MB's default, 16 MiB
CHANGELOG = {**changelog_config(LifecycleSettings()), "segment.bytes": str(16 * 2**20)}


@pytest.mark.parametrize(("role", "expected"), [
    ("memory", {"om-roles-om_records-changelog": (-1, CHANGELOG),
                "om-roles-om_erasures-changelog": (-1, CHANGELOG),
                "om-roles-__assignor-__leader": (1, {})}),
    ("models", {"om-roles-models-__assignor-__leader": (1, {})}),
])
async def test_the_app_s_own_topics_are_named_for_creation_before_the_app_starts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, role: WorkerRole,
        expected: dict[str, tuple[int, dict[str, str]]]) -> None:
    """The changelog as Faust itself would create it (compacted with the lifecycle settings' bounds, the inputs'
    partitions), so that ``ensure_topics`` makes it and waits for its metadata before the app starts (Faust's own
    creation is then a no-op)."""
    worker = _worker(monkeypatch, tmp_path, role)
    partitions = worker.deps.settings.kafka.partitions  # -1 above: the inputs' partition count
    assert worker.internal_topics() == {name: (partitions if n == -1 else n, config)
                                        for name, (n, config) in expected.items()}
    for table in worker.app.tables.values():
        assert table.changelog_topic.get_topic_name() in expected
    assert worker.changelogs() == tuple(name for name in expected if name.endswith("-changelog"))
