"""The memory agent's state table: each record's state on its home partition, whatever the store.

A record's *home* is the partition its inputs arrive on (messages, commands and its internal results share the
partition number: the topics are co-partitioned). Faust recovers a worker's table by replaying the changelog
partitions of the input partitions it is assigned, so a state survives a change of owner only if it was written to
the changelog partition of its home. Three rules keep that true:

* Keys are the record key's raw UTF-8 bytes, the very bytes of the input records' keys. (A ``str`` key would be
  JSON-encoded by Faust, ``"t-1"`` with its quotes, and hashed to some other partition.)
* Every read and write happens in the context of an event of that record (``use_partitioner=False``): Faust then
  writes the changelog record to the event's partition, and a RocksDB store reads and writes the database of that
  partition. The memory agent handles a batch of events at a time, so the table sets the event itself.
* The stored value says which partition it belongs to (``{"partition": p, "state": {...}}``): the in-memory store
  cannot tell which partition a key it wrote itself belongs to, and timers, the HTTP API and the clean-up after a
  rebalance must only see the records this worker holds now.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faust.stores import memory as faust_memory
from faust.stores import rocksdb as faust_rocksdb
from faust.types import EventT

from om_stream.core.state import RecordState
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.worker.faust_internals import in_event, rocksdb_databases
from om_stream.runtime.worker.kafka_records import SourceRecord

__all__ = ["TABLE_NAME", "HeldRecord", "RecordTable", "record_event"]

# ``om_state`` held JSON-encoded keys on the wrong partitions; the new name starts a changelog in the right layout
TABLE_NAME = "om_records"
DECODED_KEPT = 16_384  # decoded states kept in process (a few KB each)
ESTIMATED_KEYS = "rocksdb.estimate-num-keys"
ESTIMATED_BYTES = ("rocksdb.estimate-live-data-size", "rocksdb.cur-size-all-mem-tables")  # on disk, in memtables


@dataclass(frozen=True)
class HeldRecord:
    key: str
    partition: int
    state: RecordState


def encode_held(partition: int, state: RecordState) -> bytes:
    body = json.dumps(state.to_dict(), separators=(",", ":"))
    return f'{{"partition":{partition},"state":{body}}}'.encode()


def decode_held(raw: bytes) -> tuple[int, RecordState]:
    data = json.loads(raw)
    return int(data["partition"]), RecordState.from_dict(data["state"])


def record_event(arrival: Arrival[SourceRecord]) -> EventT[bytes]:
    """The Faust event an arrival came in (the table reads and writes through it). ``SourceRecord`` knows no Faust,
    so its handle is an ``object``; it becomes a Faust event here, at the table that needs one."""
    handle = arrival.source.handle
    if not isinstance(handle, EventT):
        raise TypeError(f"the state table is read and written through a Faust event, and {arrival.source!r} has none")
    return handle


class RecordTable:
    """The Faust table of record states (the host's ``StateTable``): ``get``/``set`` go through the Faust event of
    an input of the record (its home); ``held`` lists the records of the partitions this worker is assigned now."""

    def __init__(self, app: Any, *, partitions: int, active_partitions: Callable[[], set[int]],
                 changelog_config: Mapping[str, str] | None = None,
                 on_write: Callable[[str], None] | None = None) -> None:
        # changelog_config: the lifecycle settings' configuration of the changelog (retention.changelog_config)
        self.table = app.Table(TABLE_NAME, default=None, partitions=partitions, use_partitioner=False,
                               key_type=bytes, value_type=bytes, extra_topic_configs=dict(changelog_config or {}))
        self._active_partitions = active_partitions
        self._on_write = on_write  # told the key of every state written (the HTTP API's settled waits on it)
        # key -> (the bytes last read or written, what they decode to): a busy record is not decoded per input. The
        # records read or written last, at most DECODED_KEPT: with RocksDB the table itself is on disk, and this
        # map would otherwise hold every record the worker ever handled
        self._decoded: dict[str, tuple[bytes, int, RecordState]] = {}

    def _decode(self, key: str, raw: bytes) -> tuple[int, RecordState]:
        known = self._decoded.get(key)
        if known is not None and known[0] is raw:
            return known[1], known[2]
        partition, state = decode_held(raw)
        self._remember(key, raw, partition, state)
        return partition, state

    def _remember(self, key: str, raw: bytes, partition: int, state: RecordState) -> None:
        self._decoded.pop(key, None)  # to the end: the oldest entries go first
        self._decoded[key] = (raw, partition, state)
        while len(self._decoded) > DECODED_KEPT:
            del self._decoded[next(iter(self._decoded))]

    def local_records(self) -> int | None:
        """Records in the local store: exact in memory; RocksDB's own estimate per partition database, which counts
        overwritten values until a compaction merges them (an exact count would read every key); None when the
        store says nothing."""
        store = self.table.data
        if isinstance(store, faust_memory.Store):
            return len(store)
        if isinstance(store, faust_rocksdb.Store):
            return sum(int(db.property_int_value(ESTIMATED_KEYS) or 0)
                       for db in rocksdb_databases(store))
        return None

    def local_bytes(self) -> int | None:
        """Bytes of the records in the local store: in memory, the encoded states counted (a pass over the values'
        lengths: 1.9 to 2.7 ms per 50,000 records here); RocksDB's estimate of its live data on disk plus its
        memtables; None when the store says nothing. In a soak it tells live state apart from other growth."""
        store = self.table.data
        if isinstance(store, faust_memory.Store):
            return sum(map(len, filter(None, store.data.values())))
        if isinstance(store, faust_rocksdb.Store):
            return sum(int(db.property_int_value(name) or 0)
                       for db in rocksdb_databases(store) for name in ESTIMATED_BYTES)
        return None

    @property
    def decoded_size(self) -> int:
        """Records whose decoded state is kept (at most ``DECODED_KEPT``)."""
        return len(self._decoded)

    def get(self, arrival: Arrival[SourceRecord]) -> RecordState | None:
        key = arrival.key
        with in_event(record_event(arrival)):
            raw = self.table.get(key.encode())
        return self._decode(key, raw)[1] if isinstance(raw, bytes) else None

    def set(self, arrival: Arrival[SourceRecord], state: RecordState) -> None:
        partition, key = arrival.source.partition, arrival.key
        raw = encode_held(partition, state)
        with in_event(record_event(arrival)):
            self.table[key.encode()] = raw
        self._remember(key, raw, partition, state)
        if self._on_write is not None:
            self._on_write(key)

    def delete(self, arrival: Arrival[SourceRecord], key: str) -> None:
        """Remove a record (an erase): a tombstone in the changelog of the partition of ``arrival``'s event, which
        is the record's home (the erase's input arrived there)."""
        with in_event(record_event(arrival)):
            if key.encode() in self.table:
                del self.table[key.encode()]
        self._decoded.pop(key, None)
        if self._on_write is not None:
            self._on_write(key)

    def on_partition(self, partition: int, resource_id: str) -> list[HeldRecord]:
        """The records of ``resource_id`` homed on ``partition`` (a scan: for erasures, which are rare)."""
        return [held for held in self.held() if held.partition == partition and held.state.resource_id == resource_id]

    def home(self, key: str) -> int | None:
        """The partition of a record held here now (None: not held)."""
        held = self.lookup(key)
        return held.partition if held is not None else None

    def lookup(self, key: str) -> HeldRecord | None:
        """A record held here now, for readers outside the memory agent (HTTP API)."""
        raw = self.table.data.get(key.encode())
        if not isinstance(raw, bytes):
            return None
        partition, state = self._decode(key, raw)
        return HeldRecord(key, partition, state) if partition in self._active_partitions() else None

    def held(self) -> list[HeldRecord]:
        """Every record of the partitions assigned to this worker now."""
        active = self._active_partitions()
        records = []
        for raw_key, raw in list(self.table.data.items()):
            if not isinstance(raw, bytes):
                continue
            key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            partition, state = self._decode(key, raw)
            if partition in active:
                records.append(HeldRecord(key, partition, state))
        return records

    def forget_others(self) -> int:
        """Drop from the local store (never from the changelog) the records of partitions no longer assigned here,
        which the in-memory store would keep, stale, forever. Returns how many were dropped."""
        active = self._active_partitions()
        dropped = 0
        for raw_key, raw in list(self.table.data.items()):
            key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
            if not isinstance(raw, bytes) or self._decode(key, raw)[0] not in active:
                del self.table.data[raw_key]
                self._decoded.pop(key, None)
                dropped += 1
        for key in [k for k, (_, partition, _) in self._decoded.items() if partition not in active]:
            del self._decoded[key]
        return dropped
