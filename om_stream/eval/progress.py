"""A progress bar for a terminal (the CLI gives it stderr), without a dependency.

On a terminal the bar is redrawn in place at every change; elsewhere (a log file, CI) a line is printed every
twentieth of the way and at the end, so a log stays short. Time comes from the ``clock`` given (seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 24


class Progress:
    def __init__(self, label: str, total: int, *, stream: TextIO, done: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = total
        self.done = done  # finished before this run started (a resumed run) or during it
        self.failed = 0
        self.note = ""
        self.stream = stream
        self.clock = clock
        self._started = clock()
        self._resumed = done
        self._live = self.stream.isatty()
        self._printed_step = -1

    def advance(self, *, failed: bool = False, note: str = "") -> None:
        """One more question finished (or failed: it will be asked again by the next run)."""
        self.done += 1
        self.failed += failed
        if note:
            self.note = note
        self._show()

    def start(self) -> None:
        self._show()

    def close(self) -> None:
        if self._live:
            self.stream.write("\n")
        elif self._printed_step < 20:
            self._printed_step = 20
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def line(self) -> str:
        share = self.done / self.total if self.total else 1.0
        filled = round(share * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        parts = [f"{self.label} [{bar}] {self.done}/{self.total} {share * 100:3.0f}%"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.note:
            parts.append(self.note)
        eta = self._eta()
        if eta is not None:
            parts.append(f"eta {eta}")
        return "  ".join(parts)

    def _eta(self) -> str | None:
        finished = self.done - self._resumed
        left = self.total - self.done
        if finished <= 0 or left <= 0:
            return None
        seconds = (self.clock() - self._started) / finished * left
        return f"{seconds / 60:.0f}m" if seconds >= 90 else f"{seconds:.0f}s"

    def _show(self) -> None:
        if self._live:
            self.stream.write("\r" + self.line() + "\x1b[K")
            self.stream.flush()
            return
        step = 20 * self.done // self.total if self.total else 20
        if step > self._printed_step:
            self._printed_step = step
            self.stream.write(self.line() + "\n")
            self.stream.flush()
