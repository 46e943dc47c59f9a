"""Recognising a degenerate model answer: a model stuck in a loop, repeating itself until its output limit.

Such an answer must never reach the observation log. Three signs, checked only on texts of 2,000 characters or
more (a short answer cannot loop long enough to matter):

* sampled 200-character windows repeat: of ~50 windows taken at a stride of len/50, more than 40 % are exact
  copies of an earlier window (and there are at least 6 windows);
* one line is longer than 50,000 characters;
* among lines with at least 24 non-space characters (at least 20 such lines), more than half are exact copies of
  an earlier line.

An ordinary long observation log repeats its structure (``Date:`` headers, priority marks, times) but not whole
lines or 200-character stretches, so it is not flagged.
"""

from __future__ import annotations

__all__ = ["MIN_LENGTH", "is_degenerate"]

MIN_LENGTH = 2_000
_WINDOW = 200
_SAMPLES = 50
_MIN_WINDOWS = 6
_WINDOW_REPEAT_RATIO = 0.4
_MAX_LINE = 50_000
_MIN_LINE_CONTENT = 24
_MIN_CONTENT_LINES = 20
_LINE_REPEAT_RATIO = 0.5


def _windows_repeat(text: str) -> bool:
    stride = max(1, len(text) // _SAMPLES)
    windows = [text[start:start + _WINDOW] for start in range(0, len(text) - _WINDOW + 1, stride)]
    if len(windows) < _MIN_WINDOWS:
        return False
    seen: set[str] = set()
    repeats = 0
    for window in windows:
        if window in seen:
            repeats += 1
        else:
            seen.add(window)
    return repeats / len(windows) > _WINDOW_REPEAT_RATIO


def _lines_repeat(lines: list[str]) -> bool:
    content = [line.strip() for line in lines if len("".join(line.split())) >= _MIN_LINE_CONTENT]
    if len(content) < _MIN_CONTENT_LINES:
        return False
    seen: set[str] = set()
    repeats = 0
    for line in content:
        if line in seen:
            repeats += 1
        else:
            seen.add(line)
    return repeats / len(content) > _LINE_REPEAT_RATIO


def is_degenerate(text: str) -> bool:
    """True when ``text`` looks like a model repeating itself rather than an answer."""
    if len(text) < MIN_LENGTH:
        return False
    lines = text.splitlines()
    if any(len(line) > _MAX_LINE for line in lines):
        return True
    return _windows_repeat(text) or _lines_repeat(lines)
