"""A Cassandra node that comes back with an old data directory (a volume restored from a backup, a snapshot rolled
back) holds none of the writes it acknowledged since: with LOCAL_QUORUM reads its replica is merged with a fresh
one (the newest cell wins, and read repair writes it back), so no stale row reaches a context or a read.

The third node is stopped cleanly (drained: everything it acknowledged is in its files) and its data directory
copied; it runs again and acknowledges a phase of the conversation; it is stopped while another phase is played
(the others keep hints for it); then the old copy is put back and the node started on it. With the other two nodes
stopped, the node alone is asked at consistency ONE for the messages it acknowledged after the copy: they are
missing, so it really is stale. Then one fresh node returns beside it, so every LOCAL_QUORUM read needs the stale
node's answer; a new worker process (nothing cached: every text is read from the nodes) plays the last phase. Every
context it publishes is one an undisturbed run of the same conversation published for the same message (the same
observations, the same messages), the final contexts equal that run's, and a store with no cache reads every message
back.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any

from om_stream.adapters.cassandra_store import CassandraContentStore
from om_stream.devservices import cassandra_cluster
from om_stream.devservices.cassandra_cluster import DATACENTER, CassandraCluster
from om_stream.settings import CassandraSettings
from tests.cluster.conftest import TURNS, cluster_group, conversation
from tests.support.cassandra_cluster import PhasedConversation, present_on_node
from tests.support.cluster import MARKER, Outcome, turn_text

STALE = 2  # the node that comes back with its old data directory


def _copy(dirs: list[Path], into: Path) -> None:
    for folder in dirs:
        shutil.copytree(folder, into / folder.name)


def _restore(dirs: list[Path], copy: Path) -> None:
    for folder in dirs:
        shutil.rmtree(folder)
        shutil.copytree(copy / folder.name, folder)


def _stop_together(cluster: CassandraCluster, indexes: list[int]) -> None:
    threads = [threading.Thread(target=cluster.stop_node, args=(i,)) for i in indexes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _content(context: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """What a context gives the agent's model: the observations and the messages (by id)."""
    return context["observations"], tuple(m["message_id"] for m in context["messages"])


def _unlike_reference(outcome: Outcome, reference: Outcome, since: dict[str, int]) -> list[str]:
    """The contexts published from ``since[thread]`` on that no undisturbed run published: for each, the thread, the
    message it is through, and the observation markers it holds against the reference's."""
    found = []
    for thread, seen in outcome.contexts.items():
        published: dict[str, set[tuple[str, tuple[str, ...]]]] = {}
        for context in reference.contexts[thread]:
            published.setdefault(context["through_message_id"], set()).add(_content(context))
        for context in seen[since.get(thread, 0):]:
            expected = published.get(context["through_message_id"], set())
            if _content(context) not in expected:
                def markers(observations: str, owner: str = thread) -> list[int]:
                    return sorted(int(i) for o, i in MARKER.findall(observations) if o == owner)

                found.append(f"{thread} v{context['version']} through {context['through_message_id']}: observed "
                             f"{markers(context['observations'])}, messages {list(_content(context)[1])}; the "
                             f"undisturbed run: {[(markers(obs), list(ids)) for obs, ids in expected]}")
    return found


async def test_a_node_back_with_an_old_data_directory_never_shows_its_stale_rows(
        kafka_bootstrap: str, cluster: CassandraCluster, keyspace: str, reference: Outcome, tmp_path: Path) -> None:
    group = cluster_group(kafka_bootstrap, tmp_path / "group", cluster, keyspace)
    worker = group.add()
    await group.wait_ready()
    copy, dirs = tmp_path / "old-data", cluster.data_dirs(STALE)
    talk = conversation()
    try:
        async with PhasedConversation(talk, group.bootstrap, group.topics) as phases:
            await phases.play("before the copy", range(12))
            await asyncio.to_thread(cluster.stop_node, STALE)
            await asyncio.to_thread(_copy, dirs, copy)
            cluster.restart(STALE)
            await asyncio.to_thread(cassandra_cluster.wait_ready, cluster)
            await phases.play("acknowledged by the stale node", range(12, 24))
            await asyncio.to_thread(cluster.stop_node, STALE)
            await phases.play("while it is down", range(24, 36))
            await asyncio.to_thread(_restore, dirs, copy)
            cluster.restart(STALE)
            await asyncio.to_thread(cassandra_cluster.wait_ready, cluster)

            # the node is stale: alone, it lacks what it acknowledged after the copy
            await asyncio.to_thread(_stop_together, cluster, [i for i in range(3) if i != STALE])
            node = cluster.nodes[STALE]
            acknowledged = phases.sent["acknowledged by the stale node"]
            held = await asyncio.to_thread(present_on_node, node.host, node.port, keyspace, acknowledged)
            assert len(held) < len(acknowledged) / 2, f"only {len(acknowledged) - len(held)} rows missing"

            # one fresh node beside it: every LOCAL_QUORUM read needs both answers; a worker with nothing cached
            cluster.restart(1)
            await asyncio.to_thread(cassandra_cluster.wait_ready, cluster)
            await asyncio.to_thread(worker.stop)
            before = {thread: len(seen) for thread, seen in phases.watcher.seen.items()}
            worker.start()
            await worker.wait_ready()
            await phases.play("after", range(36, TURNS))
            outcome = await phases.outcome()
        hosts = ",".join(cluster.nodes[i].contact_point for i in cluster.running())
        settings = CassandraSettings(hosts=hosts, keyspace=keyspace, local_datacenter=DATACENTER,
                                     message_cache_size=0)
        cold = CassandraContentStore(settings)
        try:
            sent = [m for ids in phases.sent.values() for m in ids]
            stored = {m.message_id: m for m in await cold.get_messages(sent)}
        finally:
            await cold.close()
    finally:
        group.stop_all()

    logs = group.logs()
    assert not outcome.unserved and not outcome.version_regressions(), logs
    assert _unlike_reference(outcome, reference, before) == [], logs
    assert outcome.lost_and_duplicated(TURNS) == (0, 0), outcome.miscounted(TURNS)
    for thread, final in reference.final.items():
        assert outcome.final[thread] == final, f"{thread}\n{logs}"
    assert sorted(stored) == sorted(sent)
    for message_id, message in stored.items():
        thread, index = message_id.rsplit("-m", 1)
        assert message.parts[0].text == turn_text(thread, int(index))  # type: ignore[union-attr]
