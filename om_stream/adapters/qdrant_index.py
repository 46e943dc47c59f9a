"""The recall index on Qdrant: a Qdrant server (``url``) or qdrant-client's local mode (``path`` or ``:memory:``).

* One collection per embedding model and dimension (``om_recall_<model>_<dim>``): vectors of different models
  never meet, and a model change starts a new collection instead of corrupting one.
* ``resource_id`` is the tenant key: a keyword payload index with ``is_tenant`` on a server (Qdrant co-locates a
  tenant's points); every query and delete carries a ``must`` filter on it, so one tenant never sees another's
  points. Local mode ignores payload indexes (it filters by scanning), so none are created there.
* A message's points carry its author's keys (``author_keys``, a keyword list: ``Author.keys``), so a search by
  author is filtered by the index, not among the nearest points of everyone.
* Point ids are UUIDs derived from the point's identity (tenant, record, kind, message or group id, thread, chunk):
  indexing the same observation again overwrites the same points.

Local mode is for the embedded runner and tests (brute force, filters evaluated in Python, a warning past 20,000
points, one process per ``path``); production uses a server. qdrant-client exceptions become
:class:`~om_stream.errors.StorageError` here and never leave.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, cast

from om_stream.adapters.qdrant_scrub import scrub_local_collection
from om_stream.core.messages import author_query_keys
from om_stream.errors import StorageError
from om_stream.ports import RecallHit, RecallPoint

__all__ = ["QdrantRecallIndex", "collection_name", "point_id"]

log = logging.getLogger(__name__)

_NAMESPACE = uuid.UUID("6f6d2d73-7472-6561-6d2d-726563616c6c")  # "om-stream-recall"
_UPSERT_BATCH = 256


def collection_name(model_id: str, dimension: int, prefix: str = "om_recall") -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_") or "model"
    return f"{prefix}_{slug}_{dimension}"


def point_id(point: RecallPoint) -> str:
    key = "\x1f".join((point.resource_id, point.record_key, point.kind, point.source_id, point.thread_id,
                       str(point.chunk)))
    return str(uuid.uuid5(_NAMESPACE, key))


class QdrantRecallIndex:
    """A :class:`~om_stream.ports.RecallIndex` for one embedding model.

    Give ``url`` (and ``api_key``) for a server, ``path`` for a local on-disk index, or neither for an in-memory
    one. The collection is created on first use.
    """

    def __init__(self, model_id: str, dimension: int, *, url: str | None = None, api_key: str | None = None,
                 path: str | None = None, collection_prefix: str = "om_recall", timeout_s: int = 10,
                 client: Any = None) -> None:
        self.collection = collection_name(model_id, dimension, collection_prefix)
        self.dimension = dimension
        self.local = url is None
        self._options: dict[str, Any] = ({"url": url, "api_key": api_key, "timeout": timeout_s} if url
                                         else {"path": path} if path and path != ":memory:"
                                         else {"location": ":memory:"})
        self._client: Any = client
        self._ready = False
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        where = self._options.get("url") or self._options.get("path") or ":memory:"
        return f"QdrantRecallIndex({self.collection!r} at {where!r})"

    async def _ensure(self) -> Any:
        if self._ready:
            return self._client
        async with self._lock:
            if self._ready:
                return self._client
            from qdrant_client import AsyncQdrantClient, models

            try:
                if self._client is None:
                    self._client = AsyncQdrantClient(**self._options)
                client = self._client
                if not await client.collection_exists(self.collection):
                    await client.create_collection(
                        self.collection,
                        vectors_config=models.VectorParams(size=self.dimension, distance=models.Distance.COSINE))
                if not self.local:
                    await self._payload_indexes(client, models)
            except StorageError:
                raise
            except Exception as exc:
                raise StorageError(f"recall index {self.collection}: {type(exc).__name__}: {exc}") from exc
            self._ready = True
            return client

    async def _payload_indexes(self, client: Any, models: Any) -> None:
        try:
            await client.create_payload_index(
                self.collection, "resource_id",
                field_schema=models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True))
        except Exception:  # noqa: BLE001 - a server older than 1.11 refuses is_tenant: a plain keyword index
            log.info("Qdrant refused an is_tenant index on %s; using a plain keyword index", self.collection)
            await client.create_payload_index(self.collection, "resource_id",
                                              field_schema=models.PayloadSchemaType.KEYWORD)
        for name in ("thread_id", "record_key", "author_keys"):
            await client.create_payload_index(self.collection, name, field_schema=models.PayloadSchemaType.KEYWORD)
        await client.create_payload_index(self.collection, "observed_at",
                                          field_schema=models.PayloadSchemaType.INTEGER)

    async def upsert(self, points: Sequence[RecallPoint]) -> None:
        if not points:
            return
        client = await self._ensure()
        from qdrant_client import models

        structs = []
        for point in points:
            if len(point.vector) != self.dimension:
                raise StorageError(f"recall index {self.collection}: a vector of dimension {len(point.vector)}, "
                                   f"expected {self.dimension}")
            structs.append(models.PointStruct(id=point_id(point), vector=list(point.vector), payload={
                "resource_id": point.resource_id, "record_key": point.record_key, "thread_id": point.thread_id,
                "kind": point.kind, "source_id": point.source_id, "chunk": point.chunk, "text": point.text,
                "observed_at": point.observed_at, "range": point.range, "cursor": point.cursor,
                "author_keys": list(point.author_keys)}))
        try:
            for start in range(0, len(structs), _UPSERT_BATCH):
                await client.upsert(self.collection, points=structs[start:start + _UPSERT_BATCH], wait=True)
        except Exception as exc:
            raise StorageError(f"recall index {self.collection}: upsert failed: {type(exc).__name__}: {exc}") from exc

    async def query(self, vector: Sequence[float], *, resource_id: str, limit: int, thread_id: str | None = None,
                    observed_after: int | None = None, observed_before: int | None = None,
                    author: str | None = None) -> list[RecallHit]:
        client = await self._ensure()
        from qdrant_client import models

        must: list[Any] = [models.FieldCondition(key="resource_id", match=models.MatchValue(value=resource_id))]
        if thread_id is not None:
            must.append(models.FieldCondition(key="thread_id", match=models.MatchValue(value=thread_id)))
        if observed_after is not None or observed_before is not None:
            must.append(models.FieldCondition(key="observed_at", range=models.Range(gt=observed_after,
                                                                                     lt=observed_before)))
        if author is not None:  # any of the point's keys (a list) is one of the author's
            must.append(models.FieldCondition(key="author_keys",
                                              match=models.MatchAny(any=list(author_query_keys(author)))))
        try:
            response = await client.query_points(self.collection, query=list(vector),
                                                 query_filter=models.Filter(must=must), limit=limit,
                                                 with_payload=True)
        except Exception as exc:
            raise StorageError(f"recall index {self.collection}: query failed: {type(exc).__name__}: {exc}") from exc
        hits: list[RecallHit] = []
        for scored in response.points:
            payload = scored.payload or {}
            if payload.get("resource_id") != resource_id:  # the filter makes this impossible; keep it impossible
                continue
            hits.append(RecallHit(
                resource_id=resource_id, record_key=str(payload.get("record_key", "")),
                thread_id=str(payload.get("thread_id", "")),
                kind=cast(Literal["message", "group"], payload.get("kind", "message")),
                source_id=str(payload.get("source_id", "")), chunk=int(payload.get("chunk", 0)),
                text=str(payload.get("text", "")), observed_at=int(payload.get("observed_at", 0)),
                score=float(scored.score), range=payload.get("range"), cursor=payload.get("cursor")))
        return hits

    async def _delete(self, selector: Any, what: str) -> None:
        client = await self._ensure()
        try:
            await client.delete(self.collection, points_selector=selector, wait=True)
        except Exception as exc:
            raise StorageError(f"recall index {self.collection}: {what} failed: {type(exc).__name__}: {exc}") from exc

    async def delete_record(self, resource_id: str, record_key: str) -> None:
        from qdrant_client import models

        await self._delete(models.FilterSelector(filter=models.Filter(must=[
            _tenant(models, resource_id),
            models.FieldCondition(key="record_key", match=models.MatchValue(value=record_key))])), "delete")

    async def delete_points(self, points: Sequence[RecallPoint]) -> None:
        if not points:
            return
        from qdrant_client import models

        await self._delete(models.PointIdsList(points=[point_id(p) for p in points]), "delete")
        await self._scrub()

    async def erase(self, resource_id: str, thread_id: str | None = None) -> int:
        from qdrant_client import models

        found = await self.count(resource_id, thread_id)
        if found:
            await self._delete(models.FilterSelector(filter=_subject(models, resource_id, thread_id)), "erase")
            await self._scrub()
        return found

    async def expire(self, resource_id: str, record_key: str, before: int, source_ids: Sequence[str] = ()) -> int:
        from qdrant_client import models

        expired: list[Any] = [models.FieldCondition(key="observed_at", range=models.Range(lt=before))]
        if source_ids:
            expired.append(models.FieldCondition(key="source_id", match=models.MatchAny(any=list(source_ids))))
        selected = models.Filter(must=[_tenant(models, resource_id), models.FieldCondition(
            key="record_key", match=models.MatchValue(value=record_key))], should=expired)
        client = await self._ensure()
        try:
            found = int((await client.count(self.collection, count_filter=selected, exact=True)).count)
        except Exception as exc:
            raise StorageError(f"recall index {self.collection}: count failed: {type(exc).__name__}: {exc}") from exc
        if found:
            await self._delete(models.FilterSelector(filter=selected), "expire")
            await self._scrub()
        return found

    async def _scrub(self) -> None:
        """Local mode keeps points in a SQLite file that leaves deleted rows' bytes in its free pages: compact it
        (``qdrant_scrub``). A server compacts its own segments (its optimizer)."""
        if self.local and "path" in self._options:
            scrub_local_collection(self._client, self.collection)

    async def resource_points(self, resource_id: str) -> AsyncIterator[RecallPoint]:
        """``ports.RecallPointSource``: the tenant's points, scrolled a page at a time by point id, their payloads
        only (an export carries no vectors: the importer embeds the texts again)."""
        client = await self._ensure()
        from qdrant_client import models

        tenant = models.Filter(must=[models.FieldCondition(key="resource_id",
                                                           match=models.MatchValue(value=resource_id))])
        offset: Any = None
        while True:
            try:
                points, offset = await client.scroll(self.collection, scroll_filter=tenant, limit=_UPSERT_BATCH,
                                                     offset=offset, with_payload=True, with_vectors=False)
            except Exception as exc:
                raise StorageError(f"recall index {self.collection}: scroll failed: {type(exc).__name__}: "
                                   f"{exc}") from exc
            for point in points:
                payload = point.payload or {}
                if payload.get("resource_id") != resource_id:  # the filter makes this impossible; keep it so
                    continue
                yield RecallPoint(
                    resource_id=resource_id, record_key=str(payload.get("record_key", "")),
                    thread_id=str(payload.get("thread_id", "")),
                    kind=cast(Literal["message", "group"], payload.get("kind", "message")),
                    source_id=str(payload.get("source_id", "")), chunk=int(payload.get("chunk", 0)),
                    text=str(payload.get("text", "")), observed_at=int(payload.get("observed_at", 0)), vector=(),
                    range=payload.get("range"), cursor=payload.get("cursor"),
                    author_keys=tuple(str(k) for k in payload.get("author_keys") or ()))
            if offset is None:
                return

    async def count(self, resource_id: str | None = None, thread_id: str | None = None) -> int:
        """Points stored: all, a tenant's, or one thread's of a tenant."""
        client = await self._ensure()
        from qdrant_client import models

        flt = _subject(models, resource_id, thread_id) if resource_id is not None else None
        try:
            result = await client.count(self.collection, count_filter=flt, exact=True)
        except Exception as exc:
            raise StorageError(f"recall index {self.collection}: count failed: {type(exc).__name__}: {exc}") from exc
        return int(result.count)

    async def close(self) -> None:
        if self._client is not None:
            try:
                await self._client.close()
            except Exception as exc:  # noqa: BLE001 - closing must not fail a shutdown
                log.debug("closing the Qdrant client failed: %s", exc)
            self._client = None
            self._ready = False


def _tenant(models: Any, resource_id: str) -> Any:
    return models.FieldCondition(key="resource_id", match=models.MatchValue(value=resource_id))


def _subject(models: Any, resource_id: str, thread_id: str | None) -> Any:
    must = [_tenant(models, resource_id)]
    if thread_id is not None:
        must.append(models.FieldCondition(key="thread_id", match=models.MatchValue(value=thread_id)))
    return models.Filter(must=must)
