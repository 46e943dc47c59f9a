"""Brokers a test owns (never the session's shared one): to stop, kill and restart in its own folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from om_stream.devservices import kafka


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[kafka.KafkaNode]:
    node = kafka.start(tmp_path / "kafka")
    try:
        kafka.wait_ready(node)
        yield node
    finally:
        if node.running:
            node.stop(grace=10)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[kafka.KafkaCluster]:
    """Three KRaft nodes (broker and controller each), replication 3, min.insync.replicas 2."""
    cluster = kafka.start_cluster(tmp_path / "kafka")
    try:
        kafka.wait_ready(cluster)
        yield cluster
    finally:
        cluster.stop(grace=10)
