"""Reading an export back into a deployment: the same memory, rebuilt (``om-stream import``,
``Memory.import_resource``).

An import replays the writes the engine made, through the ``ContentStore`` protocol (any store can be imported
into), then hands each record's state to the driver (:class:`RecordRestorer`), which applies it as an input of the
record (``core.inputs.RestoreRecord``): the embedded runner through its host, a worker deployment through its
memory agents (``runtime/worker/restores.py``). In order:

1. the header: the format, and the deployment's scope (a record's key depends on it);
2. the states, held until the end; before anything is written, they are checked (each is a state of the
   resource's records, every field of the right type) and so is the target, unless ``force``: it must hold no
   thread of the resource, and no state or observation of its records (an import never merges two memories);
3. the rows, as they come, in the file's order: threads' metadata, messages, records' epochs (a clear), segments
   (each then activated in every generation that held it), generations (committed oldest first: a reflection's
   ranges are computed from the segments it replaced, as when it was first committed), and the recall index's
   points (their texts embedded again by this deployment's embedder);
4. the end line: the counts must match what was read, or the import stops (a file cut off, or edited);
5. the states, last: a record's memory appears once everything it refers to is stored.

Every row belongs to the file's resource, or the import stops: an export cannot write into another tenant's
memory. Every write is idempotent, so an import that failed part-way can be run again with ``force``. A store that
commits writes together (``ports.BatchedWrites``: SQLite) gets one transaction per :data:`BATCH_LINES` lines.

Never logs the content it imports.
"""

from __future__ import annotations

import asyncio
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from om_stream.core.commands import (
    ActivateChunks,
    CommitGeneration,
    PersistSegment,
    PersistThreadMetadata,
    RejectInput,
)
from om_stream.core.restore import checked_state
from om_stream.core.state import RecordState
from om_stream.errors import InputRejected, WireDecodeError
from om_stream.ports import BatchedWrites, ContentStore, Embedder, ExportSource, RecallIndex, RecallPoint
from om_stream.wire.export import (
    EXPORT_SCHEMA,
    LINE_TYPES,
    EndLine,
    ExportLine,
    GenerationLine,
    HeaderLine,
    MessageLine,
    RecallPointLine,
    RecordLine,
    SegmentLine,
    StateLine,
    ThreadLine,
)

__all__ = ["BATCH_LINES", "AppliedRestorer", "ImportReport", "RecallTarget", "RecordRestorer", "import_lines"]

BATCH_LINES = 500  # lines decoded and written at a time
_EMBED_BATCH = 64
_RANK = {kind: rank for rank, kind in enumerate(LINE_TYPES)}


class RecordRestorer(Protocol):
    """How a deployment takes a record's state: as an input of the record, through its host."""

    async def restore(self, state: RecordState) -> None:
        """Apply (or queue, for the record's owner) ``state``; raises ``InputRejected`` when the record refuses it."""
        ...


class AppliedRestorer:
    """A restorer that applies each state at once through ``apply`` (the embedded runner's host), which returns the
    refusals; the first is raised."""

    def __init__(self, apply: Callable[[RecordState], Awaitable[Sequence[RejectInput]]]) -> None:
        self._apply = apply

    async def restore(self, state: RecordState) -> None:
        refused = await self._apply(state)
        if refused:
            raise InputRejected(refused[0].reason, refused[0].detail)


@dataclass(frozen=True)
class RecallTarget:
    """The deployment's recall index and the embedder of its vectors."""

    index: RecallIndex
    embedder: Embedder


@dataclass
class ImportReport:
    resource_id: str = ""
    states: int = 0
    threads: int = 0
    messages: int = 0
    records: int = 0
    segments: int = 0
    generations: int = 0
    recall_points: int = 0
    recall_points_skipped: int = 0  # the deployment keeps no recall index for them
    records_without_state: list[str] = field(default_factory=list)  # exported without one: rows only

    def summary(self) -> str:
        skipped = (f" ({self.recall_points_skipped} recall points skipped: no recall index here)"
                   if self.recall_points_skipped else "")
        return (f"resource {self.resource_id}: {self.states} record states, {self.threads} threads, "
                f"{self.messages} messages, {self.segments} segments, {self.generations} generations, "
                f"{self.recall_points} recall points{skipped}")


