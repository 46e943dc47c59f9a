"""Temporal gap markers (``temporalMarkers``): a reminder before a user message that comes ≥ 10 minutes after the
previous message of the thread, so the agent and the Observer anchor what follows in time."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["GAP_THRESHOLD_MS", "gap_text", "marker_id", "marker_text"]

GAP_THRESHOLD_MS = 10 * 60_000
_UNITS = (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000))


def gap_text(gap_ms: int) -> str:
    """Two units at most ("2 hours 5 minutes", "3 days 4 hours"); minutes only under an hour."""
    parts: list[str] = []
    remaining = gap_ms
    for name, size in _UNITS:
        amount = remaining // size
        if amount or (parts and len(parts) < 2):
            if amount:
                parts.append(f"{amount} {name}{'s' if amount != 1 else ''}")
            remaining -= amount * size
        if len(parts) == 2:
            break
    return " ".join(parts) if parts else "a moment"


def marker_text(gap_ms: int, at_ms: int) -> str:
    when = datetime.fromtimestamp(at_ms / 1000, tz=UTC).strftime("%A %Y-%m-%d %H:%M UTC")
    return f"<system-reminder>{gap_text(gap_ms)} later — {when}</system-reminder>"


def marker_id(message_id: str) -> str:
    return f"__temporal_gap_{message_id}"
