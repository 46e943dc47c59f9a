"""Running ``om-stream worker`` as a real subprocess against real Kafka, and talking to it like an agent does."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from om_stream.devservices.jvm import free_port
from tests.support.context_topics import ContextTopics

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WorkerProcess:
    bootstrap: str
    env: dict[str, str]
    log: Path
    topics: dict[str, str]
    port: int  # the /v1/* API
    metrics_port: int  # /metrics and the probes
    popen: subprocess.Popen[bytes] | None = None
    module: str = "om_stream.runtime.worker"  # what ``python -m`` runs

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen([sys.executable, "-m", self.module], cwd=ROOT, env=self.env,
                                          stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_exit(self, timeout: float) -> int:
        """The exit status, once the process has ended by itself within ``timeout`` seconds."""
        assert self.popen is not None
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the worker still runs after {timeout}s:\n{self.tail()}") from None

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no final commit (a crash)."""
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stop(self) -> None:
        """SIGTERM; a worker still running 30 s later is asked for its threads' and tasks' stacks (mode's SIGUSR1
        handler writes them to the log: where the stop is stuck), then killed."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.dump_stacks()
                self.kill()

    def dump_stacks(self, wait_s: float = 5.0) -> None:
        """Every thread's stack and every asyncio task's, with locals, appended to the log (``kill -USR1``)."""
        if self.popen is None or self.popen.poll() is not None:
            return
        size = self.log.stat().st_size
        self.popen.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and self.log.stat().st_size == size:
            time.sleep(0.2)
        time.sleep(1.0)  # the dump is written in one go, but not in one write

    def tail(self, chars: int = 4000, *, debug: bool = True) -> str:
        """The end of the worker's log; without its DEBUG lines (``debug=False``), which at debug level are mostly
        the Kafka client's and would fill the whole tail."""
        text = self.log.read_text(errors="replace")
        if not debug:
            text = "\n".join(line for line in text.splitlines() if "] [DEBUG] " not in line)
        return text[-chars:]

    async def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.popen is not None
            if self.popen.poll() is not None:
                raise AssertionError(f"worker exited rc={self.popen.returncode}:\n{self.tail()}")
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.metrics_port)
                writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
                await writer.drain()
                status = await reader.read(64)
                writer.close()
                if b" 200 " in status:
                    return
            except OSError:
                pass
            await asyncio.sleep(0.3)
        raise AssertionError(f"worker not ready after {timeout}s:\n{self.tail()}")


def listener_ports() -> tuple[int, int]:
    """Two free ports, distinct: the API's and the metrics/probes listener's."""
    port = free_port()
    while (metrics_port := free_port()) == port:
        pass
    return port, metrics_port


def worker_process(bootstrap: str, tmp: Path, *, options: dict[str, Any], store: str = "memory",
                   partitions: int = 2, extra: dict[str, str] | None = None) -> WorkerProcess:
    suffix = uuid.uuid4().hex[:8]
    names = ("messages", "commands", "model_requests", "model_results", "records", "events", "context",
             "context_index", "context_blocks", "dlq", "recall_requests", "recall_responses")
    topics = {name: f"t{suffix}.{name}" for name in names}
    port, metrics_port = listener_ports()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OM_KAFKA_BOOTSTRAP": bootstrap,
           "OM_KAFKA_PARTITIONS": str(partitions), "OM_KAFKA_REPLICATION": "1", "OM_KAFKA_SESSION_TIMEOUT_S": "6",
           "OM_WORKER_APP_ID": f"om-it-{suffix}", "OM_WORKER_WEB_PORT": str(port),
           "OM_WORKER_METRICS_PORT": str(metrics_port), "OM_MEMORY_STORE": store,
           "OM_MEMORY_SQLITE_PATH": str(tmp / "content.db"), "OM_WORKER_DATA_DIR": str(tmp),
           "OM_MEMORY_MODEL": "offline",
           "OM_MEMORY_OPTIONS": json.dumps(options), "OM_LOG_LEVEL": "info", "OM_WORKER_BATCH_WITHIN_S": "0.01",
           **{f"OM_KAFKA_TOPIC_{name.upper()}": topic for name, topic in topics.items()}, **(extra or {})}
    return WorkerProcess(bootstrap, env, tmp / "worker.log", topics, port, metrics_port)


@asynccontextmanager
async def started(process: WorkerProcess) -> AsyncIterator[WorkerProcess]:
    """``process`` started, ready, and stopped at the end."""
    process.start()
    try:
        await process.wait_ready()
        yield process
    finally:
        process.stop()


@asynccontextmanager
async def running_worker(bootstrap: str, tmp: Path, **options: Any) -> AsyncIterator[WorkerProcess]:
    """A worker started (``worker_process`` options), ready, and stopped at the end."""
    async with started(worker_process(bootstrap, tmp, **options)) as process:
        yield process


def message_record(thread: str, index: int, role: str, text: str, *, resource: str = "r1",
                   start: datetime | None = None) -> dict[str, Any]:
    moment = (start or datetime(2026, 3, 1, 9, 0, tzinfo=UTC)) + timedelta(seconds=30 * index)
    return {"schema": "om.message/v1", "message_id": f"{thread}-m{index}", "thread_id": thread,
            "resource_id": resource, "role": role, "created_at": moment.isoformat().replace("+00:00", "Z"),
            "parts": [{"type": "text", "text": text}]}


