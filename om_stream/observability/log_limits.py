"""Rate limits on repeated log lines: a broker or store that stays down must not fill the disk with one error.

:class:`RepeatLimiter` lets through at most ``burst`` records of the same message template (same logger, level and
unformatted message) per ``window_s``; the rest are counted, and the next record of that template that passes
says how many were left out. Different messages are never held back by each other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["RepeatLimiter", "limit_repeats"]


class RepeatLimiter(logging.Filter):
    def __init__(self, *, burst: int = 5, window_s: float = 60.0, max_templates: int = 2048,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self.max_templates = max_templates
        self.clock = clock
        self._seen: dict[tuple[str, int, str], list[float | int]] = {}  # template -> [window start, passed, held]

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        entry = self._seen.get(key)
        if entry is None or now - entry[0] >= self.window_s:
            held = int(entry[2]) if entry is not None else 0
            if len(self._seen) >= self.max_templates and entry is None:
                self._seen.clear()  # many distinct templates: none of them is a flood
            self._seen[key] = [now, 1, 0]
            if held:
                record.msg = f"{record.msg} ({held} more like this in the last {self.window_s:.0f}s not logged)"
            return True
        if entry[1] < self.burst:
            entry[1] = int(entry[1]) + 1
            return True
        entry[2] = int(entry[2]) + 1
        return False


def limit_repeats(logger: logging.Logger | None = None, *, burst: int = 5, window_s: float = 60.0) -> RepeatLimiter:
    """Put one :class:`RepeatLimiter` on every handler of ``logger`` (the root logger by default)."""
    target = logger or logging.getLogger()
    limiter = RepeatLimiter(burst=burst, window_s=window_s)
    for handler in target.handlers:
        if not any(isinstance(f, RepeatLimiter) for f in handler.filters):
            handler.addFilter(limiter)
    return limiter
