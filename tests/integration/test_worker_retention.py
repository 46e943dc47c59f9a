"""Retention in ``om-stream worker`` on real Kafka, on Cassandra and on SQLite, with the worker's own clock.

The window is one day (``OM_LIFECYCLE_RETENTION_DAYS=1``) and nothing is faked: the messages that must expire are
created a day ago less two minutes, so they arrive inside the window, are observed (the offline Observer dates its
entries by their times), indexed for search, shown, and then pass the window while the test watches. Beside them a
thread of messages created now stays, a thread mixes both (its observation segment loses only its old entries),
and a message created more than a day ago is refused on arrival and never dead-lettered.

Every message carries a marker (``MK<thread>Z<n>Q``). The test first sees the old markers in contexts, recall and
the stores (so their absence afterwards means something). Once every old message has passed the window, while the
store still holds them (a record's purges run ``OM_LIFECYCLE_PURGE_GAP_S`` apart, see ``old_messages_at``), it
exports the resource over HTTP: no old marker is in the file, every young one is. It then waits
for the purge's ``data-om-expired`` receipts, then
checks that no old marker is left in: the context the API serves, the latest context on the topic, the latest
state in the table's changelog, recall (messages, threads, search), every Cassandra table read whole (or the SQLite
file's bytes), the recall index's file; and that every young marker is still where it was."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cassandra.cluster import Cluster

from om_stream.settings import CassandraSettings
from tests.support.cluster import drop_keyspace, new_keyspace
from tests.support.store_scans import files_bytes, latest_per_key
from tests.support.worker import Agent, agent_for, http_call, started, worker_process

OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 120, "bufferTokens": False},
                           "reflection": {"observationTokens": 20_000}, "retrieval": {"vector": True}}
EXPIRING = 150  # seconds: the old messages pass the window at least this long (plus offsets) after the test starts
PURGE_GAP = 61  # seconds between a record's purges


def old_messages_at(now: datetime) -> datetime:
    """When the first old message was created: at least ``EXPIRING`` seconds inside the window, and 5 seconds into
    a minute. The phase decides when the store loses the old messages. The Observer dates its entries by the
    minute, so a record's first purge (P1) comes when that minute passes the window, ``s`` seconds before its
    first message does (``s``: the seconds into the minute); it cuts the entries, and no message has expired yet.
    The next purge comes a gap later, ``61 - s`` seconds after the first message expired, and removes every old
    message of the record at once. The export runs 20 seconds after the first expiry: with ``s`` of 5 the store
    still holds every old message then (the export's cut is what keeps them out of the file); with ``s`` above 41
    it held none (CI on 7726413 failed so)."""
    earliest = now - timedelta(days=1) + timedelta(seconds=EXPIRING)
    return (earliest + timedelta(seconds=55)).replace(second=5, microsecond=0)


def marker(thread: str, index: int) -> str:
    return f"MK{thread.replace('-', '')}Z{index}Q"


def record(thread: str, index: int, at: datetime) -> dict[str, Any]:
    role = "user" if index % 2 == 0 else "assistant"
    return {"schema": "om.message/v1", "message_id": f"{thread}-m{index}", "thread_id": thread, "resource_id": "ana",
            "role": role, "created_at": at.isoformat().replace("+00:00", "Z"),
            "parts": [{"type": "text", "text": f"Remember {marker(thread, index)}: the ferry leaves at nine and "
                                               f"the tide report is due on Friday, item {index}."}]}


def cassandra_text(hosts: str, keyspace: str) -> str:
    """Every row of every table of the keyspace, as text."""
    (host, port), = CassandraSettings(hosts=hosts).contact_points()
    cluster = Cluster([host], port=port, protocol_version=5)
    try:
        session = cluster.connect(keyspace)
        tables = [r.table_name for r in session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,))]
        return "\n".join(str(row) for table in tables for row in session.execute(f"SELECT * FROM {table}"))
    finally:
        cluster.shutdown()


async def recall(worker: Any, arguments: dict[str, Any], thread: str | None = None) -> str:
    body: dict[str, Any] = {"schema": "om.recall.request/v1", "correlation_id": uuid.uuid4().hex,
                            "resource_id": "ana", "arguments": arguments}
    if thread is not None:
        body["thread_id"] = thread
    return json.dumps(await http_call(worker.port, "POST", "/v1/recall", body))


async def receipts(agent: Agent, messages: dict[str, int], timeout: float) -> dict[str, dict[str, int]]:
    """Each thread's ``data-om-expired`` receipts, summed, once they count ``messages`` messages removed."""
    totals: dict[str, dict[str, int]] = {}

    def done(current: Agent) -> bool:
        totals.clear()
        for key, value, headers in current.events:
            if headers.get("ce_type") == b"data-om-expired":
                assert value["retentionDays"] == 1 and value["cutoff"] < value["expiredAt"], value
                summed = totals.setdefault(key, {})
                for store, count in value["removed"].items():
                    summed[store] = summed.get(store, 0) + count
        return all(totals.get(t, {}).get("messages", 0) >= n for t, n in messages.items())

    await agent.until(done, timeout=timeout)
    return totals


async def test_what_passes_the_window_goes_from_every_read_and_every_store(
        kafka_bootstrap: str, cassandra_hosts: str, tmp_path: Path) -> None:
    """Cassandra and SQLite at once: the scenario is minutes of waiting for the clock, so the two stores share them.
    Each runs its own worker on its own topics; a failure says which store it came from."""
    async with asyncio.TaskGroup() as both:
        for store in ("cassandra", "sqlite"):
            (tmp_path / store).mkdir()
            both.create_task(noted(passes_the_window(kafka_bootstrap, cassandra_hosts, tmp_path / store, store),
                                   f"store: {store}"))


async def noted(work: Awaitable[None], note: str) -> None:
    """``work``; if it fails, its error carries ``note`` (which of the cases running at once it was)."""
    try:
        await work
    except Exception as exc:
        exc.add_note(note)
        raise


async def passes_the_window(kafka_bootstrap: str, cassandra_hosts: str, tmp_path: Path, store: str) -> None:
    keyspace = new_keyspace(cassandra_hosts) if store == "cassandra" else ""
    qdrant = tmp_path / "qdrant"
    extra = {"OM_LIFECYCLE_RETENTION_DAYS": "1", "OM_LIFECYCLE_PURGE_GAP_S": str(PURGE_GAP),
             "OM_EMBEDDING_KIND": "offline", "OM_QDRANT_PATH": str(qdrant), "OM_WORKER_TIMER_INTERVAL_S": "0.5"}
    if store == "cassandra":
        extra |= {"OM_CASSANDRA_HOSTS": cassandra_hosts, "OM_CASSANDRA_KEYSPACE": keyspace,
                  "OM_CASSANDRA_REPLICATION_FACTOR": "1"}
    process = worker_process(kafka_bootstrap, tmp_path, options=OPTIONS, store=store, partitions=2, extra=extra)

    def stored() -> str:
        if store == "cassandra":
            return cassandra_text(cassandra_hosts, keyspace)
        return b"".join(path.read_bytes() for path in tmp_path.glob("content.db*")).decode("utf-8", "replace")

    try:
        async with started(process) as worker, agent_for(worker) as agent:
            now = datetime.now(UTC)
            old_at = old_messages_at(now)
            old = {("t-old", i): old_at + timedelta(seconds=i) for i in range(8)}
            # exchanges of a day ago and of now, alternating: one observation covers both, and loses only the old
            mixing = {0, 1, 4, 5}
            mixed = {("t-mix", i): (old_at + timedelta(seconds=10 + i)) if i in mixing else now + timedelta(seconds=i)
                     for i in range(8)}
            young = {("t-new", i): now + timedelta(seconds=i) for i in range(6)}
            for (thread, index), at in [*old.items(), *mixed.items(), *young.items()]:
                await agent.send(record(thread, index, at), key=thread.encode())
            for thread, last in (("t-old", 7), ("t-mix", 7), ("t-new", 5)):
                await agent.context_through(thread, f"{thread}-m{last}")
            expired = {marker(t, i) for t, i in old} | {marker("t-mix", i) for i in mixing}
            kept = {marker(t, i) for t, i in young} | {marker("t-mix", i) for i in range(8) if i not in mixing}

            # before the window passes: everything is there (observed, indexed, stored); the offline Observer
            # leaves out a reply that only restates the user, so the users' markers are the ones to look for
            said = {m for m in expired | kept if int(m.rsplit("Z", 1)[1][:-1]) % 2 == 0}

            async def everything_shown() -> bool:
                contexts = [json.dumps(await http_call(worker.port, "GET", f"/v1/threads/{t}/context"))
                            for t in ("t-old", "t-mix", "t-new")]
                found = await recall(worker, {"mode": "search", "query": "ferry tide report Friday", "limit": 20})
                return all(m in "".join(contexts) for m in said) and "MKtoldZ" in found

            deadline = time.monotonic() + 90
            while not await everything_shown():
                assert time.monotonic() < deadline, worker.tail()
                await asyncio.sleep(1)
            observed = await http_call(worker.port, "GET", "/v1/threads/t-old/context")
            assert marker("t-old", 0) in observed["observations"], "the old messages were never observed"
            assert all(m in stored() for m in expired | kept)

            # a message already past the window: refused on arrival, not dead-lettered
            stale = record("t-new", 99, now - timedelta(days=1, minutes=10))
            await agent.send(stale, key=b"t-new")

            expiry = old_at + timedelta(days=1, seconds=20)  # the last old message passes the window
            # the export: every old message past the window, none purged yet (their purges come 61 - 5 s after)
            await asyncio.sleep(max(0.0, (expiry - datetime.now(UTC)).total_seconds()))
            unpurged = [m for m in expired if m in stored()]
            exported = await http_call(worker.port, "GET", "/v1/resources/ana/export", raw=True)
            assert not [m for m in expired if m in exported], [m for m in expired if m in exported]
            lines = [json.loads(line) for line in exported.splitlines()]
            in_messages = "".join(json.dumps(line) for line in lines if line["type"] == "message")
            assert all(m in in_messages for m in kept), [m for m in kept if m not in in_messages]
            assert lines[-1]["type"] == "end" and lines[-1]["counts"]["messages"] == len(kept)
            if len(unpurged) < len(expired):  # the receipts so far, dated from the moment the first old message expired
                for _ in range(4):
                    await agent.pump()
                first = old_at + timedelta(days=1)
                seen = [(key, (datetime.fromisoformat(value["expiredAt"]) - first).total_seconds(), value["removed"])
                        for key, value, headers in agent.events if headers.get("ce_type") == b"data-om-expired"]
                raise AssertionError(("the old messages were purged before the export: it cut nothing", unpurged,
                                      "receipts (thread, seconds after the first expiry, removed):", seen))

            wait = (expiry - datetime.now(UTC)).total_seconds() + PURGE_GAP + 60
            done = await receipts(agent, {"t-old": 8, "t-mix": 4}, timeout=max(wait, 60))
            assert done["t-old"]["messages"] == 8 and done["t-mix"]["messages"] == 4, done
            assert done["t-mix"]["rewritten"] >= 1 and done["t-mix"]["entries"] >= 2, done
            assert "t-new" not in done, done
            await asyncio.sleep(2)  # the index's purge runs beside the memory agent

            for thread in ("t-old", "t-mix", "t-new"):
                served = json.dumps(await http_call(worker.port, "GET", f"/v1/threads/{thread}/context"))
                assert not [m for m in expired if m in served], (thread, "served past the window")
            mix = json.dumps(await http_call(worker.port, "GET", "/v1/threads/t-mix/context"))
            new = json.dumps(await http_call(worker.port, "GET", "/v1/threads/t-new/context"))
            assert all(m in mix + new for m in kept & said), [m for m in kept & said if m not in mix + new]
            assert marker("t-new", 99) not in new
            latest = await latest_per_key(kafka_bootstrap, worker.topics["context"])
            assert not [m for m in expired if m.encode() in b"".join(v or b"" for v in latest.values())]
            changelog = await latest_per_key(kafka_bootstrap,
                                             f"{worker.env['OM_WORKER_APP_ID']}-om_records-changelog")
            assert not [m for m in expired if m.encode() in b"".join(v or b"" for v in changelog.values())]

            found = await recall(worker, {"mode": "search", "query": "ferry tide report Friday", "limit": 20})
            assert not [m for m in expired if m in found] and "MKtnewZ" in found, found
            pages = await recall(worker, {"mode": "messages", "threadId": "t-mix", "limit": 20, "anchor": "start"})
            assert not [m for m in expired if m in pages] and marker("t-mix", 2) in pages, pages
            gone = await http_call(worker.port, "POST", "/v1/recall", {
                "schema": "om.recall.request/v1", "correlation_id": uuid.uuid4().hex, "resource_id": "ana",
                "arguments": {"mode": "messages", "threadId": "t-old"}}, expect=400)
            assert "no thread" in gone["error"]["message"]  # everything of it passed: it reads as unknown
            threads = await recall(worker, {"mode": "threads"})
            assert "t-old" not in threads and "t-mix" in threads and "t-new" in threads, threads

            text = stored()
            assert not [m for m in expired if m in text], [m for m in expired if m in text]
            assert all(m in text for m in kept), [m for m in kept if m not in text]
            indexed = files_bytes(qdrant).decode("utf-8", "replace")
            assert not [m for m in expired if m in indexed] and "MKtnewZ" in indexed

            assert not [d for d in agent.dead if "Z99Q" in json.dumps(d)], "an expired message was dead-lettered"
            metrics = await http_call(worker.metrics_port, "GET", "/metrics", raw=True)
            counted = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
                       if line.startswith(("om_expired_inputs_total", "om_expirations_total"))}
            assert counted["om_expired_inputs_total"] >= 1 and counted["om_expirations_total"] >= 2, counted
    finally:
        if keyspace:
            drop_keyspace(cassandra_hosts, keyspace)
