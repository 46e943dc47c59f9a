"""The om-stream image, built by the project's own script (``infra/image/build.sh``, what ``make image`` runs), and
containers of it run through whichever engine that script set up (podman, or a docker whose daemon answers).

Nothing here builds or configures an engine itself: a machine where the script cannot set one up fails the test
with the script's own message.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "infra" / "image" / "build.sh"


@dataclass(frozen=True)
class Engine:
    """A container engine (``podman`` or ``docker``) and the environment its commands need (CONTAINERS_CONF)."""

    name: str
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([self.name, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{self.name} {' '.join(args[:3])} ... exited {done.returncode}:\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def healthy(self, container: str) -> bool:
        """One run of the image's HEALTHCHECK (podman: no systemd timers here, so it is run on demand)."""
        if self.name == "podman":
            return self.run("healthcheck", "run", container, check=False, timeout=30).returncode == 0
        status = self.run("inspect", "--format", "{{.State.Health.Status}}", container).stdout.strip()
        return status == "healthy"

    def inspect(self, container: str) -> dict[str, object]:
        data: list[dict[str, object]] = json.loads(self.run("inspect", container).stdout)
        return data[0]


@dataclass(frozen=True)
class BuiltImage:
    engine: Engine
    tag: str
    build_seconds: float
    build_log: str


def build_image() -> BuiltImage:
    started = time.monotonic()
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=3600,
                          check=False)
    if done.returncode != 0:
        pytest.fail(f"{BUILD_SCRIPT.relative_to(ROOT)} failed (rc={done.returncode}): no image could be built "
                    f"with podman or docker on this machine:\n{done.stderr[-5000:]}", pytrace=False)
    outputs = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    env = dict(os.environ)
    if outputs.get("CONTAINERS_CONF"):
        env["CONTAINERS_CONF"] = outputs["CONTAINERS_CONF"]
    return BuiltImage(Engine(outputs["OM_IMAGE_ENGINE"], env), outputs["OM_IMAGE"], time.monotonic() - started,
                      done.stderr)


@contextmanager
def container_name(prefix: str, engine: Engine) -> Iterator[str]:
    """A unique container name; whatever ran under it is removed at the end, passed or failed."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        engine.run("rm", "--force", name, check=False, timeout=60)


def env_args(env: dict[str, str]) -> list[str]:
    return [arg for key, value in sorted(env.items()) for arg in ("--env", f"{key}={value}")]


def host_uid_of(pid: int) -> int:
    """The real uid the kernel runs ``pid`` with (the host's view, whatever the image says)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line in /proc/{pid}/status")
