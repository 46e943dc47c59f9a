"""Erasure as a property of a worker group on real Kafka and Cassandra: several seeds of random traffic over
several tenants and threads, erases of threads and resources over the commands topic while two workers share the
partitions, one of them SIGKILLed and restarted in the middle and a third joining. Afterwards:

* no marker of a message published before an erase of its subject is in any Cassandra table (read whole), in the
  latest record of any key of the context topic or of the state tables' changelogs, nor in any context a worker
  serves over HTTP;
* every marker of the other messages is in the Cassandra messages table (nothing else was removed);
* every erase got its receipt.

A subject's next messages are published once its erase's receipt is in (what ``OMClient.erase`` does): they start
a fresh memory and are kept. (A message published while an erase is in flight may go either way: the erase is
linearized when its part is handled.) ``OM_ERASURE_GROUP_SEEDS`` runs more seeds."""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

from tests.support.cluster import WorkerGroup, new_keyspace
from tests.support.store_scans import cassandra_rows, files_bytes, holding, latest_per_key
from tests.support.worker import agent_for, erase, http_exchange, message_record

SEEDS = ([int(s) for s in os.environ["OM_ERASURE_GROUP_SEED_LIST"].split(",")]
         if os.environ.get("OM_ERASURE_GROUP_SEED_LIST") else range(int(os.environ.get("OM_ERASURE_GROUP_SEEDS", "2"))))
OPTIONS: dict[str, Any] = {"observation": {"messageTokens": 200, "bufferTokens": 0.25},
                           "reflection": {"observationTokens": 700}}
PARTITIONS = 4


def marker(seed: int, index: int) -> str:
    return f"MK{seed}n{index}Q"


async def test_a_worker_group_erases_for_good_through_kills_and_joins(kafka_bootstrap: str, cassandra_hosts: str,
                                                                      tmp_path: Path) -> None:
    for seed in SEEDS:
        await _one_seed(seed, kafka_bootstrap, cassandra_hosts, tmp_path / f"seed{seed}")


async def _one_seed(seed: int, bootstrap: str, hosts: str, tmp: Path) -> None:
    rng = random.Random(seed)
    resources = {f"r{n}": [f"s{seed}t{n}{k}" for k in range(rng.randint(1, 3))] for n in range(3)}
    group = WorkerGroup(bootstrap, tmp, cassandra_hosts=hosts, keyspace=new_keyspace(hosts), partitions=PARTITIONS,
                        options=OPTIONS)
    first, second = group.add(), group.add()
    try:
        await group.wait_ready()
        live: dict[str, tuple[str, str]] = {}  # marker -> (thread, resource)
        erased: set[str] = set()
        receipts: dict[str, dict[str, Any]] = {}
        pending: list[tuple[str, set[str]]] = []  # erases sent: their id and the threads waiting for the receipt
        async with agent_for(first) as agent:
            steps = rng.randint(70, 110)
            for step in range(steps):
                for erase_id, blocked in list(pending):  # a subject's erase done: its threads may talk again
                    found = [v for _, v, h in agent.events
                             if h.get("ce_type") == b"data-om-erased" and v.get("eraseId") == erase_id]
                    if found:
                        receipts[erase_id] = found[0]
                        pending.remove((erase_id, blocked))
                await agent.pump(timeout_ms=10)
                waiting = {t for _, blocked in pending for t in blocked}
                resource = rng.choice(sorted(resources))
                thread = rng.choice(resources[resource])
                roll = rng.random()
                if step == steps // 3:
                    second.kill()  # SIGKILL mid-stream, then back
                    second.start()
                elif step == steps // 2:
                    group.add()  # a third worker joins
                if thread in waiting:
                    continue  # its subject's erase is not done: an agent waits for the receipt
                if roll < 0.85:
                    index = len(live) + len(erased)
                    text = (f"{marker(seed, index)} the ferry leaves at nine and the tide table changes on "
                            f"Friday, note {index} of {thread}")
                    await agent.send(message_record(thread, index, "user" if index % 2 == 0 else "assistant", text,
                                                    resource=resource), key=thread.encode())
                    live[marker(seed, index)] = (thread, resource)
                    continue
                scope = "thread" if roll < 0.95 else "resource"
                covered = {m for m, (t, r) in live.items() if (t == thread if scope == "thread" else r == resource)}
                erase_id = await erase(agent, seed, scope, thread if scope == "thread" else resource, resource)
                pending.append((erase_id, {thread} if scope == "thread" else set(resources[resource])))
                erased |= covered
                for mark in covered:
                    del live[mark]
            deadline = asyncio.get_running_loop().time() + 180
            while pending:
                if asyncio.get_running_loop().time() > deadline:
                    group.dump_stacks()  # where each worker waits, in its log
                    raise AssertionError((seed, "receipts missing", pending, group.logs()))
                await agent.pump()
                for erase_id, blocked in list(pending):
                    found = [v for _, v, h in agent.events
                             if h.get("ce_type") == b"data-om-erased" and v.get("eraseId") == erase_id]
                    if found:
                        receipts[erase_id] = found[0]
                        pending.remove((erase_id, blocked))
            await group.settle()
            await asyncio.sleep(3)  # the last inputs handled, the last model calls answered
        rows = cassandra_rows(hosts, group.keyspace)
        stored = "\n".join(row for held in rows.values() for row in held)
        left = sorted(m for m in erased if m in stored)
        assert not left, (seed, f"{len(left)} erased markers in Cassandra", left[:5], holding(rows, set(left[:5])),
                          group.logs())
        lost = sorted(m for m in live if m not in stored)
        assert not lost, (seed, f"{len(lost)} kept markers missing from Cassandra", lost[:5], group.logs())
        assert all(r["verified"] for r in receipts.values()), (seed, [r for r in receipts.values()
                                                                      if not r["verified"]])
        for topic in (group.topics["context"], f"{group.template.env['OM_WORKER_APP_ID']}-om_records-changelog"):
            latest = await latest_per_key(bootstrap, topic)
            shown = b"".join(v for v in latest.values() if v is not None).decode(errors="replace")
            left = sorted(m for m in erased if m in shown)
            assert not left, (seed, topic, left[:5])
        for member in group.running():
            for threads in resources.values():
                for thread in threads:
                    status, _, body = await http_exchange(member.port, "GET", f"/v1/threads/{thread}/context")
                    assert status in (200, 404), (status, body[:200])
                    assert not [m for m in erased if m.encode() in body], (seed, thread)
        folders = b"".join(files_bytes(m.log.parent / f"{m.env['OM_WORKER_APP_ID']}-data")
                           for m in group.members if (m.log.parent / f"{m.env['OM_WORKER_APP_ID']}-data").exists())
        assert not [m for m in erased if m.encode() in folders], (seed, "in a worker's local state")
    finally:
        group.stop_all()
