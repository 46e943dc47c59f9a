"""Brokers a test owns (never the session's shared one): to stop, kill and restart in its own folder; a keyspace of
a test's own on the shared Cassandra; an agent's tracing SDK exporting to the test's Jaeger."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

from om_stream.devservices import kafka
from tests.support.cluster import drop_keyspace, new_keyspace
from tests.support.services import JaegerAddresses


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


@pytest.fixture
def keyspace(cassandra_hosts: str) -> Iterator[str]:
    name = new_keyspace(cassandra_hosts)
    try:
        yield name
    finally:
        drop_keyspace(cassandra_hosts, name)


@pytest.fixture
def agent_tracing(jaeger: JaegerAddresses) -> Iterator[tuple[TracerProvider, Tracer]]:
    """The agent's own SDK, exporting to the same Jaeger under a service name of its own."""
    provider = TracerProvider(resource=Resource({"service.name": f"agent-{uuid.uuid4().hex[:6]}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{jaeger.otlp}/v1/traces"),
                                                   schedule_delay_millis=100))
    try:
        yield provider, provider.get_tracer("agent")
    finally:
        provider.shutdown()
