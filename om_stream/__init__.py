"""om-stream: Observational Memory for AI agents, as a Kafka sidecar, or in-process.

The public API for Python agents (``tests/unit/test_public_api.py`` pins it; anything else may move)::

    from om_stream import Memory, Message, TextPart

    async with Memory({"observation": {"messageTokens": 20_000}}) as om:
        context = await om.add_message(Message(...))   # or the same fields as a dict
        send_to_model(context.to_chat_messages())

* in-process memory: :class:`Memory`, what it returns (:class:`ContextRecord`), its options (:class:`OMConfig`,
  :class:`ObserveHooks`) and its tracing on the application's OpenTelemetry provider (:class:`Tracing`,
  :class:`TracingSettings`);
* messages: :class:`Message`, its parts (:class:`TextPart`, :class:`ImagePart`, :class:`FilePart`,
  :class:`ToolCallPart`, :class:`ToolResultPart`, :class:`ReasoningPart`) and, in a shared thread, its
  :class:`Author`;
* the errors to catch: :class:`OMError` and its tree (``om_stream.errors``).

Agents that talk to the Kafka sidecar use ``om_stream.client``; tests use ``om_stream.testing``.

Importing this package loads nothing but the error classes: every other name is imported on first use, so
``import om_stream`` (which every ``om_stream.*`` import runs first) stays as cheap as the standard library.
"""

from __future__ import annotations

import importlib

from om_stream.errors import (
    BudgetExceeded,
    ConfigError,
    InputRejected,
    LifecycleBreach,
    ModelError,
    ModelUnavailable,
    OMError,
    RecallError,
    StorageError,
    WireDecodeError,
)

# ``typing`` costs more to import than the rest of this module: type checkers read this name as True all the same
TYPE_CHECKING = False
if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and editors
    from typing import Any

    from om_stream.core.config import ObserveHooks, OMConfig
    from om_stream.core.messages import (
        Author,
        FilePart,
        ImagePart,
        Message,
        Part,
        ReasoningPart,
        TextPart,
        ToolCallPart,
        ToolResultPart,
    )
    from om_stream.observability.tracing import Tracing
    from om_stream.runtime.embedded import Memory
    from om_stream.settings import TracingSettings
    from om_stream.wire.context import ContextRecord

__all__ = [
    "Author",
    "BudgetExceeded",
    "ConfigError",
    "ContextRecord",
    "FilePart",
    "ImagePart",
    "InputRejected",
    "LifecycleBreach",
    "Memory",
    "Message",
    "ModelError",
    "ModelUnavailable",
    "OMConfig",
    "OMError",
    "ObserveHooks",
    "Part",
    "ReasoningPart",
    "RecallError",
    "StorageError",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "Tracing",
    "TracingSettings",
    "WireDecodeError",
    "__version__",
]

__version__ = "0.1.0"

# name -> module that defines it. Memory pulls in SQLite, Qdrant and tiktoken; the message and option models pull
# in pydantic: none of that belongs in ``import om_stream``.
_LAZY = {
    "Memory": "om_stream.runtime.embedded",
    "ContextRecord": "om_stream.wire.context",
    "OMConfig": "om_stream.core.config",
    "ObserveHooks": "om_stream.core.config",
    "Message": "om_stream.core.messages",
    "Author": "om_stream.core.messages",
    "Part": "om_stream.core.messages",
    "TextPart": "om_stream.core.messages",
    "ImagePart": "om_stream.core.messages",
    "FilePart": "om_stream.core.messages",
    "ToolCallPart": "om_stream.core.messages",
    "ToolResultPart": "om_stream.core.messages",
    "ReasoningPart": "om_stream.core.messages",
    "Tracing": "om_stream.observability.tracing",
    "TracingSettings": "om_stream.settings",
}


if not TYPE_CHECKING:  # hidden from type checkers, which would otherwise accept any name as ``Any``

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'om_stream' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # resolved once: later lookups are plain attribute reads
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
