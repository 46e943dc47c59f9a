"""What a failed event, an extraction failure or a log line says about an error: its message and its cause chain,
within the 2,000 characters the reference's markers allow, a cut one ending with "..."."""

from __future__ import annotations

__all__ = ["MAX_ERROR_CHARS", "cut_error", "error_text"]

MAX_ERROR_CHARS = 2_000  # the longest error text a failed event carries (as the reference's markers)
_CAUSE_DEPTH = 5


def cut_error(text: str) -> str:
    """``text`` within ``MAX_ERROR_CHARS``; a cut one ends with "..." so a reader sees it was cut (the
    reference's rule: it cuts where the limit falls)."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    end = MAX_ERROR_CHARS - 3
    if "\ud800" <= text[end - 1] <= "\udbff":  # never half a surrogate pair
        end -= 1
    return f"{text[:end]}..."


def error_text(exc: BaseException) -> str:
    """What a failed event says about ``exc``: its type and message, then each cause in its chain (explicit
    ``raise ... from`` or implicit, at most five deep) whose message says something not said already, with the HTTP
    status a cause carries, joined by ": " and cut by :func:`cut_error`. A translated error usually repeats its
    cause's message: the cause is then not repeated."""
    details = [f"{type(exc).__name__}: {exc}".strip() if str(exc).strip() else type(exc).__name__]
    seen = {id(exc)}
    cause = _cause(exc)
    depth = 0
    while cause is not None and id(cause) not in seen and depth < _CAUSE_DEPTH:
        seen.add(id(cause))
        depth += 1
        said = ": ".join(details)
        status = getattr(cause, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool) and f"HTTP {status}" not in said:
            details.append(f"HTTP {status}")
        message = str(cause).strip()
        if message and message not in said:
            details.append(message)
        cause = _cause(cause)
    return cut_error(": ".join(details))


def _cause(exc: BaseException) -> BaseException | None:
    if exc.__cause__ is not None:
        return exc.__cause__
    return None if exc.__suppress_context__ else exc.__context__
