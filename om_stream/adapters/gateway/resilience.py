"""Behaviour under failure, per model: which errors are worth another try, how long to wait, when to stop calling a
model for a while (circuit breaker) and how many calls may run at once (bulkhead).

The reference retries 8 times over ~4 minutes with no breaker, which blocked users' turns for 247 s; here retries
are few, bounded by the gateway's deadline, and a failing model is skipped quickly once its circuit opens.
Time comes from an injected monotonic clock, so every rule is testable without sleeping.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from om_stream.errors import ModelError

__all__ = ["Bulkhead", "CircuitBreaker", "RetryPolicy", "is_transient"]

_TRANSIENT_KINDS = frozenset({"timeout", "rate_limited", "server_error", "connection", "deadline"})
_TRANSIENT_STATUS = frozenset({408, 425, 429})


def is_transient(error: ModelError) -> bool:
    """Worth another try: timeouts, rate limits, 5xx, connection failures. Client errors (auth, validation,
    unknown model) are not: they fail the same way every time. An error litellm could not classify (no HTTP
    status) is treated as a transport problem."""
    status = error.status_code
    if status is not None:
        return status in _TRANSIENT_STATUS or status >= 500
    return error.kind in _TRANSIENT_KINDS or error.kind not in ("client_error", "input_too_large", "no_model")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; a provider's Retry-After is honoured up to ``retry_after_max_s``."""

    initial_s: float = 1.0
    max_s: float = 30.0
    jitter: float = 0.2  # ± this fraction of the delay
    retry_after_max_s: float = 30.0

    def delay(self, retry: int, retry_after: float | None, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first retry)."""
        if retry_after is not None and retry_after > 0:
            return min(retry_after, self.retry_after_max_s)
        backoff = min(self.max_s, self.initial_s * 2.0 ** retry)
        return max(0.0, backoff * (1 + self.jitter * (2 * rand() - 1)))


@dataclass
class CircuitBreaker:
    """Per model: opens after ``failures`` consecutive transient failures; after ``cooldown_s`` one probe call is
    let through (half-open); its success closes the circuit, its failure opens it again."""

    failures: int = 5
    cooldown_s: float = 30.0
    state: Literal["closed", "open", "half_open"] = "closed"
    consecutive: int = 0
    opened_at: float = 0.0
    probing: bool = False
    times_opened: int = 0

    def allow(self, now: float) -> bool:
        if self.state == "closed":
            return True
        if self.state == "open":
            if now - self.opened_at < self.cooldown_s:
                return False
            self.state = "half_open"
            self.probing = False
        if self.probing:
            return False
        self.probing = True
        return True

    def success(self) -> None:
        self.state = "closed"
        self.consecutive = 0
        self.probing = False

    def failure(self, now: float) -> None:
        self.consecutive += 1
        if self.state == "half_open" or self.consecutive >= self.failures:
            if self.state != "open":
                self.times_opened += 1
            self.state = "open"
            self.opened_at = now
            self.probing = False

    def release(self) -> None:
        """The call ended without telling anything about the model's health (e.g. the caller gave up)."""
        self.probing = False


class Bulkhead:
    """At most ``limit`` calls in flight per model; waiting for a slot counts against the caller's deadline."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._semaphore = asyncio.Semaphore(limit)

    @property
    def in_flight(self) -> int:
        return self.limit - self._semaphore._value

    async def acquire(self, timeout: float) -> None:
        await asyncio.wait_for(self._semaphore.acquire(), timeout)

    def release(self) -> None:
        self._semaphore.release()
