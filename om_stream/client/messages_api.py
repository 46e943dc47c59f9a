"""Fetching a context's raw messages from the worker's HTTP API, for an ``om.context/v2`` cursor whose run the
client does not hold (``GET /v1/threads/{id}/messages?from=&through=``, answered ``om.http.thread-messages/v1`` by
the worker that owns the thread, with the same bearer token as every ``/v1`` call)."""

from __future__ import annotations

import logging
from urllib.parse import quote

import aiohttp
from pydantic import ValidationError

from om_stream.core.messages import Message
from om_stream.wire.context_v2 import ContextCursor, ThreadMessages

__all__ = ["MessagesApi"]

log = logging.getLogger(__name__)


class MessagesApi:
    """``base_url``: the worker's API (``http://worker:6066``); ``token``: its ``OM_WORKER_API_TOKEN``."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def run(self, cursor: ContextCursor) -> list[Message]:
        """The cursor's pin, then its run ``first``..``through`` as the worker holds it (empty when the worker
        cannot answer: the context then waits for the next cursor)."""
        raw = cursor.raw
        wanted = ([(raw.pinned_message_id, raw.pinned_message_id)] if raw.pinned_message_id is not None else [])
        if raw.first_message_id is not None and raw.through_message_id is not None:
            wanted.append((raw.first_message_id, raw.through_message_id))
        out: list[Message] = []
        async with aiohttp.ClientSession(timeout=self._timeout, headers=self._headers) as session:
            for first, through in wanted:
                fetched = await self._fetch(session, cursor, first, through)
                if fetched is None:
                    return []
                out.extend(fetched)
        return out

    async def _fetch(self, session: aiohttp.ClientSession, cursor: ContextCursor, first: str,
                     through: str) -> list[Message] | None:
        url = f"{self.base_url}/v1/threads/{quote(cursor.thread_id, safe='')}/messages"
        params = {"from": first, "through": through, "resource_id": cursor.resource_id}
        try:
            async with session.get(url, params=params) as response:
                if response.status != 200:
                    log.warning("the messages API answered %d for a run of thread %r", response.status,
                                cursor.thread_id)
                    return None
                return ThreadMessages.model_validate_json(await response.read()).messages
        except (aiohttp.ClientError, TimeoutError, ValidationError) as exc:
            log.warning("the messages API could not give a run of thread %r: %s", cursor.thread_id, exc)
            return None
