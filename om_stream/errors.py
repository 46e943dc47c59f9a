"""The one exception tree of om-stream. Driver and library exceptions are translated into it in ``adapters/``.

    OMError
    ├── ConfigError                 invalid OM configuration or settings (names the field)
    │   └── LifecycleBreach         a topic (or the settings) would keep data longer than the lifecycle settings say
    ├── WireDecodeError             a record or HTTP body that does not match the wire contract
    ├── InputRejected               the memory refused a well-formed input (``reason`` says why)
    ├── ModelError                  an Observer / Reflector / extractor / embedder call failed
    │   ├── ModelUnavailable        every configured model failed, or its circuit is open
    │   └── BudgetExceeded          a tenant's token budget refuses the call
    ├── StorageError                the content store failed (``transient``: worth retrying)
    └── RecallError                 a recall request that cannot be answered
"""

from __future__ import annotations

__all__ = [
    "MAX_ERROR_CHARS",
    "BudgetExceeded",
    "ConfigError",
    "InputRejected",
    "LifecycleBreach",
    "ModelError",
    "ModelUnavailable",
    "OMError",
    "RecallError",
    "StorageError",
    "WireDecodeError",
    "cut_error",
    "error_text",
]

MAX_ERROR_CHARS = 2_000  # the longest error text a failed event carries (as the reference's markers)
_CAUSE_DEPTH = 5


class OMError(Exception):
    """Base of every error om-stream raises on purpose."""


class ConfigError(OMError, ValueError):
    """Invalid configuration. ``field`` is the dotted option path (e.g. ``observation.blockAfter``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class LifecycleBreach(ConfigError):
    """Erased data would outlive what the lifecycle settings (``OM_LIFECYCLE_*``) promise: an existing topic's
    configuration breaks them, or the settings break their own ``erased_within_days``. ``problems``: one sentence
    each, naming the topic, the configuration key, the value found and the value promised."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("lifecycle", "; ".join(problems))
        self.problems = problems


class WireDecodeError(OMError, ValueError):
    """A payload that does not match the wire contract. ``reason`` is machine-readable (e.g. ``invalid_json``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class InputRejected(OMError, ValueError):
    """The memory refused an input (for example a message naming another resource than its thread's). ``reason``
    is machine-readable; the input was not recorded."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class ModelError(OMError):
    """A model call failed. ``kind`` classifies it (``rate_limited``, ``timeout``, ``server_error``, ...);
    ``retry_after`` is the provider's Retry-After in seconds when it sent one."""

    def __init__(self, message: str, *, kind: str | None = None, status_code: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status_code = status_code
        self.retry_after = retry_after


class ModelUnavailable(ModelError):
    """No configured model could serve the call."""


class BudgetExceeded(ModelError):
    """A per-tenant token budget refuses the call."""


class StorageError(OMError):
    """The content store failed. ``transient`` says whether trying again can succeed (a node down, a timeout)
    or not (the store refused the operation itself): a worker retries the first kind and dead-letters the input
    that caused the second."""

    def __init__(self, message: str, *, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


class RecallError(OMError):
    """A recall request that cannot be answered as asked."""


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