@dataclass
class Agent:
    """Publishes messages and reads contexts, events and dead letters back."""

    worker: WorkerProcess
    producer: AIOKafkaProducer
    consumer: AIOKafkaConsumer
    contexts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any], dict[str, bytes]]] = field(default_factory=list)
    dead: list[dict[str, Any]] = field(default_factory=list)
    tombstones: list[str] = field(default_factory=list)  # keys of null records on the context topic
    order: dict[str, list[str]] = field(default_factory=dict)  # message ids per thread, in the order sent
    reading: ContextTopics | None = None  # the contexts as the worker's wire carries them (``agent_for`` sets it)

    async def send(self, record: dict[str, Any] | bytes, key: bytes | None, topic: str = "messages") -> None:
        value = record if isinstance(record, bytes) else json.dumps(record).encode()
        if isinstance(record, dict) and "message_id" in record:
            sent = self.order.setdefault(record["thread_id"], [])
            if record["message_id"] not in sent:
                sent.append(record["message_id"])
        await self.producer.send_and_wait(self.worker.topics[topic], value, key=key)

    async def pump(self, timeout_ms: int = 500) -> None:
        batch = await self.consumer.getmany(timeout_ms=timeout_ms)
        assert self.reading is not None
        references = self.reading.topics[1:]  # v2's index and blocks topics
        for tp, records in batch.items():
            for record in records:
                if record.value is None:  # a tombstone: an erased thread's context (or the segment roll's key)
                    key = (record.key or b"").decode("utf-8", "replace")
                    if not key.startswith("\ufffd") and tp.topic not in references:
                        self.tombstones.append(key)
                    self.reading.read(record)
                    continue
                if tp.topic in self.reading.topics:
                    read = self.reading.read(record)
                    if read is not None:
                        self.contexts.setdefault(read[0], []).append(read[1])
                    continue
                value = json.loads(record.value)
                if tp.topic == self.worker.topics["events"]:
                    self.events.append((record.key.decode(), value, dict(record.headers)))
                else:
                    self.dead.append(value)

    async def context_through(self, thread: str, message_id: str, timeout: float = 60.0) -> dict[str, Any]:
        """Read-your-writes: wait for a context that includes ``message_id`` (through it, or a later message)."""
        sent = self.order.get(thread, [message_id])
        wanted = sent.index(message_id) if message_id in sent else 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for context in reversed(self.contexts.get(thread, [])):
                through = context["through_message_id"]
                if through == message_id or (through in sent and sent.index(through) >= wanted):
                    return context
            await self.pump()
        raise AssertionError(f"no context through {message_id} after {timeout}s:\n{self.worker.tail()}")

    async def until(self, predicate: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met after {timeout}s:\n{self.worker.tail(debug=False)}")
            await self.pump()


@asynccontextmanager
async def agent_for(worker: WorkerProcess) -> AsyncIterator[Agent]:
    producer = AIOKafkaProducer(bootstrap_servers=worker.bootstrap, linger_ms=2)
    reading = ContextTopics(worker.topics, worker.env.get("OM_CONTEXT_WIRE", "v1"))
    consumer = AIOKafkaConsumer(*reading.topics, worker.topics["events"], worker.topics["dlq"],
                                bootstrap_servers=worker.bootstrap, auto_offset_reset="earliest",
                                group_id=f"agent-{uuid.uuid4().hex[:8]}", metadata_max_age_ms=1000)
    await producer.start()
    await consumer.start()
    try:
        yield Agent(worker, producer, consumer, reading=reading)
    finally:
        await producer.stop()
        await consumer.stop()


async def http_exchange(port: int, method: str, path: str, body: dict[str, Any] | None = None, *,
                        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.0 call to a worker listener: (status, headers with lower-case names, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = json.dumps(body).encode() if body is not None else b""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    writer.write(f"{method} {path} HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}"
                 f"\r\n{extra}\r\n".encode() + payload)
    await writer.drain()
    response = await reader.read()
    writer.close()
    head, _, content = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in fields.items()}, content


async def http_call(port: int, method: str, path: str, body: dict[str, Any] | None = None, *, expect: int = 0,
                    raw: bool = False, token: str | None = None) -> Any:
    """One HTTP/1.0 call to the worker (``token``: sent as a bearer token); asserts the status (``expect``, else 200
    or 202)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    status, _, content = await http_exchange(port, method, path, body, headers=headers)
    if expect:
        assert status == expect, (status, content[:500])
    else:
        assert status in (200, 202), (status, content[:500])
    return content.decode() if raw else json.loads(content)


async def erase(agent: Agent, seed: int, scope: str, subject: str, resource: str) -> str:
    """Sends an ``erase`` command for a thread or a resource on the commands topic; its id (``seed`` in it)."""
    erase_id = f"erase-{seed}-{uuid.uuid4().hex[:6]}"
    command: dict[str, Any] = {"schema": "om.command/v1", "command_id": erase_id, "command": "erase",
                               "scope": scope, "resource_id": resource}
    if scope == "thread":
        command["thread_id"] = subject
    await agent.send(command, key=subject.encode(), topic="commands")
    return erase_id


async def receipt_for(agent: Agent, erase_id: str, timeout: float = 90.0) -> dict[str, Any]:
    """The ``data-om-erased`` event of ``erase_id``, once the agent has read it."""
    found: list[dict[str, Any]] = []

    def done(current: Agent) -> bool:
        found.extend(v for _, v, h in current.events if h.get("ce_type") == b"data-om-erased"
                     and v.get("eraseId") == erase_id)
        return bool(found)

    await agent.until(done, timeout=timeout)
    return found[0]
