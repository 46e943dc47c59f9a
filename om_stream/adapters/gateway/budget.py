"""Per-resource (tenant) token budgets over a sliding time window.

A background observer with no budget burned $580 for one user of another OM implementation; here every call is
checked before it is made: if the tenant's tokens in the window plus this call's input would pass its budget, the
call is refused with ``BudgetExceeded`` (``kind="budget_exceeded"``) and the cycle fails without reaching a model.
The estimate is reserved at once (so concurrent calls cannot all slip under the limit) and replaced by what the
call really used (input + output tokens, as the provider reported) when it returns; a failed call frees it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from om_stream.errors import BudgetExceeded

__all__ = ["Reservation", "TokenBudget"]


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
        return reservation

    @staticmethod
    def settle(reservation: Reservation | None, tokens: int) -> None:
        """Charge what the call really used instead of the estimate (0 for a call that failed)."""
        if reservation is not None:
            reservation.tokens = max(0, tokens)
