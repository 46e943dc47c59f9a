"""The embedded runner's background work: its Observer and Reflector cycles and its recall-index work run as tasks
beside the callers, kept by record so that an erase can stop a record's work and wait for it (``cancel``), and
``close`` stops them all. What it holds grows with the work running, never with the work done: a task leaves its
sets when it ends, and a record's set goes with its last task.

The recall-index work (``RecallIndexWork``) never fails an input: a segment left out of the index means a weaker
search, and a purge or a forget that failed is done again by the next one; each failure is logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from om_stream.core.commands import ExpireIndex, IndexForRecall
from om_stream.errors import OMError
from om_stream.runtime.recall_service import RecallService

__all__ = ["BackgroundWork", "RecallIndexWork"]

log = logging.getLogger(__name__)


class BackgroundWork:
    def __init__(self) -> None:
        self.closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._by_record: dict[str, set[asyncio.Task[None]]] = {}  # a record's model calls and indexing

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, work: Coroutine[Any, Any, None], name: str, key: str) -> None:
        """``work`` as a task of record ``key``; closed, the coroutine is dropped unstarted."""
        if self.closed:
            work.close()
            return
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        of_record = self._by_record.setdefault(key, set())
        of_record.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            of_record.discard(finished)
            if not of_record and self._by_record.get(key) is of_record:
                del self._by_record[key]

        task.add_done_callback(done)

    async def cancel(self, keys: list[str]) -> None:
        """Stop the work running for these records (an erase), and wait until it has stopped."""
        tasks = [task for key in keys for task in self._by_record.get(key, ())]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def settle(self) -> None:
        """Wait until no task runs (including those the finished ones started)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """No new work; the running work is cancelled and waited for."""
        self.closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class RecallIndexWork:
    def __init__(self, service: RecallService) -> None:
        self.service = service

    async def index(self, command: IndexForRecall) -> None:
        try:
            await self.service.index_segment(command)
        except OMError as exc:  # a weaker search, never a lost conversation
            log.warning("segment %s left out of the recall index: %s", command.segment_id, exc)

    async def expire(self, command: ExpireIndex) -> None:
        try:
            await self.service.expire(command)
        except OMError as exc:  # the next purge removes what is past the cutoff again; recall never shows it
            log.warning("recall index purge of %s failed: %s", command.record_key, exc)

    async def forget(self, resource_id: str, key: str) -> None:
        try:
            await self.service.forget(resource_id, key)
        except OMError as exc:
            log.warning("recall index still holds cleared record %s: %s", key, exc)
