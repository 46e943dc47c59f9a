"""Cassandra settings become driver arguments (auth, TLS, consistency, reconnection); migrations load from the
package. No server needed: building a Cluster object does not connect."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from om_stream.adapters.cassandra_store import load_migrations
from om_stream.adapters.cassandra_store.cycle_results import lease_ttl
from om_stream.adapters.cassandra_store.schema_migrations import _replication, _statements
from om_stream.adapters.cassandra_store.session import build_cluster
from om_stream.errors import StorageError
from om_stream.settings import CassandraSettings, Settings


def test_auth_tls_and_policies_come_from_settings(tmp_path: Path) -> None:
    from cassandra import ConsistencyLevel
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT

    settings = CassandraSettings(hosts="127.0.0.1:9142,localhost:9142", username="om", password=SecretStr("pw"),
                                 tls=True, tls_check_hostname=False, local_datacenter="dc1", read_consistency="ONE",
                                 serial_consistency="SERIAL", request_timeout_s=3, reconnect_max_delay_s=4)
    cluster = build_cluster(settings)
    try:
        assert cluster.contact_points == ["127.0.0.1", "localhost"] and cluster.port == 9142
        assert isinstance(cluster.auth_provider, PlainTextAuthProvider) and cluster.auth_provider.username == "om"
        assert isinstance(cluster.ssl_context, ssl.SSLContext) and not cluster.ssl_context.check_hostname
        profile = cluster.profile_manager.profiles[EXEC_PROFILE_DEFAULT]
        assert profile.consistency_level == ConsistencyLevel.ONE and profile.request_timeout == 3
        assert profile.serial_consistency_level == ConsistencyLevel.SERIAL
        assert profile.load_balancing_policy._child_policy.local_dc == "dc1"
        assert cluster.reconnection_policy.max_delay == 4
    finally:
        cluster.shutdown()
    with pytest.raises(StorageError, match="invalid connection settings"):
        build_cluster(CassandraSettings(tls=True, tls_ca_file=str(tmp_path / "missing.pem")))
    with pytest.raises(StorageError, match="invalid connection settings"):
        build_cluster(CassandraSettings(hosts="no-such-host.invalid"))


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OM_CASSANDRA_WRITE_CONSISTENCY", "QUORUM")
    monkeypatch.setenv("OM_CASSANDRA_TTL_SECONDS", "86400")
    monkeypatch.setenv("OM_QDRANT_URL", "http://qdrant:6333")
    settings = Settings()
    assert settings.cassandra.write_consistency == "QUORUM" and settings.cassandra.ttl_seconds == 86400
    assert settings.qdrant.url == "http://qdrant:6333"
    with pytest.raises(ValidationError):
        CassandraSettings(read_consistency="MOST")
    with pytest.raises(ValidationError):
        CassandraSettings(keyspace="drop table x; --")


def test_replication_for_the_keyspace_migrate_creates() -> None:
    assert _replication(CassandraSettings(replication_factor=3)) == \
        "{'class': 'SimpleStrategy', 'replication_factor': 3}"
    nts = CassandraSettings(replication_strategy="NetworkTopologyStrategy", datacenter_replication="dc1:3, dc2:2")
    assert _replication(nts) == "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}"
    with pytest.raises(StorageError, match="dc1:3"):
        _replication(CassandraSettings(replication_strategy="NetworkTopologyStrategy"))


def test_migrations_ship_in_the_package_numbered_and_idempotent() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    first = migrations[0]
    assert first.name == "initial" and len(first.checksum) == 16
    assert all(s.upper().startswith("CREATE TABLE IF NOT EXISTS") for s in first.statements)
    assert {s.split()[5] for s in first.statements} >= {"messages", "messages_by_id", "segments", "generations"}


def test_migration_2_adds_the_cycle_result_and_lease_tables() -> None:
    second = load_migrations()[1]
    assert (second.version, second.name) == (2, "cycle_results")
    assert all(s.upper().startswith("CREATE TABLE IF NOT EXISTS") for s in second.statements)
    assert [s.split()[5] for s in second.statements] == ["cycle_results", "cycle_leases"]


def test_migration_3_adds_the_working_memory_column_and_may_run_twice() -> None:
    third = load_migrations()[2]
    assert (third.version, third.name) == (3, "working_memory")
    assert third.statements == ("ALTER TABLE threads ADD IF NOT EXISTS working_memory text",)


def test_cycle_results_are_kept_a_week_unless_configured_and_always_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    assert CassandraSettings().cycle_result_ttl_s == 7 * 24 * 3600
    monkeypatch.setenv("OM_CASSANDRA_CYCLE_RESULT_TTL_S", "3600")
    assert Settings().cassandra.cycle_result_ttl_s == 3600
    with pytest.raises(ValidationError):
        CassandraSettings(cycle_result_ttl_s=0)  # results must expire: no "keep forever"


def test_a_lease_ttl_covers_cassandras_whole_second_expiry() -> None:
    # a cell of TTL n can expire up to a second early: the TTL is one more than lease_s rounded up
    assert [lease_ttl(s) for s in (0.2, 1, 1.5, 30)] == [2, 2, 3, 31]


def test_statements_split_on_line_ending_semicolons_and_skip_comments() -> None:
    text = "-- a comment; not a statement\nCREATE TABLE a (x int PRIMARY KEY);\n\nCREATE TABLE b (\n  y text\n);\n"
    assert _statements(text) == ("CREATE TABLE a (x int PRIMARY KEY)", "CREATE TABLE b (\n  y text\n)")
