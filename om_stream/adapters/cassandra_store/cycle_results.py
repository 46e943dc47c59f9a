"""Model-call results and their leases on Cassandra (``ports.CycleResults``; tables: ``migrations/0002_*.cql``).

A result is one plain insert ``USING TTL cycle_result_ttl_s`` (a later put replaces it). A lease is a row written
``USING TTL``, so it ends by itself when its holder dies, and every lease write is a lightweight transaction, so
racing workers agree on one holder:

1. ``INSERT ... IF NOT EXISTS`` takes a free key (no row, or an expired one);
2. not applied, the row names the holder: another owner is refused; the same owner renews with
   ``UPDATE ... IF owner = ?`` (which also absorbs a retried take whose first answer was lost: the row is ours);
3. a renewal that finds the lease gone (it expired between 1 and 2) takes it again from 1.

Storing a result writes it and its by-record index (what an erase finds it by) together, and leaves the lease to
its TTL: every caller reads the result before it claims (``ports.CycleResults``), so ending the lease would only
add a lightweight transaction to every model call, and those are the dearest statements here (a Paxos round on
each replica: in the hour-long soak, the leases and their Paxos state were about a third of the cluster's
writes). The store owns the session; this class only runs its prepared statements.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from om_stream.adapters.memory_store import check_request
from om_stream.errors import StorageError

__all__ = ["CassandraCycleResults", "lease_ttl"]

Run = Callable[[str, Sequence[Any]], Awaitable[list[Any]]]
_ATTEMPTS = 4  # take/renew rounds before giving up: each extra one needs a lease that expired mid-claim


def lease_ttl(lease_s: float) -> int:
    """The TTL that keeps a lease at least ``lease_s``: Cassandra expires a cell at a whole second, so a TTL of n
    can end up to a second early; one more second covers it."""
    return math.ceil(lease_s) + 1


class CassandraCycleResults:
    def __init__(self, run: Run, result_ttl_s: int) -> None:
        self._run = run
        self._ttl = result_ttl_s

    async def get_result(self, key: str) -> bytes | None:
        check_request(key)
        rows = await self._run("cycle_result", (key,))
        return bytes(rows[0].payload) if rows and rows[0].payload is not None else None

    async def put_result(self, key: str, payload: bytes, record_key: str) -> None:
        check_request(key)
        await asyncio.gather(self._run("put_cycle_result", (key, bytes(payload), self._ttl)),
                             self._run("cycle_result_of_record", (record_key, key, self._ttl)))

    async def drop_result(self, key: str) -> None:
        check_request(key)
        await self._run("drop_cycle_result", (key,))

    async def claim(self, key: str, owner: str, lease_s: float) -> str | None:
        check_request(key, lease_s)
        ttl = lease_ttl(lease_s)
        for _ in range(_ATTEMPTS):
            taken, holder = _outcome(await self._run("take_lease", (key, owner, ttl)))
            if taken:
                return None
            if holder == owner:
                renewed, holder = _outcome(await self._run("renew_lease", (ttl, owner, key, owner)))
                if renewed:
                    return None
            if holder is not None:
                return holder
            # no holder: the lease expired between two statements, take it again
        raise StorageError(f"Cassandra: the lease on {key!r} kept expiring while {owner!r} claimed it "
                           f"({_ATTEMPTS} rounds)")


def _outcome(rows: list[Any]) -> tuple[bool, str | None]:
    """Whether a lightweight transaction applied and, when not, the owner in the row it found (None: no row)."""
    found = rows[0]._asdict() if rows else {}
    owner = found.get("owner")
    return bool(found.get("applied")), None if owner is None else str(owner)
