"""Compacting qdrant-client's local-mode storage after points are deleted, so the file keeps no copy of them.

Local mode (``QdrantClient(path=...)``) keeps each collection's points, payload text included, as rows of a SQLite
file (``<path>/collection/<name>/storage.sqlite``). A deleted row's bytes stay in SQLite's free pages until they are
reused, so after an erase the file would still hold the erased text. qdrant-client has no call for this; this
module reaches into its local storage, the one place in om-stream that does (qdrant-client 1.x: ``AsyncQdrantClient
._client`` is the ``AsyncQdrantLocal``, whose ``collections[name].storage.storage`` is the ``sqlite3`` connection).
``tests/component/test_erasure_stores.py`` fails if that path changes.

``VACUUM`` rewrites the file from its live rows only. It runs on the client's own connection, between operations
(the local client is used from the event loop's thread only, and commits after every write).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

__all__ = ["local_storage", "scrub_local_collection"]

log = logging.getLogger(__name__)


def local_storage(client: Any, collection: str) -> sqlite3.Connection | None:
    """The SQLite connection of a local-mode collection (None: not local mode, in memory, or not created yet)."""
    local = getattr(client, "_client", None)
    collections = getattr(local, "collections", None)
    if not isinstance(collections, dict) or collection not in collections:
        return None
    persistence = getattr(collections[collection], "storage", None)
    connection = getattr(persistence, "storage", None)
    return connection if isinstance(connection, sqlite3.Connection) else None


def scrub_local_collection(client: Any, collection: str) -> bool:
    """VACUUM the collection's storage file; False when there is none to compact (a server, or in memory)."""
    connection = local_storage(client, collection)
    if connection is None:
        return False
    try:
        connection.execute("VACUUM")
    except sqlite3.Error as exc:  # the points are deleted either way; only their old bytes may remain until the next
        log.warning("recall index %s: compacting local storage after a delete failed: %s", collection, exc)
        return False
    return True
