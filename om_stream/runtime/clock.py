"""The clocks of the runtime (the ``Clock`` port): the real one, and one the caller moves (replays, tests)."""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["ManualClock", "SystemClock"]


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


@dataclass
class ManualClock:
    """A clock the caller moves (replays run on the conversation's own time)."""

    now: int = 0

    def now_ms(self) -> int:
        return self.now
