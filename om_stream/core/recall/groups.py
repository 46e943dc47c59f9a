"""Observation groups: an observation's message ranges, and how a reflection keeps them precise.

The reference wraps each observation cycle's output in a group whose ``range`` points at the messages it came from,
then, after a reflection, replaces every group with one spanning the first start to the last end: one reflection
and recall can only say "somewhere in these thousand messages". om-stream keeps, for a reflection, the list of the
ranges of every group it replaced (recursively, since a reflection can replace an earlier reflection), so a
pointer never widens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from om_stream.core.recall.records import MessageRange, ObservationGroup

__all__ = ["format_ranges", "group_heading", "observation_ranges", "ranges_from_json", "ranges_to_json",
           "reflection_ranges"]


def observation_ranges(covered: Sequence[tuple[str, str, int]]) -> tuple[MessageRange, ...]:
    """Ranges of an observation from the ``(message_id, thread_id, seq)`` of the messages it covered, in
    observation order: one range per thread (a resource-scope observation covers several), in the order threads
    first appear, with the sequence numbers of their ends."""
    spans: dict[str, MessageRange] = {}
    for message_id, thread_id, seq in covered:
        first = spans.get(thread_id)
        spans[thread_id] = (MessageRange(thread_id, message_id, message_id, seq, seq) if first is None else
                            MessageRange(thread_id, first.first_message_id, message_id, first.first_seq, seq))
    return tuple(spans.values())


def reflection_ranges(replaced: Iterable[Sequence[MessageRange]]) -> tuple[MessageRange, ...]:
    """A reflection's ranges: those of the groups it replaced, in log order, repeated ranges listed once, and a
    range that directly follows its thread's previous one joined to it.

    Without the join, a reflection of a reflection carries every range ever observed: the list (stored, read back
    on each reflection, and shown in every group heading of retrieval mode) would grow with the conversation. A
    join never covers a message the replaced groups did not: only a run starting at the next sequence number is
    joined, so a gap (messages another group holds, or none did) stays visible as two ranges."""
    seen: set[MessageRange] = set()
    ranges: list[MessageRange] = []
    of_thread: dict[str, list[int]] = {}  # thread -> indexes in ``ranges`` of its ranges, oldest first
    for group_ranges in replaced:
        for item in group_ranges:
            indexes = of_thread.setdefault(item.thread_id, [])
            if item in seen or any(ranges[i].contains(item) for i in indexes):
                continue  # listed already, or inside a run joined already
            seen.add(item)
            if indexes and item.follows(ranges[indexes[-1]]):
                earlier = ranges[indexes[-1]]
                ranges[indexes[-1]] = MessageRange(item.thread_id, earlier.first_message_id, item.last_message_id,
                                                   earlier.first_seq, item.last_seq)
                continue
            indexes.append(len(ranges))
            ranges.append(item)
    return tuple(ranges)


def ranges_to_json(ranges: Sequence[MessageRange]) -> str:
    """How stores keep a group's ranges: ``[thread, first, last, first_seq, last_seq]`` each (the last two when
    known)."""
    return json.dumps([[r.thread_id, r.first_message_id, r.last_message_id]
                       + ([r.first_seq, r.last_seq] if r.first_seq is not None and r.last_seq is not None else [])
                       for r in ranges])


def ranges_from_json(text: str | None) -> tuple[MessageRange, ...]:
    """Ranges as ``ranges_to_json`` wrote them; rows written before sequence numbers were kept have three items."""
    return tuple(MessageRange(*item) for item in json.loads(text)) if text else ()


def format_ranges(ranges: Sequence[MessageRange]) -> str:
    return ",".join(str(r) for r in ranges)


def group_heading(group: ObservationGroup) -> str:
    """How a group is introduced where an agent reads observations in retrieval mode."""
    return f"## Group `{group.group_id}`\n_range: {format_ranges(group.ranges)}_"
