"""Moving a resource between two worker deployments on real Apache Kafka: exported from one (over HTTP on
Cassandra, with ``om-stream export`` on SQLite while its worker is stopped), imported into the other with
``om-stream import`` (its own keyspace or file, its own topics and table), the contexts of every thread are the
same, byte for byte, and the memory goes on the same."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cassandra.cluster import Cluster

from om_stream.adapters.cassandra_store import migrate
from om_stream.settings import CassandraSettings
from tests.support.cluster import WorkerGroup, new_keyspace
from tests.support.worker import ROOT, Agent, WorkerProcess, agent_for, http_exchange, message_record, running_worker

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 150, "bufferTokens": 0.25},
                           "reflection": {"observationTokens": 250}}
TOKEN = "export-secret"
THREADS = {"t-plan": "ana", "t-ops": "ana", "t-bob": "bob"}
WORDS = ("the deployment moved to friday because the staging cluster needs a new partition plan and the budget "
         "review waits for it")


@pytest.fixture
def keyspaces(cassandra_hosts: str) -> Iterator[tuple[str, str]]:
    names = tuple(f"it_move_{side}_{uuid.uuid4().hex[:8]}" for side in ("a", "b"))
    for name in names:
        migrate(CassandraSettings(hosts=cassandra_hosts, keyspace=name))
    yield names  # type: ignore[misc]
    (host, port), = CassandraSettings(hosts=cassandra_hosts).contact_points()
    cluster = Cluster([host], port=port, protocol_version=5)
    try:
        session = cluster.connect()
        for name in names:
            session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)
    finally:
        cluster.shutdown()


async def _converse(agent: Agent, turns: int = 9, threads: dict[str, str] = THREADS) -> None:
    for turn in range(turns):
        for thread, resource in threads.items():
            for role, index in (("user", 2 * turn), ("assistant", 2 * turn + 1)):
                record = message_record(thread, index, role, f"{thread} turn {turn}: {WORDS} {turn}",
                                        resource=resource)
                await agent.send(record, key=thread.encode())
    for thread in threads:
        await agent.context_through(thread, f"{thread}-m{2 * turns - 1}")
    await _quiet(agent)


async def _quiet(agent: Agent, settle_s: float = 3.0, timeout: float = 120.0) -> None:
    """Until every Observer/Reflector call that started has ended and no event came for ``settle_s``."""
    deadline = time.monotonic() + timeout
    while True:
        def ended(a: Agent) -> bool:
            starts = {e["cycleId"] for _, e, h in a.events if h["ce_type"].endswith(b"-start")}
            ends = {e["cycleId"] for _, e, h in a.events if h["ce_type"].endswith((b"-end", b"-failed"))}
            return starts <= ends

        await agent.until(ended, timeout=max(1.0, deadline - time.monotonic()))
        seen = len(agent.events)
        calm = time.monotonic() + settle_s
        while time.monotonic() < calm:
            await agent.pump(timeout_ms=300)
        if len(agent.events) == seen and ended(agent):
            return
        assert time.monotonic() < deadline, f"the worker never went quiet:\n{agent.worker.tail()}"


async def _context(worker: WorkerProcess, thread: str, timeout: float = 60.0) -> bytes:
    """The thread's context from the worker's HTTP API, once it holds the thread."""
    deadline = time.monotonic() + timeout
    while True:
        status, _, body = await http_exchange(worker.port, "GET", f"/v1/threads/{thread}/context",
                                              headers={"Authorization": f"Bearer {TOKEN}"})
        if status == 200:
            return body
        assert status == 404 and time.monotonic() < deadline, (status, body[:300], worker.tail())
        await asyncio.sleep(0.3)


async def _download(worker: WorkerProcess, resource: str, path: Path) -> dict[str, str]:
    """``GET /v1/resources/{id}/export`` over HTTP/1.1, written to ``path`` as it arrives; its headers."""
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{worker.port}/v1/resources/{resource}/export",
            headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        assert response.status == 200, await response.text()
        with path.open("wb") as out:
            async for chunk in response.content.iter_chunked(65536):
                out.write(chunk)
        return dict(response.headers)


def _run(worker: WorkerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """``om-stream ARGS`` configured as the worker is (its OM_* environment)."""
    return subprocess.run([sys.executable, "-m", "om_stream.cli", *args], cwd=ROOT, env=worker.env,
                          capture_output=True, text=True, timeout=180, check=False)


def _cli(worker: WorkerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    done = _run(worker, *args)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


def _body(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    for line in lines:
        line.pop("exported_at", None)
    return lines


async def test_a_resource_moves_between_cassandra_deployments_over_http_and_the_cli(
        kafka_bootstrap: str, cassandra_hosts: str, keyspaces: tuple[str, str], tmp_path: Path) -> None:
    def env(keyspace: str) -> dict[str, str]:
        return {"OM_CASSANDRA_HOSTS": cassandra_hosts, "OM_CASSANDRA_KEYSPACE": keyspace, "OM_WORKER_API_TOKEN": TOKEN}

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    exported, again = tmp_path / "ana.jsonl", tmp_path / "ana-again.jsonl"
    async with running_worker(kafka_bootstrap, tmp_path / "a", options=OPTIONS, store="cassandra",
                              extra=env(keyspaces[0])) as source, agent_for(source) as agent:
        await _converse(agent)
        mine = {thread: await _context(source, thread) for thread in ("t-plan", "t-ops")}
        assert all(b"<observations>" in context for context in mine.values())
        status, _, body = await http_exchange(source.port, "GET", "/v1/resources/ana/export")
        assert status == 401, body  # behind the bearer token like every /v1/* route
        status, _, body = await http_exchange(source.port, "GET", "/v1/resources/nobody/export",
                                              headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 404 and json.loads(body)["error"] == "not_found"
        headers = await _download(source, "ana", exported)
        assert headers["Content-Type"] == "application/x-ndjson" and headers["Transfer-Encoding"] == "chunked"
        lines = _body(exported)
        end = lines[-1]
        assert end["type"] == "end" and end["counts"]["states"] == 2 and end["records_without_state"] == []
        assert not any("t-bob" in json.dumps(line) for line in lines), "another tenant's memory was exported"

        async with running_worker(kafka_bootstrap, tmp_path / "b", options=OPTIONS, store="cassandra",
                                  extra=env(keyspaces[1])) as target, agent_for(target) as theirs:
            done = _cli(target, "import", str(exported))
            assert "2 record states" in done.stdout
            for thread, context in mine.items():
                assert await _context(target, thread) == context
                published = await theirs.context_through(thread, f"{thread}-m17")  # the restore published it
                assert published["version"] == json.loads(context)["version"]
            await _download(target, "ana", again)
            assert _body(again) == lines, "the imported deployment does not export what it imported"
            refused = _run(target, "import", str(exported))
            assert refused.returncode == 2 and "already holds" in refused.stderr

            # the memory goes on the same: one more turn on both sides, decided alike
            record = message_record("t-plan", 18, "user", f"t-plan turn 9: {WORDS} and one more thing",
                                    resource="ana")
            await agent.send(record, key=b"t-plan")
            await theirs.send(record, key=b"t-plan")
            await agent.context_through("t-plan", "t-plan-m18")
            await theirs.context_through("t-plan", "t-plan-m18")
            # m18 starts a buffered observation on each side, and its end publishes the thread's context again (a
            # new version): compare the newest contexts once both sides are done, not whichever came first
            await _quiet(agent)
            await _quiet(theirs)
            ours_next = await agent.context_through("t-plan", "t-plan-m18")
            theirs_next = await theirs.context_through("t-plan", "t-plan-m18")
            assert ours_next == theirs_next, (  # each side's contexts of the thread, to tell which numbered apart
                [(c["version"], c["through_message_id"]) for c in agent.contexts["t-plan"]],
                [(c["version"], c["through_message_id"]) for c in theirs.contexts["t-plan"]],
                source.tail(debug=False), target.tail(debug=False))


async def test_a_resource_moves_between_sqlite_deployments_with_the_cli_while_the_source_is_stopped(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    exported = tmp_path / "ana.jsonl"
    extra = {"OM_WORKER_API_TOKEN": TOKEN}
    async with running_worker(kafka_bootstrap, tmp_path / "a", options=OPTIONS, store="sqlite",
                              extra=extra) as source:
        async with agent_for(source) as agent:
            await _converse(agent)
        mine = {thread: await _context(source, thread) for thread in ("t-plan", "t-ops")}
    # the source's worker is stopped: the store and the state table's changelog hold everything
    done = _cli(source, "export", "--resource", "ana", "--out", str(exported))
    assert "bytes written" in done.stderr and not (tmp_path / "ana.jsonl.partial").exists()
    lines = _body(exported)
    assert lines[-1]["counts"]["states"] == 2 and lines[-1]["records_without_state"] == []
    async with running_worker(kafka_bootstrap, tmp_path / "b", options=OPTIONS, store="sqlite",
                              extra=extra) as target:
        _cli(target, "import", str(exported))
        for thread, context in mine.items():
            assert await _context(target, thread) == context
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"\n".join(exported.read_bytes().splitlines()[:-1]) + b"\n")
    refused = _run(target, "import", str(cut))
    assert refused.returncode == 2 and "does not end with an export's end line" in refused.stderr


async def test_any_worker_of_a_group_exports_every_record_of_the_resource(kafka_bootstrap: str, cassandra_hosts: str,
                                                                         tmp_path: Path) -> None:
    """Two workers share the resource's records: each exports the whole resource, the records it holds from its
    table and the others' from the table's changelog, and both files are the same."""
    group = WorkerGroup(kafka_bootstrap, tmp_path / "group", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts), partitions=4, options=OPTIONS,
                        extra={"OM_WORKER_API_TOKEN": TOKEN})
    threads = {f"t-{n}": "ana" for n in range(8)}
    first, second = group.add(), group.add()
    try:
        await group.wait_ready()
        await group.settle()
        async with agent_for(first) as agent:
            await _converse(agent, turns=5, threads=threads)
        held = {}
        for thread in threads:
            answers = [(await http_exchange(w.port, "GET", f"/v1/threads/{thread}/context",
                                            headers={"Authorization": f"Bearer {TOKEN}"}))[0] for w in (first, second)]
            held[thread] = answers.index(200)
        assert set(held.values()) == {0, 1}, "one worker holds every thread: nothing to read from the changelog"
        files = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
        for worker, path in zip((first, second), files, strict=True):
            await _download(worker, "ana", path)
        bodies = [_body(path) for path in files]
        assert bodies[0][-1]["counts"]["states"] == len(threads) and bodies[0][-1]["records_without_state"] == []
        assert bodies[0] == bodies[1]
    finally:
        group.stop_all()
