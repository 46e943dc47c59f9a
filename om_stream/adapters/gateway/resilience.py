"""Behaviour under failure, per model: which errors are worth another try, which answers are incomplete, how long
to wait, when to stop calling a model for a while (circuit breaker) and how many calls may run at once (bulkhead).

The reference retries 8 times over ~4 minutes with no breaker, which blocked users' turns for 247 s; here retries
are few, bounded by the gateway's deadline, and a failing model is skipped quickly once its circuit opens.
Time comes from an injected monotonic clock, so every rule is testable without sleeping.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from om_stream.errors import ModelError
from om_stream.ports import ChatResponse

__all__ = ["INCOMPLETE_FINISH_REASONS", "Bulkhead", "CircuitBreaker", "RetryPolicy", "incomplete_reason",
           "is_transient"]

# Statuses after which the same request may succeed: a timeout, a conflict with a concurrent request, "too early",
# a rate limit; and any 5xx of the provider.
_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
# Kinds ``litellm_model.model_error`` and the gateway give to failures of the transport itself.
_TRANSIENT_KINDS = frozenset({"timeout", "rate_limited", "server_error", "connection", "deadline"})
# Kinds that fail the same way every time, whatever status came with them: a refused credential, an answer
# litellm itself validated and refused (its JSON-schema check raises a 500 of its own).
_PERMANENT_KINDS = frozenset({"auth", "response_validation"})
# How a failed transport reads in an error that carries no status (the reference's list, plus Python's words).
_TRANSPORT_FAILURE = re.compile(
    r"econnreset|econnrefused|enotfound|eai_again|etimedout|socket hang up|fetch failed|network error|"
    r"timed out|request timeout|connection (?:reset|closed|refused|aborted|error)|server disconnected|"
    r"remote end closed|broken pipe|temporary failure in name resolution|\bterminated\b",
    re.IGNORECASE)

# Finish reasons of an answer the model did not complete: a content filter stopped it, or the provider ended it
# for a reason of its own ("other", "unknown", "error"). Parsing such an answer would commit a fragment as if it
# were the Observer's work. "length" is not here: a truncated answer is still the model's, and a runaway one is
# caught as degenerate by the cycle.
INCOMPLETE_FINISH_REASONS = frozenset({"content_filter", "other", "unknown", "error"})


def is_transient(error: ModelError) -> bool:
    """Worth another try: timeouts, connection failures, 408/409/425/429 and the provider's 5xx. Anything else
    (a refused key, a request or an answer that fails validation, an unknown model, an error nobody could place)
    fails the same way every time and is not retried. An error without a status is transient only when its kind
    or its words say the transport failed."""
    if error.kind in _PERMANENT_KINDS:
        return False
    status = error.status_code
    if status is not None:
        return status in _TRANSIENT_STATUS or 500 <= status <= 599
    return error.kind in _TRANSIENT_KINDS or _TRANSPORT_FAILURE.search(str(error)) is not None


def incomplete_reason(response: ChatResponse) -> str | None:
    """The finish reason of an answer the model did not complete, or ``None`` for a complete one."""
    reason = (response.finish_reason or "").strip().lower().replace("-", "_")
    return reason if reason in INCOMPLETE_FINISH_REASONS else None


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
