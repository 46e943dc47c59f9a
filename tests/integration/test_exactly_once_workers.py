"""Exactly once with real worker processes on real Kafka and Cassandra (the deterministic property over every phase
of the commit order is tests/unit/test_exactly_once.py; this is its check on the real thing, kept to a couple of
minutes).

Eight threads of 22 messages (synchronous observation, no reflection) while two workers become one, three, two and
one: a SIGKILL, a join, the killed one back, a graceful leave, a second SIGKILL. 22 messages: each thread's last
observation covers its last user message and the reply to it, the case where the turn's question used to stay raw
beside its own observation (issue 28). Every thread's final context holds every user message exactly once and
equals the undisturbed run's, no version of a context names two contents, none takes its thread back, and every
message was answered. It runs on both context wires: on ``om.context/v2`` the contexts are assembled from the cursors,
the block index and the blocks as the client assembles them (``tests/support/context_topics.py``), and the run
must end like the undisturbed run on the same wire.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.cluster import Chaos, Conversation, WorkerGroup, new_keyspace, play_uninterrupted
from tests.support.worker import WorkerProcess

THREADS, TURNS = 8, 22


@pytest.mark.parametrize("wire", ["v1", "v2"])
async def test_kills_joins_and_leaves_keep_every_message_once_and_end_like_an_undisturbed_run(
        kafka_bootstrap: str, cassandra_hosts: str, tmp_path: Path, wire: str) -> None:
    reference = await play_uninterrupted(kafka_bootstrap, cassandra_hosts, tmp_path / "reference",
                                         Conversation(THREADS, TURNS), wire)
    group = WorkerGroup(kafka_bootstrap, tmp_path / "chaos", cassandra_hosts=cassandra_hosts,
                        keyspace=new_keyspace(cassandra_hosts), extra={"OM_CONTEXT_WIRE": wire})
    first, second = group.add(), group.add()
    await group.wait_ready()
    joined: list[WorkerProcess] = []

    async def kill(member: WorkerProcess) -> None:
        assert member.popen is not None
        os.killpg(member.popen.pid, signal.SIGKILL)
        await asyncio.to_thread(member.popen.wait, 10)

    async def join() -> None:
        joined.append(group.add())
        await joined[0].wait_ready()

    async def revive() -> None:
        second.start()
        await second.wait_ready()

    chaos = Chaos(THREADS * TURNS, [(0.15, "SIGKILL", lambda: kill(second)), (0.3, "join", join),
                                    (0.45, "revive", revive), (0.6, "leave", lambda: asyncio.to_thread(first.stop)),
                                    (0.75, "SIGKILL again", lambda: kill(joined[0]))])
    conversation = Conversation(THREADS, TURNS, think_s=0.5)
    try:
        outcome = await conversation.play(group.bootstrap, group.topics, wire=wire, on_progress=chaos.on_progress)
        await chaos.finish()
    finally:
        group.stop_all()

    logs = group.logs()
    assert chaos.done == ["SIGKILL", "join", "revive", "leave", "SIGKILL again"], logs
    assert not outcome.unserved, f"never served: {outcome.unserved[:10]}\n{logs}"
    assert not outcome.version_regressions(), f"{outcome.version_regressions()}\n{logs}"
    assert not outcome.versions_with_two_contents(), f"{outcome.versions_with_two_contents()}\n{logs}"
    assert outcome.lost_and_duplicated(TURNS) == (0, 0), f"{outcome.miscounted(TURNS)}\n{logs}"
    assert outcome.final == reference.final, logs
    # a reader of every cursor from the start never needs a run fetched: each cursor's new messages, or the whole run
    # when they do not follow on, are on the topic (after a SIGKILL and a take-over as well)
    assert outcome.runs_from_published == reference.runs_from_published == 0, logs
