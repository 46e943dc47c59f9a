"""docker-compose.yml, checked without a Docker engine (none runs here): the compose specification's JSON schema (the
one Docker Compose validates with, from the compose-go Go module), the references between services, volumes and
files, every ``OM_*`` variable against settings.py, the Prometheus config with ``promtool``, and the Dockerfile's
inputs against .dockerignore.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from om_stream.observability.settings_doc import settings_docs

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
TOOLS = ROOT / "infra" / "tools"


def _tool(script: str) -> str:
    out = subprocess.run(["bash", str(TOOLS / script)], check=False, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        pytest.fail(f"{script} failed:\n{out.stderr[-3000:]}", pytrace=False)
    return out.stdout.strip().splitlines()[-1].split("=", 1)[1]


_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def interpolated(node: Any) -> Any:
    """What Compose validates: ``${VAR:-default}`` with the variables unset (the defaults, or empty)."""
    if isinstance(node, dict):
        return {k: interpolated(v) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolated(v) for v in node]
    if isinstance(node, str):
        return _VARIABLE.sub(lambda m: m.group(2) or "", node)
    return node


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def test_compose_file_matches_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = json.loads(Path(_tool("install-compose-schema.sh")).read_text())
    validator = Draft202012Validator(schema)
    for document in (compose, interpolated(compose)):
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
        assert errors == []


def test_the_schema_really_rejects_a_broken_file(compose: dict[str, Any]) -> None:
    schema = json.loads(Path(_tool("install-compose-schema.sh")).read_text())
    broken = json.loads(json.dumps(compose))
    broken["services"]["om-stream"]["depends_on"]["kafka"]["condition"] = "service_ready"
    broken["services"]["kafka"]["helthcheck"] = broken["services"]["kafka"].pop("healthcheck")
    assert len(list(Draft202012Validator(schema).iter_errors(broken))) >= 2


def test_the_stack_has_every_service_the_issue_names(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"kafka", "cassandra", "qdrant", "om-stream", "prometheus", "grafana"} <= set(services)
    assert "KRaft" in COMPOSE.read_text() or "controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    assert services["om-stream"]["build"] == "."
    assert services["om-stream"]["environment"]["OM_WORKER_WEB_HOST"] == "0.0.0.0"


def test_references_between_services_volumes_and_files_resolve(compose: dict[str, Any]) -> None:
    services = compose["services"]
    declared = set(compose.get("volumes") or {})
    problems = []
    for name, service in services.items():
        for dependency in service.get("depends_on") or {}:
            if dependency not in services:
                problems.append(f"{name} depends on unknown service {dependency}")
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                if not (ROOT / source).exists():
                    problems.append(f"{name} mounts missing {source}")
            elif source not in declared:
                problems.append(f"{name} uses undeclared volume {source}")
    published = [p.split(":")[0] for s in services.values() for p in s.get("ports") or []]
    assert len(published) == len(set(published)), "a host port is published twice"
    assert problems == []


def test_every_om_variable_is_a_real_setting(compose: dict[str, Any]) -> None:
    known = {d.env for d in settings_docs()}
    used = {key for s in compose["services"].values() for key in (s.get("environment") or {})
            if key.startswith("OM_")} | {k for k in compose["x-om-settings"] if k.startswith("OM_")}
    assert used and used <= known, sorted(used - known)


def test_prometheus_scrapes_the_worker_and_its_config_is_valid(compose: dict[str, Any]) -> None:
    config_path = ROOT / "infra" / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(config_path.read_text())
    targets = [t for job in config["scrape_configs"] for group in job["static_configs"] for t in group["targets"]]
    assert "om-stream:6066" in targets
    prometheus = Path(_tool("install-prometheus.sh"))
    out = subprocess.run([str(prometheus.with_name("promtool")), "check", "config", str(config_path)],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_grafana_gets_the_provisioning_and_the_dashboards(compose: dict[str, Any]) -> None:
    mounts = {v.split(":")[0]: v.split(":")[1] for v in compose["services"]["grafana"]["volumes"]}
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    provider = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/om-stream.yaml").read_text())
    assert mounts["./grafana/dashboards"] == provider["providers"][0]["options"]["path"]
    source = yaml.safe_load((ROOT / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert source["datasources"][0]["url"] == "http://prometheus:9090"


def test_dockerfile_copies_only_what_dockerignore_lets_through() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    ignore = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
              if line and not line.startswith("#")]
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = [p for line in dockerfile.splitlines() if line.startswith("COPY ") and "--from" not in line
              for p in line.split()[1:-1]]
    assert copied and all(p.rstrip("/") in allowed and (ROOT / p).exists() for p in copied), copied
    assert 'CMD ["om-stream", "worker"]' in dockerfile
    assert 'om-stream = "om_stream.cli:main"' in (ROOT / "pyproject.toml").read_text()
