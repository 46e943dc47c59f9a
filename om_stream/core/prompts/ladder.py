"""The Reflector's compression ladder, as pure policy.

A reflection that does not come in under its target is asked for again with firmer compression guidance, one
level up, until the top level. Levels: 0 none (manual ``reflect()``), 1 gentle, 2 aggressive, 3 critical,
4 extreme; automatic reflection starts at 1, or at 2 for gemini-2.5-flash, which needs firmer words; the top is
three levels above the start, at most 4.

Which attempt is kept: the first one under target; otherwise the *smallest* usable one. (The reference keeps the
last attempt, which can be larger than an earlier one.) An empty or degenerate attempt is never kept; when every
attempt is unusable there is nothing to keep and the caller reports a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MAX_LEVEL", "Attempt", "choose", "max_level", "next_level", "start_level"]

MAX_LEVEL = 4
_CLIMB = 3


@dataclass(frozen=True)
class Attempt:
    """One reflection attempt: its level, its parsed observations, their token count, and whether the answer was
    usable (``valid=False`` for a degenerate answer; a blank ``text`` is unusable too)."""

    level: int
    text: str
    tokens: int
    valid: bool = True

    @property
    def usable(self) -> bool:
        return self.valid and bool(self.text.strip())


def start_level(model_name: str, manual: bool) -> int:
    """0 for a manual ``reflect()``; otherwise 2 when the Reflector is a gemini-2.5-flash model, else 1."""
    if manual:
        return 0
    return 2 if "gemini-2.5-flash" in model_name.lower() else 1


def max_level(start: int) -> int:
    return min(MAX_LEVEL, start + _CLIMB)


def next_level(level: int, top: int = MAX_LEVEL, *, attempt_tokens: int | None = None,
               target_tokens: int | None = None) -> int | None:
    """The level to try after an attempt at ``level``, or None to stop.

    Stops when the attempt came in under target (both given and ``attempt_tokens < target_tokens``) or when
    ``level`` is already at ``top`` (see :func:`max_level`). An unusable attempt should be passed with
    ``attempt_tokens=None`` (or not at all): it never counts as under target.
    """
    if attempt_tokens is not None and target_tokens is not None and attempt_tokens < target_tokens:
        return None
    return level + 1 if level < min(top, MAX_LEVEL) else None


def choose(attempts: Sequence[Attempt], target_tokens: int | None = None) -> Attempt | None:
    """The first usable attempt under ``target_tokens``, else the smallest usable attempt (the earliest among
    equals), else None."""
    usable = [a for a in attempts if a.usable]
    if target_tokens is not None:
        for attempt in usable:
            if attempt.tokens < target_tokens:
                return attempt
    return min(usable, key=lambda a: a.tokens, default=None)
