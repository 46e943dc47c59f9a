"""What each request costs the caller's thread before it leaves: binding a prepared statement's values, and the
client timestamp the request carries.

``cassandra-driver`` builds a bound statement in ``PreparedStatement.bind``: for every value it makes a column
descriptor (a namedtuple, built in Python) for column encryption, which om-stream never configures, then calls the
column type's serializer. :class:`Prepared` keeps each column's serializer from the moment the statement is
prepared and calls them directly, into a ``BoundStatement`` that takes its consistency levels and idempotence from
the prepared statement (set once, in ``CassandraSession.prepare``). The bytes sent are the driver's own: the same
serializers, the same bound statement. Anything out of the ordinary (fewer values than markers, a dict, a column
encryption policy) goes through the driver's ``bind`` unchanged.

:class:`ClientTimestamps` gives every request its timestamp, as the driver's ``MonotonicTimestampGenerator`` does
(microseconds since the epoch, strictly increasing within the process), with one lock and no method calls.
Timestamps stay on the client, not the coordinator, on purpose: the store deletes rows at the present time and may
write the same rows again afterwards (an erased thread id used again, a purged bucket row written by the next
message, an erasure ledger row replaced, a thread's metadata written after a retention purge), and a write must sort
after the delete it follows. One process's timestamps always do; a coordinator's would only when the write reaches
the same coordinator, or one whose clock is not behind, and a write and the delete it follows go to different
coordinators whenever they touch different partitions of a batch or a replica is down.
"""

from __future__ import annotations

import logging
import re
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ClientTimestamps", "Prepared", "statement_kind"]

log = logging.getLogger(__name__)
_DRIFT_WARNING_US = 1_000_000  # the clock went back this far: said, at most once a minute
_WARN_EVERY_US = 60_000_000


_TABLE = re.compile(r"\b(?:INTO|FROM|UPDATE)\s+([A-Za-z_][\w.]*)", re.IGNORECASE)


def statement_kind(cql: str) -> tuple[str, str | None]:
    """A statement's kind, for a span: its operation (``INSERT``, ``SELECT``, ...) and its table, never a value."""
    words = cql.split(maxsplit=1)
    table = _TABLE.search(cql)
    return (words[0].upper() if words else "CQL"), (table.group(1) if table else None)


class Prepared:
    """A prepared statement with its columns' serializers, bound cheaply (:meth:`bind`), and its kind (a span's
    name: ``statement_kind``)."""

    __slots__ = ("_bound", "_columns", "_protocol", "_serializers", "_unset", "kind", "statement")

    def __init__(self, statement: Any) -> None:
        from cassandra.query import UNSET_VALUE, BoundStatement

        self.statement = statement
        self.kind = statement_kind(str(statement.query_string))
        columns = statement.column_metadata or ()
        self._columns = tuple(column.name for column in columns)
        # None: the driver binds (column encryption transforms values the serializers alone would not)
        self._serializers = (None if statement.column_encryption_policy is not None else
                             tuple(column.type.serialize for column in columns))
        self._protocol = statement.protocol_version
        self._bound = BoundStatement
        self._unset = UNSET_VALUE

    @property
    def query(self) -> str:
        return str(self.statement.query_string)

    def bind(self, params: Sequence[Any] | None) -> Any:
        """A ``BoundStatement`` of ``params`` (one per bind marker, in order; None: null; ``UNSET_VALUE``: unset).
        Raises TypeError naming the column when a value has the wrong type, like the driver."""
        values = () if params is None else params
        serializers = self._serializers
        if serializers is None or len(values) != len(serializers) or isinstance(values, dict):
            return self.statement.bind(values)
        bound = self._bound(self.statement)
        unset, protocol = self._unset, self._protocol
        try:
            bound.values = [value if value is None or value is unset else serialize(value, protocol)
                            for serialize, value in zip(serializers, values, strict=True)]
        except (TypeError, struct.error) as exc:
            raise TypeError(self._wrong_type(values)) from exc
        bound.raw_values = values
        return bound

    def _wrong_type(self, values: Sequence[Any]) -> str:
        """Which value the serializers refused (found again one by one: only on the error path)."""
        assert self._serializers is not None
        for name, serialize, value in zip(self._columns, self._serializers, values, strict=True):
            if value is None or value is self._unset:
                continue
            try:
                serialize(value, self._protocol)
            except (TypeError, struct.error) as exc:
                return f"invalid type for column {name!r} of {self.query!r}: {type(value).__name__} ({exc})"
        return f"invalid values for {self.query!r}"


class ClientTimestamps:
    """The ``timestamp_generator`` of om-stream's clusters: microseconds since the epoch, strictly increasing in the
    process (a clock that goes back, or two requests in one microsecond, move the next timestamp one past the last).
    Thread-safe: the driver calls it from whichever thread sends a request."""

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._clock_ns = clock_ns
        self._last = 0
        self._lock = threading.Lock()
        self._warned = 0

    def __call__(self) -> int:
        lock = self._lock
        lock.acquire()  # not ``with``: the context manager protocol costs as much as the rest
        try:
            now = self._clock_ns() // 1000
            last = self._last
            if now <= last:
                if last - now >= _DRIFT_WARNING_US and now - self._warned >= _WARN_EVERY_US:
                    self._warned = now
                    log.warning("the clock is %.1f s behind the last Cassandra write timestamp this process gave; "
                                "writes carry timestamps counted on from that one until the clock catches up",
                                (last - now) / 1e6)
                now = last + 1
            self._last = now
        finally:
            lock.release()
        return now
