"""A worker that cannot do its job says so and stops, instead of answering "ready" forever (crash-only):

* a content store it cannot use (a keyspace never migrated, Cassandra unreachable) stops it at start-up, before
  it is ever ready, with exit status 2 and a message naming the fix;
* an agent that crashes stops the process with exit status 1 (Faust would restart the agent in place, and it
  could consume nothing more);
* a partition with records waiting that makes no progress fails ``/livez`` (the liveness probe);
* a stop (SIGTERM) ends within ``worker.shutdown_timeout_s`` whatever the agents are stuck on.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import Cluster

from om_stream.devservices.jvm import free_port
from om_stream.settings import CassandraSettings
from tests.support.worker import agent_for, http_call, message_record, worker_process


async def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, content = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(content)


def _create_bare_keyspace(hosts: str) -> str:
    keyspace = f"it_bare_{uuid.uuid4().hex[:8]}"
    (host, port), = CassandraSettings(hosts=hosts).contact_points()
    cluster = Cluster([host], port=port, protocol_version=5)
    try:
        cluster.connect().execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                                  "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
    finally:
        cluster.shutdown()
    return keyspace


def test_a_keyspace_never_migrated_is_refused_at_start_up(kafka_bootstrap: str, cassandra_hosts: str,
                                                          tmp_path: Path) -> None:
    worker = worker_process(kafka_bootstrap, tmp_path, options={}, store="cassandra",
                            extra={"OM_CASSANDRA_HOSTS": cassandra_hosts,
                                   "OM_CASSANDRA_KEYSPACE": _create_bare_keyspace(cassandra_hosts)})
    worker.start()
    assert worker.wait_exit(90) == 2
    log = worker.tail(20_000)
    assert "the content store cannot be used" in log and "om-stream migrate" in log
    assert "Worker ready" not in log, "it never joined the group"


def test_an_unreachable_cassandra_is_refused_at_start_up(kafka_bootstrap: str, tmp_path: Path) -> None:
    worker = worker_process(kafka_bootstrap, tmp_path, options={}, store="cassandra",
                            extra={"OM_CASSANDRA_HOSTS": f"127.0.0.1:{free_port()}",
                                   "OM_CASSANDRA_CONNECT_TIMEOUT_S": "2"})
    worker.start()
    assert worker.wait_exit(90) == 2
    assert "unreachable" in worker.tail(20_000)


async def test_an_agent_that_crashes_stops_the_process(kafka_bootstrap: str, tmp_path: Path) -> None:
    worker = worker_process(kafka_bootstrap, tmp_path, options={}, extra={"OM_WORKER_SHUTDOWN_TIMEOUT_S": "20",
                                                                 "OM_WORKER_DRAIN_TIMEOUT_S": "2"})
    worker.module = "tests.support.crashing_worker"
    worker.start()
    await worker.wait_ready()
    async with agent_for(worker) as agent:
        good = message_record("healthy", 0, "user", "hello")
        await agent.send(good, key=b"healthy")
        await agent.context_through("healthy", good["message_id"])
        await agent.send(message_record("crash-here", 0, "user", "this batch meets the defect"), key=b"crash-here")
        began = time.monotonic()
        status = await asyncio.to_thread(worker.wait_exit, 60)
    log = worker.tail(40_000)
    assert status == 1, log
    assert "agent memory crashed: RuntimeError: a defect in the memory agent" in log
    assert time.monotonic() - began < 30, "the stop is bounded by worker.drain_timeout_s + shutdown_timeout_s"


@pytest.mark.parametrize("progress_first", [True, False], ids=["after-some-progress", "from-the-first-record"])
async def test_a_stalled_partition_fails_liveness_and_a_stop_is_bounded(kafka_bootstrap: str, tmp_path: Path,
                                                                        progress_first: bool) -> None:
    """A partition that stops moving fails /livez, whether it made progress before or is stuck from its first
    record (nothing ever committed: the worker's consumer cannot tell its lag, the brokers' group lag can)."""
    worker = worker_process(kafka_bootstrap, tmp_path, options={}, store="sqlite",
                            extra={"OM_WORKER_STALL_TIMEOUT_S": "4", "OM_WORKER_SHUTDOWN_TIMEOUT_S": "5",
                                   "OM_WORKER_DRAIN_TIMEOUT_S": "2"})
    worker.start()
    await worker.wait_ready()
    lock: sqlite3.Connection | None = None
    try:
        async with agent_for(worker) as agent:
            if progress_first:
                first = message_record("stuck", 0, "user", "the first message goes through")
                await agent.send(first, key=b"stuck")
                await agent.context_through("stuck", first["message_id"])
            assert (await http_call(worker.metrics_port, "GET", "/livez"))["status"] == "live"
            # another process holds the content store: the next write waits for it (a store that stays down)
            lock = sqlite3.connect(tmp_path / "content.db", isolation_level=None)
            lock.execute("BEGIN EXCLUSIVE")
            await agent.send(message_record("stuck", 1, "assistant", "this one cannot be stored"), key=b"stuck")
            deadline = time.monotonic() + 60
            while (answer := await _get(worker.metrics_port, "/livez"))[0] == 200 and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
        status_code, body = answer
        assert status_code == 503 and body["status"] == "dead", worker.tail()
        assert any("records waiting and no progress" in reason for reason in body["reasons"])
        assert (await http_call(worker.metrics_port, "GET", "/healthz", expect=503))["status"] == "dead"
        began = time.monotonic()
        worker.popen.terminate()  # type: ignore[union-attr]
        status = await asyncio.to_thread(worker.wait_exit, 30)
        assert time.monotonic() - began < 14, "SIGTERM ends the process within drain + shutdown timeouts"
        assert status == 1, "a stop that had to be forced is a failure"
        assert "did not stop within 7s" in worker.tail()
    finally:
        if lock is not None:
            lock.close()
        worker.kill()
