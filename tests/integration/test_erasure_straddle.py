"""An erase against a member whose batch outlasts the group's patience: the member's content store stalls in the
first phase of a batch that holds a message of a thread (a Cassandra node in a long GC pause, seen by this worker
only), the group moves on without it, the new owner of the thread's partition handles an erase of the thread and
sweeps the stores, and only then does the stalled member's write go through. A message published before the erase
must not be in any store afterwards, whichever worker wrote it and when."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import WorkerGroup, new_keyspace, stalling_member
from tests.support.store_scans import cassandra_rows, holding
from tests.support.worker import agent_for, erase, message_record

pytestmark = pytest.mark.timeout(600)


async def test_a_stalled_members_late_write_does_not_outlive_an_erase_the_new_owner_handled(
        kafka_bootstrap: str, cassandra_hosts: str, tmp_path: Path) -> None:
    group = WorkerGroup(kafka_bootstrap, tmp_path / "group", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts), partitions=2)
    stall = tmp_path / "stall"
    slow = stalling_member(group, stall)
    thread, resource = f"zt-{uuid.uuid4().hex[:6]}", "zr"
    markers = [f"ZM{uuid.uuid4().hex[:6]}Q{n}" for n in range(2)]
    try:
        await slow.wait_ready()
        async with agent_for(slow) as agent:
            first = message_record(thread, 0, "user", f"{markers[0]} the ferry leaves at nine", resource=resource)
            await agent.send(first, key=thread.encode())
            await agent.context_through(thread, first["message_id"])
            stall.touch()  # the next batch of the slow member is held in its content-store writes
            second = message_record(thread, 1, "assistant", f"{markers[1]} noted, nine it is", resource=resource)
            await agent.send(second, key=thread.encode())
            await asyncio.sleep(2.0)
            joined = group.add()  # the group moves on without the held member: the new one owns every partition
            await joined.wait_ready(timeout=180)
            erase_id = await erase(agent, 0, "thread", thread, resource)
            receipt: dict[str, Any] | None = None
            for _ in range(240):
                await agent.pump()
                found = [v for _, v, h in agent.events
                         if h.get("ce_type") == b"data-om-erased" and v.get("eraseId") == erase_id]
                if found:
                    receipt = found[0]
                    break
            assert receipt is not None, ("no receipt", group.logs())
            held = slow.log.read_text(errors="replace")
            assert "content-store write stalled" in held, "the fault never held a batch"
            stall.unlink()  # the held write goes through now, after the new owner's sweep
            for _ in range(40):
                if "content-store write released" in slow.log.read_text(errors="replace"):
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(5.0)  # the released batch's writes, and whatever it does about them
        rows = cassandra_rows(cassandra_hosts, group.keyspace)
        left = holding(rows, set(markers))
        assert not left, ("an erased message came back", left, group.logs())
    finally:
        stall.unlink(missing_ok=True)
        group.stop_all()
