"""The arithmetic of OM's thresholds: when to buffer, which chunks to activate, where a cycle may cut.

Small pure functions over token counts, kept verbatim from the documented behaviour (reference §2b.3, §2b.5) so
they can be tested rule by rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from om_stream.core.state import MessageRef

__all__ = [
    "RAMP_FACTOR",
    "ActivationChoice",
    "buffer_interval",
    "minimum_remaining",
    "select_chunks",
    "should_trigger_buffer",
    "sync_cut",
]

RAMP_FACTOR = 1.1  # buffering gets twice as frequent once pending tokens are within 1.1 intervals of the threshold
MAX_OVERSHOOT_OF_FLOOR = 0.95
MIN_REMAINING_CAP = 1000


def buffer_interval(buffer_tokens: int, pending: int, threshold: int) -> int:
    """Tokens between two background buffering cycles; halved near the threshold so chunks are ready in time."""
    if pending >= threshold - RAMP_FACTOR * buffer_tokens:
        return max(1, buffer_tokens // 2)
    return buffer_tokens


def should_trigger_buffer(pending: int, last_boundary: int, buffer_tokens: int, threshold: int) -> bool:
    """A new buffering cycle starts each time pending tokens cross the next multiple of the interval."""
    interval = buffer_interval(buffer_tokens, pending, threshold)
    return pending // interval > last_boundary // interval


def minimum_remaining(retention_floor: int) -> int:
    """Activation always leaves some context: the smaller of 1,000 tokens and the retention floor."""
    return min(MIN_REMAINING_CAP, retention_floor)


@dataclass(frozen=True)
class ActivationChoice:
    count: int  # how many leading chunks to activate
    tokens: int  # message tokens they cover


def select_chunks(chunk_message_tokens: Sequence[int], pending: int, retention_floor: int,
                  block_after: int | None) -> ActivationChoice:
    """How many leading buffered chunks to activate so that about ``retention_floor`` tokens remain.

    ``over`` is the smallest prefix reaching the target, ``under`` the longest prefix below it. The overshoot guard
    refuses ``over`` when it removes much more than asked; at ``block_after`` the larger prefix is preferred. A
    prefix that leaves less than the minimum context is taken only when no other choice exists: once activation is
    due, at least one chunk is always activated (the current turn's user message stays in the context anyway).
    """
    if not chunk_message_tokens:
        return ActivationChoice(0, 0)
    target = max(0, pending - retention_floor)
    max_overshoot = MAX_OVERSHOOT_OF_FLOOR * retention_floor
    min_remaining = minimum_remaining(retention_floor)
    force_max = block_after is not None and pending >= block_after
    over: ActivationChoice | None = None
    under: ActivationChoice | None = None
    total = 0
    for index, tokens in enumerate(chunk_message_tokens, start=1):
        total += tokens
        if total >= target:
            over = ActivationChoice(index, total)
            break
        under = ActivationChoice(index, total)
    if over and force_max and pending - over.tokens >= min_remaining:
        return over
    if over and over.tokens - target <= max_overshoot and pending - over.tokens >= min_remaining:
        return over
    if under and pending - under.tokens >= min_remaining:
        return under
    if over:
        return over
    return ActivationChoice(1, chunk_message_tokens[0])


def sync_cut(messages: Sequence[MessageRef], keep_tokens: int) -> int:
    """How many leading messages a synchronous observation covers.

    It stops at a safe boundary (a tool call is never separated from its result) and leaves at least
    ``keep_tokens`` of the newest messages raw when it can, so the agent keeps its latest exchange verbatim.
    Returns 0 when no safe boundary exists.
    """
    remaining = sum(m.tokens for m in messages)
    best_safe = 0
    best_keeping = 0
    for index, message in enumerate(messages, start=1):
        remaining -= message.tokens
        if message.safe_cut:
            best_safe = index
            if remaining >= keep_tokens:
                best_keeping = index
    return best_keeping or best_safe
