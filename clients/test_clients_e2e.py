"""The TypeScript and Go clients end to end: real Apache Kafka and a running ``om-stream worker`` (recall included).

Each suite runs as a subprocess (``npm run test:e2e``, ``go test -tags e2e``) with the worker's own ``OM_KAFKA_*``
variables (bootstrap, partitions, topic names) in its environment, and must exit 0. The worker is started exactly
as ``tests/support/worker.py`` starts it (offline model, SQLite store, unique topic names).

    .venv/bin/pytest clients/test_clients_e2e.py      (OM_KAFKA_BOOTSTRAP=host:port to use a running broker)
"""

from __future__ import annotations

import asyncio
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
    "go": (["go", "test", "-count=1", "-tags", "e2e", "-run", "E2E", "-v", "./..."], CLIENTS / "go"),
}


@pytest.fixture
async def stack(kafka_bootstrap: str, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    async with running_worker(kafka_bootstrap, tmp_path, options=OPTIONS, store="sqlite", partitions=3) as worker:
        yield worker


@pytest.mark.parametrize("suite", sorted(SUITES))
async def test_the_client_passes_its_end_to_end_suite(stack: WorkerProcess, suite: str) -> None:
    command, cwd = SUITES[suite]
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
