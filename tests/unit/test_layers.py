"""The dependency rule of ARCHITECTURE.md §2: core and wire stay pure; only runtime imports faust."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "om_stream"
IO_LIBRARIES = {"faust", "mode", "aiokafka", "cassandra", "qdrant_client", "litellm", "prometheus_client", "httpx",
                "aiohttp", "asyncio", "sqlite3", "socket", "requests", "tiktoken", "onnxruntime", "urllib",
                "http", "subprocess", "threading", "time"}
PURE_ALLOWED_THIRD_PARTY = {"pydantic", "pydantic_core", "typing_extensions"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _modules(*layers: str) -> list[Path]:
    return [p for layer in layers for p in sorted((PACKAGE / layer).rglob("*.py"))]


def test_core_and_wire_import_no_io_library() -> None:
    offenders = {str(p.relative_to(PACKAGE)): sorted(_imports(p) & IO_LIBRARIES) for p in _modules("core", "wire")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_and_wire_import_only_stdlib_pydantic_and_each_other() -> None:
    import sys

    stdlib = set(sys.stdlib_module_names)
    bad: dict[str, list[str]] = {}
    for path in _modules("core", "wire"):
        others = {m for m in _imports(path) if m not in stdlib and m not in PURE_ALLOWED_THIRD_PARTY
                  and m != "om_stream"}
        if others:
            bad[str(path.relative_to(PACKAGE))] = sorted(others)
    assert bad == {}


def test_core_does_not_import_outer_layers() -> None:
    outer = ("om_stream.adapters", "om_stream.runtime", "om_stream.cli", "om_stream.observability",
             "om_stream.devservices", "om_stream.settings", "om_stream.ports", "om_stream.replay")
    bad = []
    for path in _modules("core", "wire"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(outer):
                bad.append(f"{path.relative_to(PACKAGE)} -> {node.module}")
    assert bad == []


def test_only_runtime_imports_faust() -> None:
    bad = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py"))
           if "faust" in _imports(p) and "runtime" not in p.relative_to(PACKAGE).parts]
    assert bad == []


def test_the_layer_rule_catches_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("import asyncio\nfrom aiokafka import AIOKafkaProducer\nfrom om_stream.core import x\n")
    assert _imports(module) & IO_LIBRARIES == {"asyncio", "aiokafka"}
