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
]


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
