"""Real Apache Cassandra: schema, writes, clustering order, and a lightweight transaction."""

from __future__ import annotations

import uuid

from cassandra.cluster import Cluster

from om_stream.settings import CassandraSettings


def test_keyspace_table_clustering_order_and_lightweight_transaction(cassandra_hosts: str) -> None:
    (host, port), = CassandraSettings(hosts=cassandra_hosts).contact_points()
    cluster = Cluster([host], port=port)
    session = cluster.connect()
    ks = f"it_{uuid.uuid4().hex[:10]}"
    try:
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', "
                        f"'replication_factor': 1}}")
        session.execute(f"CREATE TABLE {ks}.messages (thread_id text, seq int, body text, "
                        f"PRIMARY KEY ((thread_id), seq)) WITH CLUSTERING ORDER BY (seq DESC)")
        insert = session.prepare(f"INSERT INTO {ks}.messages (thread_id, seq, body) VALUES (?, ?, ?)")
        for seq in (3, 1, 4, 2, 0):
            session.execute(insert, ("t1", seq, f"body-{seq}"))
        rows = list(session.execute(f"SELECT seq, body FROM {ks}.messages WHERE thread_id = 't1'"))
        assert [r.seq for r in rows] == [4, 3, 2, 1, 0]
        assert rows[0].body == "body-4"

        session.execute(f"CREATE TABLE {ks}.records (record_id text PRIMARY KEY, generation int)")
        lwt = session.prepare(f"INSERT INTO {ks}.records (record_id, generation) VALUES (?, ?) IF NOT EXISTS")
        first = session.execute(lwt, ("thread:t1", 0)).one()
        second = session.execute(lwt, ("thread:t1", 7)).one()
        assert first.applied is True
        assert second.applied is False
        assert second.generation == 0  # the refused attempt reports the row that won
        stored = session.execute(f"SELECT generation FROM {ks}.records WHERE record_id = 'thread:t1'").one()
        assert stored.generation == 0
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        cluster.shutdown()