@dataclass
class _Import:
    store: ContentStore
    scope: str
    recall: RecallTarget | None
    report: ImportReport
    header: HeaderLine | None = None
    states: dict[str, RecordState] = field(default_factory=dict)
    records: set[str] = field(default_factory=set)  # record keys the file's rows may name
    points: list[RecallPointLine] = field(default_factory=list)  # waiting to be embedded
    rank: int = 0
    end: EndLine | None = None


async def import_lines(lines: AsyncIterable[bytes] | Iterable[bytes], *, store: ContentStore,
                       restorer: RecordRestorer, scope: str, recall: RecallTarget | None = None, force: bool = False,
                       holds: Callable[[Collection[str]], Awaitable[Collection[str]]] | None = None) -> ImportReport:
    """Import one export. ``holds(record_keys)``: those of the records the deployment already has a state for
    (asked, with the store, before anything is written, unless ``force``). Raises ``WireDecodeError`` for a file that is
    not a complete ``om.export/v1`` export of one resource, ``InputRejected`` when this deployment cannot take it
    (another scope; the resource is here already); ``StorageError`` from the store."""
    job = _Import(store, scope, recall, ImportReport())
    checked = False
    batch: list[tuple[int, Any]] = []
    number = 0
    async for raw in _each(lines):
        number += 1
        if not raw.strip():
            continue
        if job.end is not None:
            raise WireDecodeError("invalid_fields", f"line {number}: a line after the end line")
        item = _decode(number, raw).root
        _check_order(job, number, item)
        if isinstance(item, HeaderLine):
            continue
        if isinstance(item, StateLine):
            _take_state(job, number, item)
            continue
        if not checked:
            await _check_target(job, force, holds)
            checked = True
        if isinstance(item, EndLine):
            job.end = item
            continue
        batch.append((number, item))
        if len(batch) >= BATCH_LINES:
            await _write(job, batch)
            batch = []
    if job.header is None:
        raise WireDecodeError("unknown_schema", f"an empty file: an {EXPORT_SCHEMA} file starts with its header")
    if not checked:
        await _check_target(job, force, holds)
    await _write(job, batch)
    await _embed(job, _take_points(job))
    _check_end(job)
    for key in sorted(job.states):
        await restorer.restore(job.states[key])
    return job.report


async def _each(lines: AsyncIterable[bytes] | Iterable[bytes]) -> AsyncIterator[bytes]:
    if isinstance(lines, AsyncIterable):
        async for line in lines:
            yield line
    else:
        for line in lines:
            yield line


