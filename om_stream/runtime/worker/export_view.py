"""``GET /v1/resources/{id}/export``: a resource's export (``om.export/v1``, JSON Lines), streamed as it is read.

Any memory worker answers for the whole resource: the content store and the recall index are the deployment's,
and the records' states come from this worker's table for the records it holds and from the table's changelog
for the others (``changelog_states``). The body is sent chunked as the stores are read a page at a time, so the
worker holds a page, not the export; the client's pace holds the reading back. Behind the API's bearer token like
every ``/v1/*`` route (``web.api_guard``).

Once the first bytes are sent the status cannot change: a failure part-way cuts the response off, without the
export's end line, and an importer refuses a file without it. The export is the resource's personal data: only
its size is logged.
"""

from __future__ import annotations

import logging
import re

from aiohttp import web as aiohttp_web

from om_stream.ports import ExportSource, RecallPointSource
from om_stream.runtime.exporter import ExportSpec, export_lines, write_lines
from om_stream.runtime.worker.changelog_states import ChangelogStates, TableThenChangelog
from om_stream.runtime.worker.deps import WorkerDeps, export_retention, kafka_client_options
from om_stream.runtime.worker.state_table import RecordTable

__all__ = ["CONTENT_TYPE", "export_response"]

log = logging.getLogger(__name__)
CONTENT_TYPE = "application/x-ndjson"


def _spec(deps: WorkerDeps, table: RecordTable, resource_id: str, source: ExportSource) -> ExportSpec:
    kafka = deps.settings.kafka
    changelog = ChangelogStates(kafka, deps.settings.worker.app_id, client_options=kafka_client_options(kafka))
    index = deps.recall.index if deps.recall is not None else None
    return ExportSpec(resource_id, source, TableThenChangelog(table, changelog), deps.config.scope,
                      deps.config.token_encoding, index if isinstance(index, RecallPointSource) else None,
                      export_retention(deps))


async def export_response(request: aiohttp_web.Request, deps: WorkerDeps, table: RecordTable,
                          resource_id: str) -> aiohttp_web.StreamResponse:
    if not 1 <= len(resource_id) <= 256:
        return aiohttp_web.json_response({"error": "invalid_fields", "detail": "a resource id has 1 to 256 "
                                                                               "characters"}, status=400)
    store = deps.store
    if not isinstance(store, ExportSource):
        return aiohttp_web.json_response({"error": "not_found", "detail": "this deployment's content store cannot "
                                                                          "export"}, status=404)
    if await anext(aiter(store.resource_threads(resource_id)), None) is None:
        return aiohttp_web.json_response({"error": "not_found", "detail": f"this deployment holds no thread of "
                                                                          f"resource {resource_id!r}"}, status=404)
    filename = re.sub(r"[^A-Za-z0-9._-]", "_", resource_id)[:100]
    response = aiohttp_web.StreamResponse(headers={
        "Content-Type": CONTENT_TYPE, "Cache-Control": "no-store",
        "Content-Disposition": f'attachment; filename="om-export-{filename}.jsonl"'})
    await response.prepare(request)  # no length: chunked for HTTP/1.1, the connection's end for HTTP/1.0
    try:
        size = await write_lines(export_lines(_spec(deps, table, resource_id, store)), response.write)
    except Exception:
        # the status is sent already: cutting the body off (no end line) is how the client learns it is incomplete
        log.exception("export of resource %s failed part-way; the response is cut off", resource_id)
        if request.transport is not None:
            request.transport.close()
        return response
    await response.write_eof()
    log.info("export of resource %s sent (%d bytes)", resource_id, size)
    return response
