"""One asyncio lock per record, kept only while someone holds it or waits for it.

The embedded runner applies one input at a time per record (thread, or resource in resource scope). A lock made for
every record ever seen and never dropped grows with the number of threads; here a record's lock goes when its last
holder releases it and nobody waits, and the next input of the record makes a new one. Nobody can be holding or
waiting for a lock that is dropped, so no two inputs of one record ever run at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

__all__ = ["RecordLocks"]


@dataclass
class _Held:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # holding it, or waiting for it


class RecordLocks:
    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """``async with locks.hold(key):`` the record's inputs, one at a time."""
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Held()
        held.users += 1  # before the first await: the entry cannot be dropped from under a waiter
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if held.users == 0 and self._held.get(key) is held:
                del self._held[key]

    def __len__(self) -> int:
        """Records with a lock now (held or waited for)."""
        return len(self._held)
