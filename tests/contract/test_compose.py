"""docker-compose.yml, checked without a Docker engine (none runs here): Compose itself resolves the file with no
error and no warning (Docker Compose v2's ``config --quiet``, built from the Go module proxy by
infra/tools/install-compose.sh, and ``podman-compose config``, pinned in requirements.lock); the compose
specification's JSON schema (the one Docker Compose validates with, from the compose-go Go module); the references
between services, volumes and files; every ``OM_*`` variable against settings.py; the worker's image, ports, token
and health check; every published port bound to loopback; the Prometheus config with ``promtool``; and the
Dockerfile's inputs against .dockerignore.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from om_stream.observability.settings_doc import settings_docs
from om_stream.runtime.worker.auth import exposure_refusal
from om_stream.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
TOOLS = ROOT / "infra" / "tools"
PODMAN_COMPOSE = Path(sys.executable).with_name("podman-compose")
TOKEN = "compose-test-token-0123456789abcdef"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _tool(script: str, timeout: float = 600) -> str:
    out = subprocess.run(["bash", str(TOOLS / script)], check=False, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        pytest.fail(f"{script} failed:\n{out.stderr[-3000:]}", pytrace=False)
    return out.stdout.strip().splitlines()[-1].split("=", 1)[1]


_VARIABLE = re.compile(r"\$\{(\w+)(?:(:?-)([^}]*)|(:?\?)[^}]*)?\}")


def interpolated(node: Any) -> Any:
    """What Compose validates: ``${VAR:-default}`` with the variables unset (the defaults, or empty), and a required
    ``${VAR:?message}`` given a value."""
    if isinstance(node, dict):
        return {k: interpolated(v) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolated(v) for v in node]
    if isinstance(node, str):
        return _VARIABLE.sub(lambda m: "required-value" if m.group(4) else m.group(3) or "", node)
    return node


def compose_config(tmp_path: Path, env_file: str = "", **environment: str) -> subprocess.CompletedProcess[str]:
    """``podman-compose config`` on the file: only the given variables in the environment, and ``env_file`` in place
    of a developer's .env next to the file (Compose reads that one by default)."""
    if not PODMAN_COMPOSE.exists():
        pytest.fail(f"{PODMAN_COMPOSE} is missing: `make install` installs podman-compose from requirements.lock",
                    pytrace=False)
    if shutil.which("podman") is None:
        pytest.fail("podman is missing (podman-compose refuses to run without it): `make tools-podman` installs it",
                    pytrace=False)
    dotenv = tmp_path / "compose.env"
    dotenv.write_text(env_file)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **environment}
    return subprocess.run([str(PODMAN_COMPOSE), "--env-file", str(dotenv), "-f", str(COMPOSE), "config"],
                          check=False, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)