def _decode(number: int, raw: bytes) -> ExportLine:
    try:
        return ExportLine.model_validate_json(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        raise WireDecodeError("invalid_fields", f"line {number}: {problems}") from None


def _check_order(job: _Import, number: int, item: Any) -> None:
    if job.header is None:
        if not isinstance(item, HeaderLine):
            raise WireDecodeError("unknown_schema", f"line {number}: an {EXPORT_SCHEMA} file starts with its "
                                                    "header line")
        if item.scope != job.scope:
            raise InputRejected("scope_mismatch", f"the export is of a deployment in {item.scope} scope; this one "
                                                  f"is in {job.scope} scope (a record's key depends on it)")
        job.header = item
        job.report.resource_id = item.resource_id
        return
    rank = _RANK[item.type]
    if isinstance(item, HeaderLine) or rank < job.rank:
        raise WireDecodeError("invalid_fields", f"line {number}: a {item.type} line after the {LINE_TYPES[job.rank]} "
                                                f"lines (the order is {', '.join(LINE_TYPES)})")
    job.rank = rank


async def _check_target(job: _Import, force: bool,
                        holds: Callable[[Collection[str]], Awaitable[Collection[str]]] | None) -> None:
    """The states, and (unless ``force``) that the target holds nothing of the resource: before any write."""
    assert job.header is not None
    resource = job.header.resource_id
    for key, state in job.states.items():
        if state.resource_id != resource or state.scope != job.scope or not _is_record_of(key, state, job.scope):
            raise WireDecodeError("invalid_fields", f"the state of record {key!r} is not a state of a "
                                                    f"{job.scope}-scope record of resource {resource!r}")
    job.records.update(job.states)
    if force:
        return
    store = job.store
    if isinstance(store, ExportSource):
        thread = await anext(aiter(store.resource_threads(resource)), None)
        if thread is not None:
            raise InputRejected("resource_exists", f"this deployment already holds thread {thread.thread_id!r} of "
                                                   f"resource {resource!r}: an import never merges two memories "
                                                   "(import into a deployment without the resource, or with force "
                                                   "to run an import that failed part-way again)")
    held = set(await holds(list(job.states))) if holds is not None and job.states else set()
    for key in sorted(job.states):
        found = key in held
        if not found and isinstance(store, ExportSource):
            segment = await anext(aiter(store.record_segments(key)), None)
            found = segment is not None or await store.record_epoch(key) > 0
        if found:
            raise InputRejected("record_exists", f"this deployment already holds a memory of record {key!r}")


def _is_record_of(key: str, state: RecordState, scope: str) -> bool:
    """A thread-scope record is keyed by one of its threads; a resource-scope one by its resource."""
    return key == state.key and (key == state.resource_id if scope == "resource" else key in state.threads)


def _take_state(job: _Import, number: int, item: StateLine) -> None:
    try:
        state = checked_state(item.state)
    except ValueError as exc:
        raise WireDecodeError("invalid_fields", f"line {number}: {exc}") from None
    if item.record_key != state.key or item.record_key in job.states:
        raise WireDecodeError("invalid_fields", f"line {number}: a second state, or a state of another record than "
                                                f"{item.record_key!r}")
    job.states[item.record_key] = state
    job.report.states += 1


async def _write(job: _Import, batch: Sequence[tuple[int, Any]]) -> None:
    """A batch of lines, in order: one transaction for a store that batches writes, else the writes of consecutive
    lines of one type together (none of them depends on another), generations one by one."""
    store = job.store
    batches = isinstance(store, BatchedWrites)
    block: AbstractAsyncContextManager[Any] = store.batched_writes() if isinstance(store, BatchedWrites) \
        else nullcontext()
    async with block:
        run: list[Coroutine[Any, Any, None]] = []
        kind = ""
        try:
            for number, item in batch:
                if batches or item.type != kind or isinstance(item, GenerationLine):
                    await _gather(run)
                    kind = item.type
                write = _apply(job, number, item)
                if write is None:
                    continue
                if batches or isinstance(item, GenerationLine):
                    await write
                else:
                    run.append(write)
            await _gather(run)
        finally:
            for write in run:  # not started: a line after them was refused, or a write before them failed
                write.close()


async def _gather(writes: list[Coroutine[Any, Any, None]]) -> None:
    """Run the writes together and empty the list; the first failure is raised once all have finished."""
    pending = list(writes)
    writes.clear()
    if pending:
        outcomes = await asyncio.gather(*pending, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome


def _apply(job: _Import, number: int, item: Any) -> Coroutine[Any, Any, None] | None:
    """The write of one line (None: nothing to write now), after checking it belongs to the file's resource."""
    assert job.header is not None
    resource, report = job.header.resource_id, job.report
    if isinstance(item, ThreadLine):
        report.threads += 1
        return job.store.put_thread_metadata(PersistThreadMetadata(
            thread_id=item.thread_id, resource_id=resource, title=item.title, current_task=item.current_task,
            suggested_response=item.suggested_response, extracted_values=dict(item.extracted),
            last_observed_message_id=item.last_observed_message_id, working_memory=item.working_memory))
    if isinstance(item, MessageLine):
        message = item.message
        if message.resource_id != resource or item.record_key not in (message.thread_id, resource):
            raise WireDecodeError("invalid_fields", f"line {number}: message {message.message_id!r} is not one of "
                                                    f"resource {resource!r}'s records")
        job.records.add(item.record_key)
        report.messages += 1
        return job.store.put_message(item.record_key, message, item.seq, item.tokens)
    if isinstance(item, RecordLine | SegmentLine | GenerationLine | RecallPointLine) \
            and item.record_key not in job.records:
        raise WireDecodeError("invalid_fields", f"line {number}: record {item.record_key!r} holds no message of "
                                                f"resource {resource!r} in this file")
    if isinstance(item, RecordLine):
        report.records += 1
        return job.store.clear(item.record_key, item.epoch) if item.epoch > 0 else None
    if isinstance(item, SegmentLine):
        report.segments += 1
        return _put_segment(job.store, item)
    if isinstance(item, GenerationLine):
        report.generations += 1
        return job.store.commit_generation(CommitGeneration(
            record_key=item.record_key, generation=item.generation, segment_ids=tuple(item.segment_ids),
            reflection_id=item.reflection_id, replaced_segment_ids=tuple(item.replaced_segment_ids),
            observation_tokens=item.observation_tokens))
    assert isinstance(item, RecallPointLine)
    job.points.append(item)
    return _embed(job, _take_points(job)) if len(job.points) >= _EMBED_BATCH else None


async def _put_segment(store: ContentStore, item: SegmentLine) -> None:
    """The segment as buffered, then activated in each generation that held it: the store ends with the same
    generations, whatever generation it was first active in."""
    await store.put_segment(PersistSegment(
        record_key=item.record_key, segment_id=item.segment_id, kind=item.kind, status="buffered",
        generation=item.generation, text=item.text, tokens=item.tokens, cycle_id=item.cycle_id,
        thread_ids=tuple(item.thread_ids), first_message_id=item.first_message_id,
        last_message_id=item.last_message_id, message_ids=tuple(item.message_ids),
        message_tokens=item.message_tokens, boundary_at=item.boundary_at, created_at=item.created_at,
        ranges=tuple(r.to_range() for r in item.ranges)))
    for generation in item.generations:
        await store.activate_chunks(ActivateChunks(record_key=item.record_key, generation=generation,
                                                   chunk_ids=(item.segment_id,), position=0))


def _take_points(job: _Import) -> list[RecallPointLine]:
    points, job.points = job.points, []
    return points


async def _embed(job: _Import, points: list[RecallPointLine]) -> None:
    """Embed the points' texts with this deployment's embedder and write them to its index."""
    if not points:
        return
    assert job.header is not None
    if job.recall is None:
        job.report.recall_points_skipped += len(points)
        return
    vectors = await job.recall.embedder.embed([p.text for p in points])
    await job.recall.index.upsert([
        RecallPoint(resource_id=job.header.resource_id, record_key=p.record_key, thread_id=p.thread_id, kind=p.kind,
                    source_id=p.source_id, chunk=p.chunk, text=p.text, observed_at=p.observed_at,
                    vector=tuple(vector), range=p.range, cursor=p.cursor, author_keys=tuple(p.author_keys or ()))
        for p, vector in zip(points, vectors, strict=True)])
    job.report.recall_points += len(points)


def _check_end(job: _Import) -> None:
    end, report = job.end, job.report
    if end is None:
        raise WireDecodeError("truncated", "the file has no end line: the export was cut off; nothing of it is "
                                           "restored (its rows may be stored: import the complete file with force)")
    read = (report.states, report.threads, report.messages, report.records, report.segments, report.generations,
            report.recall_points + report.recall_points_skipped)
    counts = end.counts
    said = (counts.states, counts.threads, counts.messages, counts.records, counts.segments, counts.generations,
            counts.recall_points)
    if read != said:
        raise WireDecodeError("truncated", f"the end line counts {said} (states, threads, messages, records, "
                                           f"segments, generations, recall points); the file holds {read}")
    report.records_without_state = list(end.records_without_state)
