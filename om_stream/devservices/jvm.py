"""Fetching JVM class paths from Maven Central and running JVM services as child processes.

Owns: the jar cache (one folder per pom content, reused across runs), free loopback ports, launching a JVM with
its output in a log file (never an undrained pipe), and stopping it so that no process is left behind.
Never holds: anything about a particular service's configuration (see kafka.py / cassandra.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from om_stream.errors import OMError

_fetch_lock = threading.Lock()


class DevServiceError(OMError):
    """A development service (Kafka, Cassandra) could not be fetched, started or stopped."""


def infra_dir() -> Path:
    """The folder holding the poms and configuration templates (``infra/jvm`` in the repository)."""
    override = os.environ.get("OM_INFRA_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "infra" / "jvm"


def java_binary() -> str:
    """Java 17: Cassandra 5.0 supports 11 and 17 only, and Kafka 4.x brokers need 17."""
    explicit = os.environ.get("OM_JAVA")
    if explicit:
        return explicit
    debian = Path("/usr/lib/jvm/java-17-openjdk-amd64/bin/java")
    if debian.exists():
        return str(debian)
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise DevServiceError("no Java 17 found: install openjdk-17-jre-headless or set OM_JAVA")
    return found


def cache_root() -> Path:
    return Path(os.environ.get("OM_JVM_CACHE", Path.home() / ".cache" / "om-stream" / "jvm"))


def class_path(service: str) -> Path:
    """Return the lib folder for ``service`` (kafka|cassandra), fetching the jars once per pom content."""
    pom = infra_dir() / service / "pom.xml"
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    lib = cache_root() / f"{service}-{digest}" / "lib"
    with _fetch_lock:
        if (lib / ".complete").exists():
            return lib
        if lib.exists():
            shutil.rmtree(lib)
        lib.mkdir(parents=True)
        log = lib.parent / "mvn.log"
        mvn = shutil.which("mvn")
        if not mvn:
            raise DevServiceError("Maven (mvn) is needed to fetch the service jars from Maven Central")
        with log.open("wb") as out:
            rc = subprocess.call(
                [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                 "-DincludeScope=runtime", "-Dmdep.prependGroupId=true", f"-DoutputDirectory={lib}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        if rc != 0:
            raise DevServiceError(f"mvn could not fetch the {service} jars (rc={rc}):\n{tail(log)}")
        (lib / ".complete").touch()
        return lib


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text[-lines:])


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: the JVM is killed if the process that launched it dies (e.g. pytest killed -9).
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)


@dataclass
class JvmProcess:
    """A running JVM service: its process and the log that explains it when it fails."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path  # the log that explains a failure (the service's own log when it has one)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            raise DevServiceError(
                f"{self.name} exited with rc={self.popen.returncode}; last lines of {self.log}:\n{tail(self.log)}"
            )

    def stop(self, grace: float = 30.0) -> None:
        stop_pid(self.pid, grace)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(1)


def launch(name: str, argv: list[str], stdout_log: Path, *, detached: bool, log: Path | None = None) -> JvmProcess:
    """Start ``argv`` with stdout/stderr in ``stdout_log``; ``log`` is the service log shown on failure.

    ``detached`` processes outlive the caller (``make services-up``); attached ones die with it (pytest).
    Launch attached processes from the main thread: the parent-death signal follows the launching thread.
    """
    stdout_log.parent.mkdir(parents=True, exist_ok=True)
    with stdout_log.open("ab") as out:
        popen = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=None if detached else _die_with_parent,  # noqa: PLW1509 - only prctl, no locks
        )
    return JvmProcess(name, popen, log or stdout_log)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still answers kill(0); look at its state
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop_pid(pid: int, grace: float = 30.0) -> None:
    """SIGTERM the process group (the JVM runs its shutdown hooks), then SIGKILL after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not pid_alive(pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not pid_alive(pid):
                return
            time.sleep(0.1)
    if pid_alive(pid):
        raise DevServiceError(f"process {pid} survived SIGKILL")
