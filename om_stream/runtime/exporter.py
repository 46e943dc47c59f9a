"""Writing an export: everything a deployment holds for one resource, as ``om.export/v1`` lines (``wire/export.py``).

Shared by the embedded runner (``Memory.export_resource``), the worker's ``GET /v1/resources/{id}/export`` and
``om-stream export``; each gives the content store (``ports.ExportSource``), where the records' states are
(:class:`StateReader`) and the recall index (``ports.RecallPointSource``, when there is one).

Streaming, in bounded memory: the lines are produced one at a time as the stores are read page by page, and the
caller writes them as they come (:func:`write_lines`). What is held at once is a page of rows, the resource's
thread ids and record keys, and the records' states (a few KB each).

The states are read first. A deployment writes a record's content rows before its state (the host's commit order),
so every message and segment a state refers to was stored before the state was read, and is in the file even if
the resource receives messages while it is exported. (Rows newer than a state are exported too; they are not part
of that state's memory.)

Cut at the retention window (``runtime.export_cut``): nothing past a record's window is written, whether or not
its purge has run; each record's state and rows are written as its purge would leave them.

Never logs what it exports: the file is the resource's personal data.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

from om_stream import __version__
from om_stream.core.engine import record_key
from om_stream.core.state import RecordState
from om_stream.ports import ExportSource, RecallPointSource
from om_stream.runtime.export_cut import ExportRetention, RecordCuts
from om_stream.wire.export import (
    EXPORT_SCHEMA,
    EndLine,
    GenerationLine,
    HeaderLine,
    LineCounts,
    RecallPointLine,
    RecordLine,
    SegmentLine,
    StateLine,
    ThreadLine,
    message_line,
)

__all__ = ["CHUNK_BYTES", "ExportRetention", "ExportSpec", "HeldStates", "StateReader", "export_lines",
           "write_lines"]

log = logging.getLogger(__name__)
CHUNK_BYTES = 64 * 1024  # lines are handed to the writer in chunks of about this size


class StateReader(Protocol):
    """Where a deployment's record states are: the embedded runner's dict, the worker's table, its changelog."""

    def states(self, resource_id: str, record_keys: Collection[str]) -> AsyncIterator[RecordState]:
        """The states it finds among ``record_keys`` (the records of the resource's threads). A reader that holds
        every record of the resource itself may give states of other records of the resource too."""
        ...


class HeldStates:
    """The states a process holds itself, in a mapping by record key (the embedded runner's table): every record
    of the resource that holds a conversation, whatever keys are asked for."""

    def __init__(self, states: Mapping[str, RecordState]) -> None:
        self._states = states

    async def states(self, resource_id: str, record_keys: Collection[str]) -> AsyncIterator[RecordState]:
        for state in list(self._states.values()):  # a snapshot: the records may change while the export runs
            if state.resource_id == resource_id and state.holds_conversation:
                yield state


@dataclass(frozen=True)
class ExportSpec:
    """What to export, from where."""

    resource_id: str
    source: ExportSource
    states: StateReader
    scope: Literal["thread", "resource"]
    token_encoding: str
    points: RecallPointSource | None = None  # None: the deployment keeps no recall index
    retention: ExportRetention | None = None  # the windows it is cut at (None: written as the stores hold it)


async def export_lines(spec: ExportSpec) -> AsyncIterator[bytes]:
    """The export, line by line (each ends with a newline), in the order ``wire/export.py`` describes."""
    resource, source = spec.resource_id, spec.source
    yield HeaderLine(schema_=EXPORT_SCHEMA, resource_id=resource, scope=spec.scope,
                     token_encoding=spec.token_encoding, exported_at=datetime.now(UTC),
                     generator=f"om-stream {__version__}").encode()
    thread_ids = [thread.thread_id async for thread in source.resource_threads(resource)]
    wanted = {record_key(spec.scope, thread_id, resource) for thread_id in thread_ids}
    states: dict[str, RecordState] = {}  # a few KB each; in key order, wherever the reader found them
    async for state in spec.states.states(resource, wanted):
        if state.resource_id == resource:
            states.setdefault(state.key, state)
    with_state = set(states)
    cuts = RecordCuts(spec.retention, resource, spec.scope) if spec.retention is not None else None
    for key in sorted(states):
        state = states[key] if cuts is None else await cuts.cut_state(states[key])
        yield StateLine(record_key=key, state=state.to_dict()).encode()
    threads = 0
    async for listed in source.resource_threads(resource):
        thread = listed if cuts is None else await cuts.thread(listed)
        if thread is not None:
            threads += 1
            yield ThreadLine.of(thread).encode()
    messages = 0
    records = set(with_state)
    async for message in source.resource_messages(resource):
        if cuts is not None and not (await cuts.of(message.record_key)).keeps_message(message.created_at):
            continue
        messages += 1
        records.add(message.record_key)
        yield message_line(message.record_key, message.seq, message.tokens, message.body)
    keys = sorted(records)
    for key in keys:
        yield RecordLine(record_key=key, epoch=await source.record_epoch(key)).encode()
    segments = 0
    for key in keys:
        cut = await cuts.of(key) if cuts is not None else None
        async for stored in source.record_segments(key):
            segment = stored if cut is None else cut.segment(stored)
            if segment is not None:
                segments += 1
                yield SegmentLine.of(segment).encode()
    generations = 0
    for key in keys:
        for generation in await source.record_generations(key):
            generations += 1
            yield GenerationLine.of(generation).encode()
    points = 0
    if spec.points is not None:
        async for stored_point in spec.points.resource_points(resource):
            kept = [stored_point] if cuts is None else (await cuts.of(stored_point.record_key)).points(
                stored_point, cuts.retention.accountant.count_text)
            for point in kept:
                points += 1
                yield RecallPointLine(record_key=point.record_key, thread_id=point.thread_id, kind=point.kind,
                                      source_id=point.source_id, chunk=point.chunk, text=point.text,
                                      observed_at=point.observed_at, range=point.range,
                                      cursor=point.cursor,
                                      author_keys=list(point.author_keys) or None).encode()
    missing = sorted(records - with_state)
    if missing:
        log.warning("export of resource %s: %d record(s) without a state (their rows are exported, their memory "
                    "is not)", resource, len(missing))
    counts = LineCounts(states=len(with_state), threads=threads, messages=messages, records=len(keys),
                        segments=segments, generations=generations, recall_points=points)
    yield EndLine(counts=counts, records_without_state=missing).encode()


async def write_lines(lines: AsyncIterator[bytes], write: Callable[[bytes], Awaitable[None]], *,
                      chunk_bytes: int = CHUNK_BYTES) -> int:
    """Hand ``lines`` to ``write`` in chunks of about ``chunk_bytes``, each write awaited (the writer's
    backpressure holds the reading back); returns the bytes written."""
    chunk: list[bytes] = []
    size = total = 0
    async for line in lines:
        chunk.append(line)
        size += len(line)
        if size >= chunk_bytes:
            await write(b"".join(chunk))
            total += size
            chunk, size = [], 0
    if chunk:
        await write(b"".join(chunk))
        total += size
    return total
