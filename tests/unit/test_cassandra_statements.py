"""The Cassandra store's cheap binding and client timestamps (``cassandra_store/statements.py``), against the
driver's own: a statement bound by ``Prepared`` is the one ``PreparedStatement.bind`` makes (values, routing key,
consistency levels, idempotence, the bytes of the request), over many generated values. No server needed: prepared
statements are built from the driver's own classes and column types."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from om_stream.adapters.cassandra_store.statements import ClientTimestamps, Prepared

# a column of each kind the store binds: text, bigint, int, boolean, blob, list<text>, set<int>, map<text, text>
_COLUMNS = [("resource_id", "UTF8Type"), ("bucket", "LongType"), ("tokens", "Int32Type"), ("found", "BooleanType"),
            ("payload", "BytesType"), ("thread_ids", "ListType(UTF8Type)"), ("generations", "SetType(Int32Type)"),
            ("extracted", "MapType(UTF8Type,UTF8Type)"), ("[ttl]", "Int32Type")]
_INT32 = st.integers(-(2**31), 2**31 - 1)
_VALUES = [st.text(), st.integers(-(2**63), 2**63 - 1), _INT32, st.booleans(), st.binary(),
           st.lists(st.text(), max_size=4), st.sets(_INT32, max_size=4),
           st.dictionaries(st.text(), st.text(), max_size=3), st.integers(0, 2**31 - 1)]


def _prepared(routing: list[int], *, level: int = 6, serial: int = 9, idempotent: bool = True) -> Any:
    from cassandra.cqltypes import lookup_casstype
    from cassandra.protocol import ColumnMetadata
    from cassandra.query import PreparedStatement

    columns = [ColumnMetadata("om", "t", name, lookup_casstype(kind)) for name, kind in _COLUMNS]
    statement = PreparedStatement(columns, b"\x01\x02", routing, "INSERT INTO t (...) VALUES (...) USING TTL ?", "om",
                                  5, None, None)
    statement.consistency_level, statement.serial_consistency_level = level, serial
    statement.is_idempotent = idempotent
    return statement


def _same(ours: Any, drivers: Any) -> None:
    assert type(ours) is type(drivers)
    assert ours.values == drivers.values
    assert ours.routing_key == drivers.routing_key and ours.keyspace == drivers.keyspace
    assert (ours.consistency_level, ours.serial_consistency_level, ours.is_idempotent) == (
        drivers.consistency_level, drivers.serial_consistency_level, drivers.is_idempotent)


def _request(bound: Any) -> bytes:
    """The bytes of the request that executes ``bound`` (the driver's own encoder)."""
    from cassandra.protocol import ExecuteMessage, ProtocolHandler

    message = ExecuteMessage(bound.prepared_statement.query_id, bound.values, bound.consistency_level,
                             bound.serial_consistency_level, 5000, None, 1_700_000_000_000_000,
                             result_metadata_id=b"\x03")
    return bytes(ProtocolHandler.encode_message(message, 7, 5, None, False))


@settings(max_examples=300, deadline=None)
@given(st.tuples(*_VALUES), st.data())
def test_a_statement_bound_cheaply_is_the_one_the_driver_binds(values: tuple[Any, ...], data: st.DataObject) -> None:
    from cassandra.query import UNSET_VALUE

    # nulls and unset values anywhere but the routing key (the driver refuses an unset one there)
    values = tuple(v if i in (0, 1) else data.draw(st.sampled_from([v, v, None, UNSET_VALUE]))
                   for i, v in enumerate(values))
    statement = _prepared([0, 1], idempotent=data.draw(st.booleans()))
    ours, drivers = Prepared(statement).bind(values), statement.bind(values)
    _same(ours, drivers)
    assert _request(ours) == _request(drivers)


def test_a_single_column_routing_key_and_no_values() -> None:
    statement = _prepared([0])
    values = ("r", 1, 2, True, b"x", ["a"], {1}, {"k": "v"}, 0)
    _same(Prepared(statement).bind(values), statement.bind(values))
    bare = _prepared([])
    bare.column_metadata = []
    assert Prepared(bare).bind(None).values == [] == bare.bind(None).values


def test_what_the_fast_path_does_not_cover_is_bound_by_the_driver() -> None:
    from cassandra.query import UNSET_VALUE

    statement = _prepared([0, 1])
    short = ("r", 1, 2)  # fewer values than markers: the driver fills the rest with UNSET_VALUE
    _same(Prepared(statement).bind(short), statement.bind(short))
    assert Prepared(statement).bind(short).values[3:] == [UNSET_VALUE] * 6
    named = {"resource_id": "r", "bucket": 1}
    _same(Prepared(statement).bind(named), statement.bind(named))


def test_a_value_of_the_wrong_type_names_its_column() -> None:
    statement = _prepared([0, 1])
    with pytest.raises(TypeError, match=r"'tokens'.*str"):
        Prepared(statement).bind(("r", 1, "not a number", True, b"x", [], set(), {}, 0))
    with pytest.raises(TypeError):
        statement.bind(("r", 1, "not a number", True, b"x", [], set(), {}, 0))



def test_client_timestamps_increase_strictly_when_the_clock_stalls_or_goes_back(
        caplog: pytest.LogCaptureFixture) -> None:
    base = 1_700_000_000_000_000  # microseconds since the epoch
    readings = iter(n * 1000 for n in [base, base, base + 1, base - 500_000, base + 9, base + 5_000_000,
                                       base + 1_000, base + 1_000])
    stamps = ClientTimestamps(lambda: next(readings))
    # a stalled or backward clock gives one more than the last
    assert [stamps() for _ in range(6)] == [base, base + 1, base + 2, base + 3, base + 9, base + 5_000_000]
    assert not caplog.records  # half a second back is not drift worth a warning
    assert [stamps(), stamps()] == [base + 5_000_001, base + 5_000_002]
    assert "5.0 s behind" in caplog.text and len(caplog.records) == 1  # once a minute at most


def test_client_timestamps_are_unique_and_ordered_across_threads() -> None:
    stamps = ClientTimestamps()
    seen: list[list[int]] = [[] for _ in range(4)]

    def take(into: list[int]) -> None:
        for _ in range(20_000):
            into.append(stamps())

    threads = [threading.Thread(target=take, args=(s,)) for s in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [x for s in seen for x in s]
    assert len(set(every)) == len(every)
    assert all(s == sorted(s) for s in seen)


def test_clusters_take_client_timestamps_from_it() -> None:
    from om_stream.adapters.cassandra_store.session import build_cluster
    from om_stream.settings import CassandraSettings

    cluster = build_cluster(CassandraSettings(hosts="127.0.0.1:9142"))
    try:
        assert isinstance(cluster.timestamp_generator, ClientTimestamps)
    finally:
        cluster.shutdown()
