"""The public API is pinned: nothing enters or leaves ``om_stream``, ``om_stream.client`` or ``om_stream.testing``
by accident, every public name resolves to the object it names, and ``import om_stream`` stays cheap."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import om_stream
import om_stream.client
import om_stream.testing

PACKAGE = Path(om_stream.__file__).resolve().parent

OM_STREAM = [
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
CLIENT = [
    "Author",
    "ClientTopics",
    "ContextRecord",
    "EventEnvelope",
    "EventStream",
    "MessageRecord",
    "MessagesApi",
    "OMClient",
    "Published",
    "RecallRequest",
    "RecallResponse",
    "partition_for",
]
TESTING = [
    "ErrorReply",
    "FailurePlan",
    "FakeOpenAI",
    "FunctionModel",
    "MalformedReply",
    "ModelFunction",
    "NetworkGuard",
    "RecordedRequest",
    "RemoteNetworkBlocked",
    "Reply",
]


@pytest.mark.parametrize(("module", "pinned"), [(om_stream, OM_STREAM), (om_stream.client, CLIENT),
                                                (om_stream.testing, TESTING)], ids=["om_stream", "client", "testing"])
def test_all_is_pinned_and_every_name_resolves(module: ModuleType, pinned: list[str]) -> None:
    assert module.__all__ == pinned, "a change to the public API is deliberate: update this list too"
    missing = [name for name in pinned if not hasattr(module, name)]
    assert missing == []


def test_the_public_names_are_the_objects_of_their_homes() -> None:
    from om_stream.core.config import OMConfig
    from om_stream.core.messages import Message, Part, TextPart
    from om_stream.errors import InputRejected, OMError
    from om_stream.runtime.embedded import Memory
    from om_stream.wire.context import ContextRecord

    assert om_stream.Memory is Memory and om_stream.Message is Message and om_stream.TextPart is TextPart
    assert om_stream.Part is Part and om_stream.OMConfig is OMConfig and om_stream.ContextRecord is ContextRecord
    assert om_stream.InputRejected is InputRejected and issubclass(om_stream.InputRejected, OMError)
    assert om_stream.client.ContextRecord is ContextRecord
    assert set(om_stream.__all__) <= set(dir(om_stream))
    with pytest.raises(AttributeError, match="no attribute 'Memroy'"):
        _ = om_stream.Memroy  # type: ignore[attr-defined]


def test_every_error_of_the_tree_is_public() -> None:
    from om_stream import errors

    assert set(errors.__all__) <= set(om_stream.__all__)


def test_the_type_checkers_view_names_the_same_homes_as_the_lazy_imports() -> None:
    """``om_stream/__init__.py`` says twice where each lazy name lives (for type checkers, and at run time)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    checked: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module != "typing":
                    checked.update({alias.name: statement.module or "" for alias in statement.names})
    assert checked == om_stream._LAZY  # type: ignore[attr-defined]


def test_importing_om_stream_loads_nothing_but_the_errors() -> None:
    probe = ("import sys; before = set(sys.modules); import om_stream; "
             "print(sorted(set(sys.modules) - before))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['om_stream', 'om_stream.errors']"


def test_the_clients_topic_names_default_to_the_workers() -> None:
    """The client has its own topic options (it never reads the server's settings); their defaults must agree."""
    from om_stream.settings import KafkaSettings

    worker = {name: field.default for name, field in KafkaSettings.model_fields.items()}
    assert om_stream.client.ClientTopics() == om_stream.client.ClientTopics(
        messages=worker["topic_messages"], events=worker["topic_events"], context=worker["topic_context"],
        context_index=worker["topic_context_index"], context_blocks=worker["topic_context_blocks"],
        recall_requests=worker["topic_recall_requests"], recall_responses=worker["topic_recall_responses"])
