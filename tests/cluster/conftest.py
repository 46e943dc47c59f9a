"""The ``cassandra_cluster`` tier (``make test-cluster``): workers on production's Cassandra shape, three nodes with
replication 3 and LOCAL_QUORUM, while nodes die, return, and return with old data.

The cluster is started once for the tier (``devservices.cassandra_cluster``: three JVMs on loopback addresses of
their own) and every test finds all three nodes up: a test that left one down gets it restarted before the next.
Kafka is the session's (the shared broker when ``OM_KAFKA_BOOTSTRAP`` is set). ``make test`` does not collect this
folder (``norecursedirs``): three more JVMs and their start do not belong in every run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from om_stream.devservices import cassandra_cluster
from tests.support.cassandra_cluster import CLUSTER_ENV, cluster_keyspace
from tests.support.cluster import Conversation, Outcome, WorkerGroup, drop_keyspace

THREADS, TURNS = 6, 48
TEST_TIMEOUT_S = 1500
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cassandra_cluster)
            # the first test also waits for the cluster's start and the reference run
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))


@pytest.fixture(scope="session")
def running_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cassandra_cluster.CassandraCluster]:
    began = time.monotonic()
    cluster = cassandra_cluster.start(tmp_path_factory.mktemp("cassandra-cluster"))
    try:
        cassandra_cluster.wait_ready(cluster)
        print(f"\ncassandra cluster of 3 ready after {time.monotonic() - began:.1f}s at {cluster.hosts}")  # measured
        yield cluster
    finally:
        cluster.stop(grace=30)


@pytest.fixture
def cluster(running_cluster: cassandra_cluster.CassandraCluster) -> cassandra_cluster.CassandraCluster:
    """The tier's cluster with every node up (restarted if a test before left one down)."""
    _all_up(running_cluster)
    return running_cluster


def _all_up(cluster: cassandra_cluster.CassandraCluster) -> None:
    for index in sorted(cluster.down):
        cluster.restart(index)
    cassandra_cluster.wait_ready(cluster)


@pytest.fixture
def keyspace(cluster: cassandra_cluster.CassandraCluster) -> Iterator[str]:
    """A keyspace of this test's, replication 3, dropped afterwards by :func:`drop_settled`."""
    name = cluster_keyspace(cluster.hosts)
    yield name
    drop_settled(cluster, name)


def drop_settled(cluster: cassandra_cluster.CassandraCluster, keyspace: str) -> None:
    """Drop ``keyspace`` with every node up and every hint delivered: a drop that raced a returning node's hinted
    writes on its tables left that node out of schema agreement for good (CI of c4ab8a7 and 67a6414, docs/ci.md).
    The nodes must agree on the schema after it, so a drop gone wrong fails the test that made it, not the next
    one's setup."""
    _all_up(cluster)  # a node the test left down would get its hints, and the drop, later: the same race
    cassandra_cluster.wait_hints_delivered(cluster)
    running = ",".join(cluster.nodes[i].contact_point for i in cluster.running())
    drop_keyspace(running, keyspace)
    cassandra_cluster.wait_ready(cluster)


def cluster_group(kafka_bootstrap: str, tmp: Path, cluster: cassandra_cluster.CassandraCluster, keyspace: str,
                  **env: str) -> WorkerGroup:
    """Workers on the cluster with the tier's settings (and ``env``). They leave ``keyspace`` to the fixture that
    made it: a group drops its keyspace as soon as it stops, which is while a node the test restarted still
    receives its hints."""
    return WorkerGroup(kafka_bootstrap, tmp, cassandra_hosts=cluster.hosts, keyspace=keyspace, owns_keyspace=False,
                       extra={**CLUSTER_ENV, **env})


def conversation(think_s: float = 0.0) -> Conversation:
    """The tier's conversation: every test plays the same turns, so each ends where the reference does."""
    return Conversation(THREADS, TURNS, think_s=think_s, context_timeout_s=420.0)


@pytest.fixture(scope="session")
def reference(kafka_bootstrap: str, running_cluster: cassandra_cluster.CassandraCluster,
              tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The conversation through one worker on the cluster, nothing disturbed: where every other run must end."""
    cassandra_cluster.wait_ready(running_cluster)
    keyspace = cluster_keyspace(running_cluster.hosts)

    async def play() -> Outcome:
        group = cluster_group(kafka_bootstrap, tmp_path_factory.mktemp("reference"), running_cluster, keyspace)
        group.add()
        try:
            await group.wait_ready()
            outcome = await conversation().play(group.bootstrap, group.topics)
        finally:
            group.stop_all()
            drop_settled(running_cluster, keyspace)
        assert not outcome.unserved and not outcome.version_regressions(), group.logs()
        assert outcome.lost_and_duplicated(TURNS) == (0, 0), outcome.miscounted(TURNS)
        return outcome

    return asyncio.run(play())
