"""Per-resource (tenant) token budgets over a sliding time window.

A background observer with no budget burned $580 for one user of another OM implementation; here every call is
checked before it is made: if the tenant's tokens in the window plus this call's input would pass its budget, the
call is refused with ``BudgetExceeded`` (``kind="budget_exceeded"``) and the cycle fails without reaching a model.
The estimate is reserved at once (so concurrent calls cannot all slip under the limit) and replaced by what the
call really used (input + output tokens, as the provider reported) when it returns; a failed call frees it.

The reservations of a resource are kept for one window; a resource that makes no call for a window is forgotten
(every ``SWEEP_EVERY`` reservations the resources with nothing left in the window go), so the map follows the
tenants active now, not every tenant ever seen.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from om_stream.errors import BudgetExceeded

__all__ = ["SWEEP_EVERY", "Reservation", "TokenBudget"]

SWEEP_EVERY = 1024


@dataclass
class Reservation:
    resource: str
    at: float
    tokens: int


@dataclass
class TokenBudget:
    """``limit`` tokens per ``window_s`` seconds per resource; ``overrides`` gives some resources their own limit
    (0 refuses every call). ``limit=None`` leaves resources without an override unbounded."""

    limit: int | None
    window_s: float = 3600.0
    overrides: Mapping[str, int] = field(default_factory=dict)
    refusals: int = 0
    _spent: dict[str, deque[Reservation]] = field(default_factory=dict)
    _until_sweep: int = SWEEP_EVERY

    @property
    def resources_held(self) -> int:
        """Resources whose reservations are kept now (for tests and reports)."""
        return len(self._spent)

    @property
    def enabled(self) -> bool:
        return self.limit is not None or bool(self.overrides)

    def limit_for(self, resource: str) -> int | None:
        return self.overrides.get(resource, self.limit)

    def used(self, resource: str, now: float) -> int:
        entries = self._spent.get(resource)
        if not entries:
            return 0
        while entries and entries[0].at <= now - self.window_s:
            entries.popleft()
        return sum(entry.tokens for entry in entries)

    def reserve(self, resource: str, estimate: int, now: float) -> Reservation | None:
        """Reserve ``estimate`` tokens, or raise ``BudgetExceeded``; ``None`` when the resource is unbounded."""
        limit = self.limit_for(resource)
        if limit is None:
            return None
        used = self.used(resource, now)
        if used + estimate > limit:
            self.refusals += 1
            raise BudgetExceeded(f"token budget of resource {resource!r} exhausted: {used} tokens used in the last "
                                 f"{self.window_s:g} s, this call needs about {estimate}, the limit is {limit}",
                                 kind="budget_exceeded")
        reservation = Reservation(resource, now, estimate)
        self._spent.setdefault(resource, deque()).append(reservation)
        self._until_sweep -= 1
        if self._until_sweep <= 0:
            self._sweep(now)
        return reservation

    def _sweep(self, now: float) -> None:
        """Forget the resources with no reservation left in the window."""
        self._until_sweep = SWEEP_EVERY
        for resource in list(self._spent):
            entries = self._spent[resource]
            if not entries or entries[-1].at <= now - self.window_s:
                del self._spent[resource]

    @staticmethod
    def settle(reservation: Reservation | None, tokens: int) -> None:
        """Charge what the call really used instead of the estimate (0 for a call that failed)."""
        if reservation is not None:
            reservation.tokens = max(0, tokens)
