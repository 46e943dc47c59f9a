"""An export cut at the retention window: what each record's purge would leave, as it is read (``runtime.exporter``).

Nothing past a record's window may appear in an export once the window has passed, whether or not the record's
purge (``core.expiry``) has removed it from the stores yet. The export does not cut by a rule of its own: it runs
the purge on its copy of the record's state (``decide`` with an ``ExpiryDue`` at the record's cutoff, as the host
does when the purge timer fires) and applies the stores' side of that decision to the rows as they stream past:

* the state line is the state the purge leaves (expired messages, segments and derived metadata gone, segments
  with expired entries under their new ids, a reflection over changed segments overtaken);
* a message created before the cutoff is left out (``ExpireStored``: the threads' messages before ``before``);
* a segment the purge deletes is left out, one it rewrites is written under its new id with its cut text; a
  segment earlier generations left behind goes whole when anything in it expired (``expiry.left_behind_expired``,
  the purge's own rule for them);
* a thread whose derived metadata the purge removes is written without it; a thread with no message left is left
  out (the purge removes its listing), and its first-message time is its oldest message left;
* a recall point of a message or group past the cutoff, or of a segment left out or rewritten, is left out
  (``ExpireIndex``); a rewritten observation group is indexed again as the purge asks (``IndexForRecall``): its
  cut text, in the indexer's chunks, under its new id.

A record's cutoff is the one its contexts are rendered at: the deployment's window, or the record's shorter one
(its state's override; for a record exported without a state, the window its store keeps, as recall reads it).

What a cut holds per record: the cutoff, the ids of the segments that go, and the texts of the segments the purge
rewrote (the record's active memory at most); the state's own segments are read by id, the rest stream past.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from om_stream.core.commands import ExpireIndex, ExpireStored, IndexForRecall, SegmentRewrite
from om_stream.core.config import ResolvedConfig
from om_stream.core.engine import decide, record_key, retention_cutoff
from om_stream.core.expiry import held_segments, holds_expired, left_behind_expired
from om_stream.core.export_rows import ExportedSegment, ExportedThread
from om_stream.core.inputs import ExpiryDue
from om_stream.core.recall.indexing import embedding_chunks
from om_stream.core.retention import DAY_MS, SegmentText, cutoff
from om_stream.core.state import RecordState
from om_stream.core.step import EngineLimits
from om_stream.core.tokens import TokenAccountant
from om_stream.ports import ContentStore, RecallPoint

__all__ = ["ExportRetention", "RecordCut", "RecordCuts"]


@dataclass(frozen=True)
class ExportRetention:
    """How an export learns the windows it cuts at: the deployment's configuration (its window), the engine's
    limits and token counting (the purge's), the store the purge reads, and the clock the cutoff moves with."""

    store: ContentStore
    config: ResolvedConfig
    accountant: TokenAccountant
    now_ms: Callable[[], int]
    limits: EngineLimits = field(default_factory=EngineLimits)


@dataclass
class RecordCut:
    """One record's cut: its cutoff (None: it keeps everything) and what the purge at it does to its rows."""

    before: int | None = None
    held: frozenset[str] = frozenset()  # the segments the state held before the purge: cut by it, not left behind
    deletes: set[str] = field(default_factory=set)
    rewrites: dict[str, SegmentRewrite] = field(default_factory=dict)  # by the old id
    metadata: frozenset[str] = frozenset()  # threads whose derived metadata goes
    unindexed: set[str] = field(default_factory=set)  # segments whose recall points go
    reindexed: frozenset[str] = frozenset()  # old ids of rewritten segments the purge indexes again

    def keeps_message(self, created_at: int) -> bool:
        return self.before is None or created_at >= self.before

    def segment(self, segment: ExportedSegment) -> ExportedSegment | None:
        """The segment as the purge leaves it (None: it goes)."""
        if self.before is None:
            return segment
        sid = segment.segment_id
        rewrite = self.rewrites.get(sid)
        if rewrite is not None:
            return replace(segment, segment_id=rewrite.new_id, text=rewrite.text, tokens=rewrite.tokens)
        if sid in self.deletes or (sid not in self.held and left_behind_expired(
                SegmentText(sid, segment.text, segment.boundary_at), self.before)):
            self.unindexed.add(sid)
            return None
        return segment

    def points(self, point: RecallPoint, count: Callable[[str], int]) -> list[RecallPoint]:
        """The recall index's points in the purge's stead: the point, none, or (the first chunk of a group the purge
        rewrote, per thread) the group's points as it is indexed again."""
        if self.before is None:
            return [point]
        if point.observed_at < self.before:
            return []
        if point.kind == "group" and point.source_id in self.reindexed:
            if point.chunk != 0:
                return []
            rewrite = self.rewrites[point.source_id]
            return [replace(point, source_id=rewrite.new_id, chunk=index, text=chunk)
                    for index, chunk in enumerate(embedding_chunks(rewrite.text, count))]
        if point.kind == "group" and (point.source_id in self.unindexed or point.source_id in self.rewrites):
            return []
        return [point]


class RecordCuts:
    """The cuts of one export's records, made as the exporter meets each record (its state first)."""

    def __init__(self, retention: ExportRetention, resource_id: str, scope: str) -> None:
        self.retention = retention
        self.resource_id = resource_id
        self.scope = scope
        self.now = retention.now_ms()  # the export's one time: every record is cut at its cutoff then
        self._cuts: dict[str, RecordCut] = {}
        self._stated: set[str] = set()  # records cut by their state's purge

    async def cut_state(self, state: RecordState) -> RecordState:
        """The state as the record's purge at its cutoff leaves it (the state itself when nothing in it expired);
        the record's cut is kept for its rows."""
        retention = self.retention
        self._stated.add(state.key)
        before = retention_cutoff(retention.config, state, self.now)
        if before is None:
            self._cuts[state.key] = RecordCut()
            return state
        held = held_segments(state)
        cut = self._cuts[state.key] = RecordCut(before, frozenset(held))
        if not holds_expired(state, before):
            return state  # its stored rows may still hold what expired (observed messages, older segments)
        texts = await retention.store.get_segment_texts(sorted(held))
        segments = tuple(SegmentText(sid, text, _newest(state, sid)) for sid, text in texts.items())
        next_at = await retention.store.next_message_at(state.resource_id, tuple(state.threads), before)
        decision = decide(state, ExpiryDue(before, segments, next_at), self.now, retention.config,
                          retention.accountant, retention.limits)
        for command in decision.commands:
            if isinstance(command, ExpireStored):
                cut.deletes.update(command.deletes)
                cut.rewrites = {r.old_id: r for r in command.rewrites}
                cut.metadata = frozenset(command.threads)
            elif isinstance(command, ExpireIndex):
                cut.unindexed.update(command.source_ids)
        renamed = {r.new_id: r.old_id for r in cut.rewrites.values()}
        cut.reindexed = frozenset(renamed[c.segment_id] for c in decision.commands
                                  if isinstance(c, IndexForRecall) and c.segment_id in renamed)
        return decision.state

    async def of(self, key: str) -> RecordCut:
        """A record's cut; one exported without a state is cut at its window as recall reads it (the deployment's,
        or the shorter one its store keeps)."""
        cut = self._cuts.get(key)
        if cut is None:
            window = self.retention.config.retention_ms
            days = await self.retention.store.retention_of(key)
            if days is not None and (window is None or days * DAY_MS < window):
                window = days * DAY_MS
            cut = self._cuts[key] = RecordCut(cutoff(self.now, window))
        return cut

    async def thread(self, thread: ExportedThread) -> ExportedThread | None:
        """A thread's listing and metadata as the purge leaves them (None: no message of it is left)."""
        key = record_key(self.scope, thread.thread_id, self.resource_id)
        cut = await self.of(key)
        before = cut.before
        if before is None:
            return thread
        if thread.updated_at is not None and thread.updated_at < before:
            return None
        if thread.created_at is not None and thread.created_at < before:
            oldest = await self.retention.store.next_message_at(self.resource_id, (thread.thread_id,), before)
            thread = replace(thread, created_at=oldest)
            if key not in self._stated:
                # without a state nothing dates the metadata: it may have been written from the message that went
                cut.metadata = cut.metadata | {thread.thread_id}
        if thread.thread_id in cut.metadata:
            thread = ExportedThread(thread.thread_id, thread.created_at, thread.updated_at)
        return thread


def _newest(state: RecordState, segment_id: str) -> int:
    """The time of the newest message a segment the state holds covers (what ``SegmentText`` carries)."""
    for segment in state.log:
        if segment.id == segment_id:
            return segment.boundary_at
    for chunk in state.buffered:
        if chunk.id == segment_id:
            return chunk.last_message_at
    reflection = state.buffered_reflection
    covered = state.log[:reflection.covers] if reflection is not None else []
    return covered[-1].boundary_at if covered else 0
