"""A stand-in for the worker's recall endpoint on the ``om.recall.requests`` → ``om.recall.responses`` topic pair.

The worker does not serve recall yet; the clients' tests need the other end of the pair. This responder is exactly
what that endpoint has to do: decode ``om.recall.request/v1``, answer with ``RecallService.handle`` over the
worker's own content store (the SQLite file it writes), publish ``om.recall.response/v1`` keyed by the resource id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from pydantic import ValidationError

from om_stream.adapters.recall_service import RecallService
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.wire.codec import encode
from om_stream.wire.recall import RecallRequest

log = logging.getLogger(__name__)


class RecallResponder:
    def __init__(self, bootstrap: str, requests: str, responses: str, sqlite_path: Path) -> None:
        self.bootstrap, self.requests, self.responses = bootstrap, requests, responses
        self.store = SqliteContentStore(sqlite_path)
        self.service = RecallService(self.store, lambda text: max(1, len(text) // 4))
        self.answered = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.store.open()
        self._consumer = AIOKafkaConsumer(self.requests, bootstrap_servers=self.bootstrap,
                                          group_id=f"recall-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest",
                                          metadata_max_age_ms=1000)
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=1)
        await self._consumer.start()
        await self._producer.start()
        self._task = asyncio.create_task(self._serve())

    async def _serve(self) -> None:
        async for record in self._consumer:
            try:
                request = RecallRequest.model_validate_json(record.value)
            except ValidationError as exc:
                log.warning("unreadable recall request: %s", exc)
                continue
            response = await self.service.handle(request)
            await self._producer.send_and_wait(self.responses, encode(response), key=request.resource_id.encode())
            self.answered += 1

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()
        await self._producer.stop()
        await self.store.close()
