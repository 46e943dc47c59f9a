"""Writes held by a ``batched_writes`` block (``ports.BatchedWrites``) and committed in one SQLite transaction.

The host's phase 1 for a batch of inputs runs inside one block: each content write is held with what it caches once
committed, and the block's end commits them all in one transaction. A read inside the block commits what is held
first, so it sees what the task wrote before. Only the block's own task holds writes: a task started inside the block
inherits the holding (context variables are copied into new tasks) but writes at once, since it may outlive the
block.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from om_stream.adapters.sqlite_connection import SqliteConnection

__all__ = ["HeldWrites"]

T = TypeVar("T")


@dataclass
class _Holding:
    """The writes one block holds, each with what it caches once committed, and the task that opened the block."""

    task: asyncio.Task[Any] | None
    writes: list[tuple[Callable[[sqlite3.Connection], Any], Callable[[Any], None] | None]] = field(
        default_factory=list)


class HeldWrites:
    """One store's held writes, on its connection ``db``."""

    def __init__(self, db: SqliteConnection, name: str) -> None:
        self._db = db
        self._held: ContextVar[_Holding | None] = ContextVar(f"om-sqlite-held-{name}", default=None)

    async def write(self, fn: Callable[[sqlite3.Connection], T], then: Callable[[T], None] | None = None) -> None:
        """A content write, ``then`` told its result once it is committed: now, or when the current block ends."""
        holding = self._held.get()
        if holding is not None and holding.task is asyncio.current_task():
            holding.writes.append((fn, then))
            return
        result = await self._db.run(fn, write=True)
        if then is not None:
            then(result)

    async def commit(self) -> None:
        """Commit what the current task's block holds, in one transaction (nothing outside a block)."""
        holding = self._held.get()
        if holding is None or not holding.writes or holding.task is not asyncio.current_task():
            return
        writes = list(holding.writes)
        holding.writes.clear()  # committed or failed, they are not tried again here (the caller retries the block)
        results = await self._db.run(lambda conn: [fn(conn) for fn, _ in writes], write=True)
        for (_, then), result in zip(writes, results, strict=True):
            if then is not None:
                then(result)

    @asynccontextmanager
    async def block(self) -> AsyncIterator[None]:
        """This task's writes in the block, one transaction when it ends. If the block raises, the writes it holds
        are dropped. Nested, the outermost block commits."""
        if self._held.get() is not None:
            yield
            return
        token = self._held.set(_Holding(asyncio.current_task()))
        try:
            yield
            await self.commit()
        finally:
            self._held.reset(token)
