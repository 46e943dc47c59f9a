"""``om-stream export`` and ``om-stream import`` against a worker deployment, configured like its workers (``OM_*``
settings): its content store, the memory agents' state table (read from its changelog, written through restores),
its topics and its recall index.

No worker needs to run for an export (a stopped deployment exports the same): the content store and the table's
changelog hold everything. An import writes the rows itself and queues each record's state for its memory agent
(``restores``), which applies it when it runs.

The recall index is reached only through a Qdrant server (``OM_QDRANT_URL``): a worker's local index lives in the
worker's process (``GET /v1/resources/{id}/export`` includes its points); here its points are left out of an
export and counted as skipped by an import.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from om_stream.errors import ConfigError, StorageError, WireDecodeError
from om_stream.ports import ContentStore, ExportSource, RecallPointSource
from om_stream.runtime.exporter import ExportSpec, export_lines, write_lines
from om_stream.runtime.importer import ImportReport, RecallTarget, import_lines
from om_stream.runtime.worker.changelog_states import ChangelogStates
from om_stream.runtime.worker.deps import WorkerDeps, build_deps, export_retention, kafka_client_options
from om_stream.runtime.worker.restores import KafkaRestorer
from om_stream.runtime.worker.topics import ensure_topics
from om_stream.settings import Settings

__all__ = ["ExportOutcome", "check_complete", "export_command", "export_resource", "import_command",
           "import_resource"]

_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class ExportOutcome:
    bytes_written: int
    recall_index_reached: bool  # False: the deployment's index is local to its workers (its points are not in it)


def _deps(settings: Settings) -> WorkerDeps:
    if settings.memory.store == "memory":
        raise ConfigError("OM_MEMORY_STORE", "the memory store lives in each worker's process: export over HTTP "
                                             "(GET /v1/resources/{id}/export); an import needs a shared store")
    return build_deps(settings)


def _server_index(settings: Settings) -> bool:
    return settings.qdrant.url is not None


async def _closing(store: ContentStore, deps: WorkerDeps) -> None:
    await store.close()
    if deps.recall is not None and deps.recall.index is not None:
        await deps.recall.index.close()


async def export_resource(settings: Settings, resource_id: str,
                          write: Callable[[bytes], Awaitable[None]]) -> ExportOutcome:
    """Write the resource's export to ``write``, a chunk at a time; raises ``StorageError`` when a store or the
    changelog cannot be read (``write`` then got an incomplete export: no end line)."""
    deps = _deps(settings)
    store = deps.store
    try:
        if not isinstance(store, ExportSource):
            raise StorageError(f"{store!r} cannot export", transient=False)
        await store.start()
        kafka = settings.kafka
        index = deps.recall.index if deps.recall is not None else None
        reached = index is None or _server_index(settings)
        spec = ExportSpec(resource_id, store, ChangelogStates(kafka, settings.worker.app_id,
                                                              client_options=kafka_client_options(kafka)),
                          deps.config.scope, deps.config.token_encoding,
                          index if reached and isinstance(index, RecallPointSource) else None, export_retention(deps))
        written = await write_lines(export_lines(spec), write)
    finally:
        await _closing(store, deps)
    return ExportOutcome(written, reached)


async def import_resource(settings: Settings, lines: AsyncIterable[bytes], *, force: bool = False) -> ImportReport:
    """Import an export into the deployment: rows into its store, states queued for its memory agents."""
    deps = _deps(settings)
    store = deps.store
    kafka = settings.kafka
    options = kafka_client_options(kafka)
    try:
        await store.start()
        await ensure_topics(kafka, settings.lifecycle, options, resource_scope=deps.config.scope == "resource")
        service = deps.recall
        recall = (RecallTarget(service.index, service.embedder) if service is not None and service.index is not None
                  and service.embedder is not None and _server_index(settings) else None)
        changelog = ChangelogStates(kafka, settings.worker.app_id, client_options=options)

        async def holds(keys: Collection[str]) -> list[str]:
            try:
                return [state.key async for state in changelog.states_of(keys)]
            except StorageError as exc:
                if exc.transient:
                    raise
                return []  # no changelog yet: no worker of this deployment ever held a record

        async with KafkaRestorer(kafka, options) as restorer:
            return await import_lines(lines, store=store, restorer=restorer, scope=deps.config.scope,
                                      recall=recall, force=force, holds=holds)
    finally:
        await _closing(store, deps)


def check_complete(path: Path) -> None:
    """Refuse, before anything is written, a file whose last line is not an export's end line (a download cut
    off); ``import_lines`` checks the counts it announces once it has read the rest."""
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(max(0, size - _TAIL_BYTES))
        tail = handle.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        last = json.loads(tail) if tail else None
    except ValueError:
        last = None
    if not isinstance(last, dict) or last.get("type") != "end":
        raise WireDecodeError("truncated", f"{path} does not end with an export's end line: the export was cut off "
                                           "or is not an om.export/v1 file; nothing was imported")


# -- the command line (``om-stream export`` / ``om-stream import``) --------------------------------------------------


def export_command(settings: Settings, resource_id: str, out: Path | None) -> int:
    """Export to ``out`` (written as ``<out>.partial``, renamed once complete) or to standard output."""
    if out is not None and not out.parent.is_dir():
        print(f"om-stream: no folder {out.parent} to write {out.name} in", file=sys.stderr)
        return 2
    if out is None:
        stdout = sys.stdout.buffer

        async def to_stdout(chunk: bytes) -> None:
            stdout.write(chunk)

        outcome = asyncio.run(export_resource(settings, resource_id, to_stdout))
        stdout.flush()
    else:
        partial = out.with_name(out.name + ".partial")
        try:
            with partial.open("wb") as handle:
                async def to_file(chunk: bytes) -> None:
                    handle.write(chunk)

                outcome = asyncio.run(export_resource(settings, resource_id, to_file))
            partial.replace(out)
        finally:
            partial.unlink(missing_ok=True)
    where = out if out is not None else "standard output"
    print(f"om-stream: export of resource {resource_id}: {outcome.bytes_written:,} bytes written to {where}",
          file=sys.stderr)
    if not outcome.recall_index_reached:
        print("om-stream: the recall index is local to the workers (no OM_QDRANT_URL): its points are not in this "
              "export; GET /v1/resources/{id}/export on a worker includes them", file=sys.stderr)
    return 0


def import_command(settings: Settings, source: str, *, force: bool) -> int:
    """Import the file ``source`` ('-': standard input) and print what was imported."""
    if source != "-":
        if not Path(source).is_file():
            print(f"om-stream: no export file at {source}", file=sys.stderr)
            return 2
        check_complete(Path(source))
    report = asyncio.run(import_resource(settings, _file_lines(source), force=force))
    print(f"imported {report.summary()}; the records' states are queued for the memory agents "
          f"({settings.kafka.topic_model_results})")
    if report.records_without_state:
        print(f"om-stream: {len(report.records_without_state)} record(s) had no state in the export: their rows are "
              "imported, their memory is not", file=sys.stderr)
    return 0


async def _file_lines(source: str) -> AsyncIterator[bytes]:
    if source == "-":
        for line in sys.stdin.buffer:
            yield line
        return
    with Path(source).open("rb") as handle:
        for line in handle:
            yield line
