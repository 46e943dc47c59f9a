"""Access control, as a property over random data and random recall calls (SQLite store, Qdrant local index):
a recall scoped to resource R never returns anything of another resource, in any mode."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.adapters.sqlite_store import SqliteContentStore
from tests.support.leak_property import Thread, calls, check_no_leak, worlds


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), world=worlds())
def test_no_recall_returns_anything_of_another_resource(data: st.DataObject, world: list[Thread]) -> None:
    queries = [data.draw(calls(world)) for _ in range(8)]
    check_no_leak(SqliteContentStore(":memory:"), world, queries)