def docker_compose_config(binary: str, tmp_path: Path, env_file: str = "",
                          **environment: str) -> subprocess.CompletedProcess[str]:
    """``docker compose config --quiet`` (Compose v2, built by infra/tools/install-compose.sh), isolated the same way
    as :func:`compose_config`."""
    dotenv = tmp_path / "docker-compose.env"
    dotenv.write_text(env_file)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **environment}
    return subprocess.run([binary, "--env-file", str(dotenv), "-f", str(COMPOSE), "config", "--quiet"],
                          check=False, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def published_host_ip(port: str | dict[str, Any]) -> str:
    """The host address a ``ports`` entry binds (short ``[IP:][HOST:]CONTAINER`` or long syntax); "" is every
    interface, as Compose publishes an entry without an address."""
    if isinstance(port, dict):
        return str(port.get("host_ip", ""))
    parts = str(port).rsplit(":", 2)
    return parts[0] if len(parts) == 3 else ""


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The file as Compose resolves it, with the one variable it requires set."""
    out = compose_config(tmp_path_factory.mktemp("compose"), OM_WORKER_API_TOKEN=TOKEN)
    assert out.returncode == 0, out.stderr[-3000:]
    document: dict[str, Any] = yaml.safe_load(out.stdout)
    return document


def test_compose_resolves_the_file_without_an_error_or_a_warning(tmp_path: Path) -> None:
    out = compose_config(tmp_path, OM_WORKER_API_TOKEN=TOKEN)
    assert (out.returncode, out.stderr) == (0, ""), out.stderr[-3000:]
    assert set(yaml.safe_load(out.stdout)["services"]) == set(yaml.safe_load(COMPOSE.read_text())["services"])


@pytest.fixture(scope="module")
def docker_compose() -> str:
    return _tool("install-compose.sh", timeout=1800)  # a cold build from the Go module proxy takes minutes


def test_docker_compose_accepts_the_file_without_an_error_or_a_warning(docker_compose: str, tmp_path: Path) -> None:
    out = docker_compose_config(docker_compose, tmp_path, OM_WORKER_API_TOKEN=TOKEN)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", ""), out.stderr[-3000:]
    refused = docker_compose_config(docker_compose, tmp_path)
    assert refused.returncode != 0
    assert "required variable OM_WORKER_API_TOKEN is missing a value" in refused.stderr, refused.stderr[-3000:]


def test_docker_compose_reports_what_podman_compose_lets_through(docker_compose: str, tmp_path: Path) -> None:
    """The reason to run Compose v2 too: podman-compose accepts an unknown dependency and an unset variable."""
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["om-stream"]["depends_on"]["no-such-service"] = {"condition": "service_started"}
    broken["services"]["grafana"]["image"] = "grafana/grafana:${NO_SUCH_GRAFANA_TAG}"
    copy = ROOT / f".compose-contract-{os.getpid()}.yml"  # beside the original: its relative paths must resolve
    copy.write_text(yaml.safe_dump(broken))
    try:
        dotenv = tmp_path / "empty.env"
        dotenv.write_text("")
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "OM_WORKER_API_TOKEN": TOKEN}
        out = subprocess.run([docker_compose, "--env-file", str(dotenv), "-f", str(copy), "config", "--quiet"],
                             check=False, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    finally:
        copy.unlink()
    assert out.returncode != 0 and "no-such-service" in out.stderr, out.stderr[-3000:]
    assert "NO_SUCH_GRAFANA_TAG" in out.stderr, out.stderr[-3000:]


def test_compose_refuses_to_run_the_worker_without_an_api_token(tmp_path: Path) -> None:
    out = compose_config(tmp_path)
    assert out.returncode != 0
    assert "required variable OM_WORKER_API_TOKEN is missing a value" in out.stderr, out.stderr[-3000:]
    assert compose_config(tmp_path, OM_WORKER_API_TOKEN="").returncode != 0  # an empty token is no token


def test_the_api_token_can_come_from_an_env_file(tmp_path: Path) -> None:
    out = compose_config(tmp_path, env_file="OM_WORKER_API_TOKEN=from-the-env-file\n")
    assert (out.returncode, out.stderr) == (0, ""), out.stderr[-3000:]
    worker = yaml.safe_load(out.stdout)["services"]["om-stream"]
    assert worker["environment"]["OM_WORKER_API_TOKEN"] == "from-the-env-file"


def test_every_published_port_is_bound_to_loopback_only(resolved: dict[str, Any]) -> None:
    ports = {(name, str(p)): published_host_ip(p) for name, s in resolved["services"].items()
             for p in s.get("ports") or []}
    assert {name for name, _ in ports} >= {"kafka", "qdrant", "om-stream", "prometheus", "grafana"}
    assert {k: ip for k, ip in ports.items() if ip != "127.0.0.1"} == {}
    assert all("network_mode" not in s for s in resolved["services"].values())  # host networking bypasses ports


def test_the_port_check_sees_an_entry_open_to_every_interface() -> None:
    assert published_host_ip("127.0.0.1:6066:6066") == "127.0.0.1"
    assert published_host_ip({"target": 6066, "published": "6066", "host_ip": "127.0.0.1"}) == "127.0.0.1"
    for open_entry in ("6066:6066", "6066", "0.0.0.0:6066:6066", {"target": 6066, "published": "6066"}):
        assert published_host_ip(open_entry) != "127.0.0.1", open_entry


def test_the_worker_runs_the_image_make_image_builds(resolved: dict[str, Any]) -> None:
    for name in ("om-stream", "migrate"):
        service = resolved["services"][name]
        assert service["image"] == f"om-stream:{VERSION}", name
        assert Path(service["build"]["context"]) == ROOT, name
        assert service["build"].get("dockerfile", "Dockerfile") == "Dockerfile", name
    assert (ROOT / "Dockerfile").exists()


def test_the_worker_api_needs_the_token_and_metrics_have_a_port_of_their_own(
        resolved: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    worker = resolved["services"]["om-stream"]
    environment = {k: str(v) for k, v in worker["environment"].items()}
    for key in [k for k in os.environ if k.startswith("OM_")]:
        monkeypatch.delenv(key)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.worker.api_token is not None and settings.worker.api_token.get_secret_value() == TOKEN
    assert (settings.worker.web_port, settings.worker.metrics_port) == (6066, 6067)
    assert settings.worker.metrics_host == "0.0.0.0"  # Prometheus scrapes it from another container
    assert not settings.worker.allow_unauthenticated
    assert exposure_refusal(settings.worker) is None  # the worker starts with exactly these settings
    assert sorted(str(p) for p in worker["ports"]) == ["127.0.0.1:6066:6066", "127.0.0.1:6067:6067"]


def test_the_worker_health_check_asks_the_metrics_port(resolved: dict[str, Any]) -> None:
    check = resolved["services"]["om-stream"]["healthcheck"]
    assert check["test"][:3] == ["CMD", "python", "-c"]
    code = check["test"][3]
    compile(code, "healthcheck", "exec")
    assert "'http://127.0.0.1:6067/healthz'" in code and ".status != 200" in code
    assert check["start_period"] == "120s"  # table recovery comes before /healthz answers 200


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
    published = [str(p).rsplit(":", 1)[0] for s in services.values() for p in s.get("ports") or []]  # ip:host port
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
    targets = [t for job in config["scrape_configs"] for group in job.get("static_configs", [])
               for t in group["targets"]]
    targets += [f"{name}:{sd['port']}" for job in config["scrape_configs"] for sd in job.get("dns_sd_configs", [])
                for name in sd["names"]]
    assert "om-stream:6067" in targets  # the metrics port: the API port needs a token Prometheus does not have
    assert "om-models:6067" in targets  # every replica of the model workers, by DNS
    assert not any(t.endswith(":6066") for t in targets)
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


def test_the_memory_worker_and_the_model_workers_run_apart(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["om-stream"]["environment"]["OM_WORKER_ROLE"] == "memory"
    models = services["om-models"]
    assert models["environment"]["OM_WORKER_ROLE"] == "models"
    assert "ports" not in models  # no API in that role; its metrics are scraped inside the compose network
    assert models["image"] == services["om-stream"]["image"]
    assert "OM_WORKER_WEB_HOST" not in models["environment"]  # loopback default: nothing to protect
