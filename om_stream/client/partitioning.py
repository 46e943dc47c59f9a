"""Which partition a record key lands on: the Java client's default partitioner (murmur2), as Faust and aiokafka use.

An agent's producer must partition exactly like this, or a thread's messages and its context and events would not
share a partition number (``schemas/vectors/partitions.json`` pins the values for every client).
"""

from __future__ import annotations

from aiokafka.partitioner import murmur2

__all__ = ["partition_for"]


def partition_for(key: str | bytes, partitions: int) -> int:
    """``(murmur2(key) & 0x7fffffff) % partitions``, the key as UTF-8 bytes."""
    if partitions < 1:
        raise ValueError("a topic has at least one partition")
    data = key.encode() if isinstance(key, str) else key
    return int(murmur2(data) & 0x7FFFFFFF) % partitions
