"""Erasure as values: what an erase asks for, what it removed, the fence that keeps it erased, and the progress of
an erase that spans partitions. Pure: the runtime (``runtime/erasure.py``) performs the I/O.

Vocabulary:
* **subject**: what is erased, a thread (with its resource) or a resource (every thread of it).
* **part**: the erase's work on one input partition. A thread, or a resource in resource scope, lives on one
  partition: one part. A resource in thread scope has threads on every partition: one part per partition, each
  run by the partition's owner, and one of them (the partition of the resource's key) coordinates.
* **fence**: what a part leaves behind so that the subject's inputs published *before* the erase are never
  applied afterwards: the end offset of ``om.messages`` on the part's partition when the part was handled (a
  message below it was on the log before the erase: it was either handled already, and is swept, or is still
  lagging, and is dropped), and the epoch of the erased incarnation (a record made again for the subject starts
  after it, so none of its ids, cycle ids included, are ever those of the erased one).
* **ledger**: the content store's record of each part (its fence, then its counts) and of each erased record's
  epoch, which the model workers read before and after they write (``erased_through``).

A subject's id is never kept in a fence or in the ledger: both hold :func:`subject_digest` values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

__all__ = [
    "COUNTED",
    "EraseIndexDone",
    "ErasePart",
    "ErasePartDone",
    "EraseRequested",
    "ErasureCounts",
    "ErasureInput",
    "ErasureSaga",
    "ErasureScope",
    "Fence",
    "PartRecord",
    "StrayWrites",
    "record_digest",
    "subject_digest",
]

ErasureScope = Literal["thread", "resource"]


def subject_digest(kind: str, subject: str) -> str:
    """A one-way digest of a subject id: what fences and the ledger keep instead of the id itself."""
    return hashlib.blake2b(f"{kind}\x1f{subject}".encode(), digest_size=16, person=b"om-erase").hexdigest()


def record_digest(record_key: str) -> str:
    """The ledger's key for an erased record (model workers look their request's record up by it)."""
    return subject_digest("record", record_key)


@dataclass(frozen=True)
class ErasureCounts:
    """What an erase removed, per store. ``threads``: thread records (title, hints, extracted values, working
    memory, the resource's thread listing); ``contexts``: tombstones published on the context topic."""

    messages: int = 0
    observations: int = 0  # observation chunks, sync observations and reflections (the log's segments)
    generations: int = 0
    threads: int = 0
    cycle_results: int = 0  # cached model outputs
    recall_points: int = 0
    state_records: int = 0
    contexts: int = 0

    def __add__(self, other: ErasureCounts) -> ErasureCounts:
        return ErasureCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErasureCounts:
        return cls(**{f.name: int(data.get(f.name, 0)) for f in fields(cls)})


COUNTED = tuple(f.name for f in fields(ErasureCounts))


@dataclass(frozen=True)
class Fence:
    """A subject's inputs below ``offsets`` (partition of ``om.messages`` -> its end offset when the erase was
    handled) are the erased incarnation's: they are dropped. ``epoch_through``: a record made again for the
    subject starts at the next epoch. Kept until ``expires_at`` (ms): by then the input topics' retention has
    removed every record below the fence."""

    erase_id: str
    offsets: tuple[tuple[int, int], ...]
    epoch_through: int
    created_at: int
    expires_at: int

    def covers(self, partition: int, offset: int) -> bool:
        """An input at ``offset`` of ``om.messages`` partition ``partition`` was published before the erase."""
        return any(p == partition and offset < end for p, end in self.offsets)

    def expired(self, now_ms: int) -> bool:
        return now_ms >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        return {"erase_id": self.erase_id, "offsets": [list(o) for o in self.offsets],
                "epoch_through": self.epoch_through, "created_at": self.created_at, "expires_at": self.expires_at}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fence:
        return cls(str(data["erase_id"]), tuple((int(p), int(o)) for p, o in data.get("offsets", ())),
                   int(data.get("epoch_through", 0)), int(data["created_at"]), int(data["expires_at"]))


@dataclass(frozen=True)
class StrayWrites:
    """What one batch wrote to the content store for one record, when the batch may not commit (its member lost
    the group meanwhile): what is removed again if an erase of the record's incarnation (``epoch``, the one the
    batch decided on) was handled elsewhere in the meantime. Segment ids are unique per cycle, and a later
    incarnation's cycles have other ids, so removing them by id never touches what came after the erase."""

    record_key: str
    record_id: str  # ``scope:key``: what the process's caches know the record's segments by
    resource_id: str
    epoch: int
    message_ids: tuple[str, ...] = ()
    segment_ids: tuple[str, ...] = ()
    generations: tuple[int, ...] = ()
    thread_ids: tuple[str, ...] = ()  # threads whose metadata the batch wrote


@dataclass(frozen=True)
class PartRecord:
    """The ledger's row of one part: its fence (written before anything is removed, so a replay of the part
    reuses it) and, once the sweep is done, what it removed (a replay then removes nothing more and reports the
    same counts)."""

    erase_id: str
    part: int
    offsets: tuple[tuple[int, int], ...]
    counts: ErasureCounts | None = None
    found: bool = False
    completed_at: int | None = None  # the completion row (part ``-1``): when the receipt was made (ms)


# -- the inputs of an erase ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EraseRequested:
    """An erase command (``om.commands``, HTTP ``DELETE``, ``Memory.erase``). ``erase_id`` is the command's id;
    ``requested_at`` when it was asked for (ms)."""

    erase_id: str
    scope: ErasureScope
    resource_id: str | None
    thread_id: str | None
    requested_at: int


@dataclass(frozen=True)
class ErasePart:
    """A resource erase's work on one partition (sent by the coordinator to each partition's owner)."""

    erase_id: str
    resource_id: str
    coordinator: int
    parts: int
    requested_at: int


@dataclass(frozen=True)
class ErasePartDone:
    """A part is done: what it removed, and the records it erased (their digests and epochs). Sent to the
    coordinator's partition."""

    erase_id: str
    part: int
    counts: dict[str, int] = field(default_factory=dict)
    found: bool = False
    verified: bool = True  # the store held nothing of the part's threads once they were swept


@dataclass(frozen=True)
class EraseIndexDone:
    """The recall index holds nothing more of the subject: ``removed`` points were deleted, ``remaining`` were
    found after the delete (0 when verified). Sent by a model worker to the coordinator's partition."""

    erase_id: str
    removed: int = 0
    remaining: int = 0


ErasureInput = EraseRequested | ErasePart | ErasePartDone | EraseIndexDone


# -- a coordinator's progress ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErasureSaga:
    """What the coordinator of an erase knows while its parts and the recall index finish. It holds the subject's
    ids (the receipt names them) only until the receipt is published."""

    erase_id: str
    scope: ErasureScope
    resource_id: str | None
    thread_id: str | None
    requested_at: int
    parts: int
    done: tuple[int, ...] = ()
    counts: ErasureCounts = ErasureCounts()
    found: bool = False
    verified: bool = True  # every part, and the recall index, read back empty
    index_pending: bool = False  # the recall index sweep was asked for and has not answered

    def part_done(self, part: int, counts: ErasureCounts, found: bool, verified: bool = True) -> ErasureSaga:
        """One part's report (a report seen again changes nothing)."""
        if part in self.done:
            return self
        return replace(self, done=tuple(sorted((*self.done, part))), counts=self.counts + counts,
                       found=self.found or found, verified=self.verified and verified)

    @property
    def parts_done(self) -> bool:
        return len(self.done) >= self.parts

    def index_done(self, removed: int, remaining: int) -> ErasureSaga:
        if not self.index_pending:
            return self
        return replace(self, index_pending=False, counts=self.counts + ErasureCounts(recall_points=removed),
                       verified=self.verified and remaining == 0, found=self.found or removed > 0)

    def to_dict(self) -> dict[str, Any]:
        return {"erase_id": self.erase_id, "scope": self.scope, "resource_id": self.resource_id,
                "thread_id": self.thread_id, "requested_at": self.requested_at, "parts": self.parts,
                "done": list(self.done), "counts": self.counts.as_dict(), "found": self.found,
                "verified": self.verified, "index_pending": self.index_pending}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErasureSaga:
        scope: ErasureScope = "resource" if data.get("scope") == "resource" else "thread"
        return cls(erase_id=str(data["erase_id"]), scope=scope, resource_id=data.get("resource_id"),
                   thread_id=data.get("thread_id"), requested_at=int(data.get("requested_at", 0)),
                   parts=int(data.get("parts", 1)), done=tuple(int(p) for p in data.get("done", ())),
                   counts=ErasureCounts.from_dict(data.get("counts", {})), found=bool(data.get("found")),
                   verified=bool(data.get("verified", True)), index_pending=bool(data.get("index_pending")))
