"""The TypeScript and Go clients end to end: real Apache Kafka and a running ``om-stream worker`` (recall included).

Each suite runs as a subprocess (``npm run test:e2e``, ``go test -tags e2e``) with the worker's own ``OM_KAFKA_*``
variables (bootstrap, partitions, topic names) in its environment, and must exit 0. The worker is started exactly
as ``tests/support/worker.py`` starts it (offline model, SQLite store, unique topic names).

The contexts-by-reference suites (``npm run test:e2e:v2``, ``go test -tags e2e -run WireV2``) run against a worker
with ``OM_CONTEXT_WIRE=v2`` and an API token: each client's assembled contexts must equal the worker's own
``GET /v1/threads/{id}/context``, and a client started late fetches the run it lacks with the token.

    .venv/bin/pytest clients/test_clients_e2e.py      (OM_KAFKA_BOOTSTRAP=host:port to use a running broker)
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.worker import WorkerProcess, running_worker

CLIENTS = Path(__file__).resolve().parent
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 150, "bufferTokens": 0.25, "blockAfter": 1.2},
                           "reflection": {"observationTokens": 250}}
SUITES = {
    "ts": (["npm", "run", "--silent", "test:e2e"], CLIENTS / "ts"),
    "go": (["go", "test", "-count=1", "-tags", "e2e", "-run", "E2E", "-skip", "WireV2", "-v", "./..."], CLIENTS / "go"),
}
# small thresholds, no buffering: observations and a reflection happen at known messages, within a short conversation
V2_OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 120, "bufferTokens": False},
                              "reflection": {"observationTokens": 90}}
V2_SUITES = {
    "ts": (["npm", "run", "--silent", "test:e2e:v2"], CLIENTS / "ts"),
    "go": (["go", "test", "-count=1", "-tags", "e2e", "-run", "WireV2", "-v", "./..."], CLIENTS / "go"),
}


@pytest.fixture
async def stack(kafka_bootstrap: str, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=3) as worker:
        yield worker


@pytest.fixture
async def stack_v2(kafka_bootstrap: str, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    extra = {"OM_CONTEXT_WIRE": "v2", "OM_WORKER_API_TOKEN": secrets.token_urlsafe(16)}
    async with running_worker(kafka_bootstrap, tmp_path, options=V2_OPTIONS, store="sqlite", partitions=3,
                              extra=extra) as worker:
        yield worker


@pytest.mark.parametrize("suite", sorted(SUITES))
async def test_the_client_passes_its_end_to_end_suite(stack: WorkerProcess, suite: str) -> None:
    await _passes(stack, *SUITES[suite], suite)


@pytest.mark.parametrize("suite", sorted(V2_SUITES))
async def test_the_client_assembles_contexts_by_reference(stack_v2: WorkerProcess, suite: str) -> None:
    await _passes(stack_v2, *V2_SUITES[suite], f"{suite} (om.context/v2)")


async def _passes(stack: WorkerProcess, command: list[str], cwd: Path, suite: str) -> None:
    process = await asyncio.create_subprocess_exec(*command, cwd=cwd, env=stack.env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.STDOUT)
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=420)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    text = output.decode(errors="replace")
    print(text)
    assert process.returncode == 0, f"{suite} end-to-end suite failed:\n{text[-8000:]}\n--- worker ---\n{stack.tail()}"
