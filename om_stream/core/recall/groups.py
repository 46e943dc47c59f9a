"""Observation groups: an observation's message ranges, and how a reflection keeps them precise.

The reference wraps each observation cycle's output in a group whose ``range`` points at the messages it came from,
then, after a reflection, replaces every group with one spanning the first start to the last end: one reflection
and recall can only say "somewhere in these thousand messages". om-stream keeps, for a reflection, the list of the
ranges of every group it replaced (recursively, since a reflection can replace an earlier reflection), so a
pointer never widens.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from om_stream.core.recall.records import MessageRange, ObservationGroup

__all__ = ["format_ranges", "group_heading", "observation_ranges", "reflection_ranges"]


def observation_ranges(covered: Sequence[tuple[str, str]]) -> tuple[MessageRange, ...]:
    """Ranges of an observation from the ``(message_id, thread_id)`` pairs it covered, in observation order: one
    range per thread (a resource-scope observation covers several), in the order threads first appear."""
    spans: dict[str, list[str]] = {}
    for message_id, thread_id in covered:
        span = spans.setdefault(thread_id, [message_id, message_id])
        span[1] = message_id
    return tuple(MessageRange(thread_id, first, last) for thread_id, (first, last) in spans.items())


def reflection_ranges(replaced: Iterable[Sequence[MessageRange]]) -> tuple[MessageRange, ...]:
    """A reflection's ranges: those of the groups it replaced, in log order, repeated ranges listed once."""
    seen: set[MessageRange] = set()
    ranges: list[MessageRange] = []
    for group_ranges in replaced:
        for item in group_ranges:
            if item not in seen:
                seen.add(item)
                ranges.append(item)
    return tuple(ranges)


def format_ranges(ranges: Sequence[MessageRange]) -> str:
    return ",".join(str(r) for r in ranges)


def group_heading(group: ObservationGroup) -> str:
    """How a group is introduced where an agent reads observations in retrieval mode."""
    return f"## Group `{group.group_id}`\n_range: {format_ranges(group.ranges)}_"
