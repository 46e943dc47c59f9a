"""The model calls this process has asked for itself, so that a take-over asks again only for the others.

A take-over (``handover.TakeOver``) asks again for each model call in flight of the records it holds. The previous
owner of a record may have written the cycle to the table and died before its request went out; without that second
request the cycle would wait for its deadline (``worker.cycle_timeout_s``). That risk only comes from another
process. When this process sent a cycle's request itself and the broker acknowledged it, the request is in the
requests topic, and its answer goes to the record's home partition, read by whoever holds it then. Asking again would
cost one more request and one more lookup in the results store for every cycle held, at every rebalance. The repeat is
never paid, since it has the same request key, but it is still waste.

So the outlet notes each request the broker acknowledged here, by cycle and attempt (:meth:`AskedCycles.asked`), and
a take-over resends only the cycles whose current attempt is not among them (:func:`to_resend`). The memory is bounded:
the newest ``ASKED_KEPT`` calls, and at each take-over only the cycles still held. A call forgotten early is asked
again, as every call was before.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from om_stream.core.state import Cycle

__all__ = ["ASKED_KEPT", "AskedCycles", "to_resend"]

ASKED_KEPT = 65_536  # (cycle id, attempt) pairs, ~150 bytes each: more calls than a worker has in flight


class AskedCycles:
    """The model calls (cycle, attempt) whose request this process sent and the broker acknowledged."""

    def __init__(self, kept: int = ASKED_KEPT) -> None:
        self.kept = kept
        self._asked: OrderedDict[tuple[str, int], None] = OrderedDict()

    def asked(self, cycle_id: str, attempt: int) -> None:
        self._asked[(cycle_id, attempt)] = None
        self._asked.move_to_end((cycle_id, attempt))
        while len(self._asked) > self.kept:
            self._asked.popitem(last=False)

    def __contains__(self, cycle: Cycle) -> bool:
        return (cycle.id, cycle.attempt) in self._asked

    def __len__(self) -> int:
        return len(self._asked)

    def keep(self, cycles: Iterable[Cycle]) -> None:
        """Only the calls of ``cycles`` (those in flight of the records held) are remembered."""
        held = {(cycle.id, cycle.attempt) for cycle in cycles}
        for call in [call for call in self._asked if call not in held]:
            del self._asked[call]


def to_resend(cycles: Iterable[Cycle], asked: AskedCycles) -> list[Cycle]:
    """The cycles in flight, of the records a take-over holds, that must be asked again (those not asked here)."""
    return [cycle for cycle in cycles if cycle not in asked]
