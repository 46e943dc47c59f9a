"""The Python the README and docs/ show uses the public API only, and the in-process examples run as printed."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PUBLIC = ("om_stream", "om_stream.client", "om_stream.testing")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    return [(f"{doc.relative_to(ROOT)}#{i}", code) for doc in DOCS
            for i, code in enumerate(_BLOCK.findall(doc.read_text()))]


def _tree(code: str) -> ast.Module:
    # the examples await at top level, as they would inside an agent's coroutine
    tree = compile(code, "<doc>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert isinstance(tree, ast.Module)
    return tree


def test_the_docs_show_python() -> None:
    assert len(_blocks()) >= 3  # the Kafka client, the in-process memory, the test double


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[where for where, _ in _blocks()])
def test_python_examples_import_only_the_public_api(where: str, code: str) -> None:
    bad: list[str] = []
    for node in ast.walk(_tree(code)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.startswith("om_stream") and a.name not in PUBLIC]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("om_stream"):
            module = node.module or ""
            if module not in PUBLIC:
                bad.append(module)
                continue
            public = importlib.import_module(module).__all__
            bad += [f"{module}.{a.name}" for a in node.names if a.name not in public]
    assert bad == [], f"{where} imports beyond the public API"


_IN_PROCESS = [(where, code) for where, code in _blocks() if "Memory(" in code and "OMClient" not in code]


@pytest.mark.parametrize(("where", "code"), _IN_PROCESS, ids=[where for where, _ in _IN_PROCESS])
async def test_the_in_process_examples_run_as_printed(where: str, code: str) -> None:
    sent: list[Any] = []
    namespace: dict[str, Any] = {"send_to_model": sent.append}
    run = eval(compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
    if run is not None:  # a coroutine when the example awaits
        await run
    if "send_to_model" in code:
        assert sent and sent[-1], "the example hands the model a context"
