"""The dependency rule of ARCHITECTURE.md §2: core and wire stay pure; only runtime imports faust; the agent-side
client carries no server code; adapters do not speak the wire contract; observability depends on neither the
runtime nor the adapters (it is handed to them); within the runtime only the composition roots name an adapter."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import om_stream

PACKAGE = Path(__file__).resolve().parents[2] / "om_stream"
IO_LIBRARIES = {"faust", "mode", "aiokafka", "cassandra", "qdrant_client", "litellm", "prometheus_client", "httpx",
                "aiohttp", "asyncio", "sqlite3", "socket", "requests", "tiktoken", "onnxruntime", "urllib",
                "http", "subprocess", "threading", "time", "opentelemetry"}  # spans live in runtime/ and adapters/
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


# -- who may import whom, beyond core and wire ----------------------------------------------------------------------

def _om_imports(path: Path) -> set[str]:
    """Every ``om_stream`` module ``path`` imports, wherever the import sits (under ``TYPE_CHECKING`` or inside a
    function too: a lazy import is still a dependency)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("om_stream"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "om_stream":  # ``from om_stream import x``: a module, or a public name's home
                found.update(om_stream._LAZY.get(alias.name, f"om_stream.{alias.name}")  # type: ignore[attr-defined]
                             for alias in node.names)
            elif node.module.startswith("om_stream."):
                found.add(node.module)
    return found


def _offenders(layers: tuple[str, ...], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    bad: dict[str, list[str]] = {}
    for path in _modules(*layers):
        hits = sorted(m for m in _om_imports(path) if any(m == f or m.startswith(f"{f}.") for f in forbidden))
        if hits:
            bad[str(path.relative_to(PACKAGE))] = hits
    return bad


def test_the_client_imports_no_server_code() -> None:
    """Agents run ``om_stream.client`` in their own processes: it speaks the wire contract, with its own options."""
    server = ("om_stream.settings", "om_stream.runtime", "om_stream.adapters", "om_stream.observability",
              "om_stream.cli", "om_stream.replay", "om_stream.devservices")
    assert _offenders(("client",), server) == {}
    assert all("pydantic_settings" not in _imports(p) for p in _modules("client"))


def test_importing_the_client_loads_no_server_settings() -> None:
    import subprocess
    import sys

    # the client needs the OpenTelemetry API only: the agent's own SDK (or none) records its spans
    probe = ("import sys, om_stream.client; "
             "print(sorted(m for m in sys.modules if m in ('om_stream.settings', 'pydantic_settings', 'faust', "
             "'litellm') or m.startswith(('om_stream.runtime', 'om_stream.adapters', 'opentelemetry.sdk'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_adapters_import_no_wire() -> None:
    """Adapters reach the world through the ports' types; the wire contract is the runtime's and the client's."""
    assert _offenders(("adapters",), ("om_stream.wire",)) == {}


def test_adapters_import_no_observability() -> None:
    """An adapter reports through the callbacks it is given (the gateway's call observers), never a metrics object."""
    assert _offenders(("adapters",), ("om_stream.observability",)) == {}


def test_observability_imports_neither_runtime_nor_adapters() -> None:
    """Metric feeds are handed to the runtime and the adapters; they declare what they read (protocols)."""
    assert _offenders(("observability",), ("om_stream.runtime", "om_stream.adapters")) == {}


def test_the_import_rules_see_lazy_and_type_only_imports(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from om_stream.wire.recall import X\n"
                      "def f():\n    import om_stream.runtime.host\n    from om_stream import settings, Memory\n")
    assert _om_imports(module) == {"om_stream.wire.recall", "om_stream.runtime.host", "om_stream.settings",
                                   "om_stream.runtime.embedded"}


def _cycles(package: str) -> list[list[str]]:
    """Import cycles among the modules of one package (every import counts, type-only and lazy ones too)."""
    modules = {f"om_stream.{package.replace('/', '.')}.{p.stem}": p for p in (PACKAGE / package).glob("*.py")}
    graph = {name: {m for m in _om_imports(path) if m in modules and m != name} for name, path in modules.items()}
    found: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt in trail:
                cycle = trail[trail.index(nxt):]
                if min(cycle) == cycle[0]:  # each cycle once
                    found.append(cycle)
            else:
                visit(nxt, [*trail, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return found


def test_the_runtime_has_no_import_cycle() -> None:
    """The worker's modules (and the runtime's) depend on each other one way: the HTTP API names what it needs of
    the worker instead of importing it, the host knows no driver."""
    assert _cycles("runtime/worker") == []
    assert _cycles("runtime") == []


def test_the_runtime_imports_no_worker() -> None:
    """The Kafka worker drives the runtime's host, as the embedded runner does: ``runtime/worker`` may import the
    runtime, never the reverse (what both drivers share, such as their spans, lives in the runtime)."""
    shared = [p for p in _modules("runtime") if "worker" not in p.relative_to(PACKAGE / "runtime").parts]
    bad = {str(p.relative_to(PACKAGE)): hits for p in shared
           if (hits := sorted(m for m in _om_imports(p) if m.startswith("om_stream.runtime.worker")))}
    assert bad == {}


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "om_stream" / "demo"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from om_stream.demo.b import x\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from om_stream.demo.a import y\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "om_stream")
    assert _cycles("demo") == [["om_stream.demo.a", "om_stream.demo.b"]]


# the runtime modules that assemble a deployment from its parts (stores, gateway, index, embedder, tokenizer): the
# only ones that may name an adapter. Everything else in the runtime works on the ports, so it runs on any adapter
COMPOSITION_ROOTS = {
    "runtime/worker/deps.py",  # the worker's parts, chosen from settings
    "runtime/embedded.py",  # Memory's defaults: SQLite, the offline model, tiktoken
    "runtime/embedded_parts.py",  # Memory's recall service: the Qdrant index in local mode
    "runtime/named_model.py",  # Memory(model="provider/name"): the gateway for a named model
}


def test_only_the_composition_roots_import_adapters() -> None:
    """The recall service, the host, the worker's agents and the rest of the runtime depend on ports; which adapter
    stands behind a port is decided in the composition roots only."""
    bad = {path: hits for path, hits in _offenders(("runtime",), ("om_stream.adapters",)).items()
           if path not in COMPOSITION_ROOTS}
    assert bad == {}
    assert all((PACKAGE / root).exists() for root in COMPOSITION_ROOTS)  # a root renamed must be renamed here


# -- Faust's private members: one adapter -----------------------------------------------------------------------------

FAUST_ADAPTER = "runtime/worker/faust_internals.py"
FAUST_FAMILY = ("faust", "mode", "aiokafka")  # Faust and the libraries it is built on (their objects cross into ours)
STDLIB_PRIVATE = {"os._exit"}  # the standard library's documented private-looking names


def _private_reaches(path: Path) -> list[str]:
    """Where ``path`` reaches into another object's private members: ``x._name`` on anything but ``self``/``cls``
    (``super()._name`` included), ``getattr(x, "_name")`` and its kin, and ``from faust... import _name``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own and ast.unparse(node) not in STDLIB_PRIVATE:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
              and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")):
            found.append(f"{node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in FAUST_FAMILY:
            found.extend(f"{node.lineno}: from {node.module} import {alias.name}" for alias in node.names
                         if alias.name.startswith("_"))
    return found


def _casts_to_any(path: Path) -> list[str]:
    return [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "cast"
            and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "Any"]


def _near_faust() -> list[Path]:
    """The worker's modules (Faust's objects are handed around them) and every module importing the Faust family."""
    return sorted({*_modules("runtime/worker"),
                   *(p for p in PACKAGE.rglob("*.py") if _imports(p) & set(FAUST_FAMILY))})


def test_only_the_faust_adapter_reaches_into_faust_private_members() -> None:
    """Faust promises nothing about its private members; the worker uses a few on purpose (``faust_internals`` says
    which, why, and which version it was checked against). Anywhere else one would go unnoticed at an upgrade."""
    bad = {str(p.relative_to(PACKAGE)): hits for p in _near_faust()
           if str(p.relative_to(PACKAGE)) != FAUST_ADAPTER and (hits := _private_reaches(p))}
    assert bad == {}


def test_only_the_faust_adapter_casts_to_any() -> None:
    """Where Faust's types are too loose the adapter casts, once; the worker's modules stay typed."""
    bad = {str(p.relative_to(PACKAGE)): hits for p in _near_faust()
           if str(p.relative_to(PACKAGE)) != FAUST_ADAPTER and (hits := _casts_to_any(p))}
    assert bad == {}
    assert _private_reaches(PACKAGE / FAUST_ADAPTER)  # the adapter exists and is where the reaches are


def test_the_private_member_scan_finds_each_kind_of_reach(tmp_path: Path) -> None:
    module = tmp_path / "reach.py"
    module.write_text("from faust.streams import _current_event\nfrom typing import Any, cast\n"
                      "def f(consumer, os):\n    consumer._commit_offsets({})\n    getattr(consumer, '_paused', None)\n"
                      "    super()._schedule_shutdown(1)\n    self._mine = cast(Any, consumer)\n    os._exit(0)\n")
    assert set(_private_reaches(module)) == {
        "1: from faust.streams import _current_event", "4: consumer._commit_offsets",
        "5: getattr(..., '_paused')", "6: super()._schedule_shutdown"}
    assert _casts_to_any(module) == ["7: cast(Any, consumer)"]


def test_the_faust_adapter_names_the_versions_installed() -> None:
    """An upgrade of Faust, mode or aiokafka fails here first: read ``faust_internals`` (every private member it
    uses still there, still meaning the same), then update ``FAUST_CHECKED``."""
    from importlib.metadata import version

    from om_stream.runtime.worker.faust_internals import FAUST_CHECKED

    installed = ", ".join(f"{name} {version(name)}" for name in ("faust-streaming", "mode-streaming", "aiokafka"))
    assert installed == FAUST_CHECKED


# -- the worker's roles ---------------------------------------------------------------------------------------------

MEMORY_AGENT = "om_stream.runtime.worker.processor"
# the wiring that builds and drives the memory agent: the only modules that may import its processor. The worker
# builds it (app.py); its batches come in through ingest.py and the rebalance hand-over keeps its held records
# (handover.py). Everything else needing only the Kafka record types imports kafka_records
MEMORY_AGENT_WIRING = {"runtime/worker/app.py", "runtime/worker/ingest.py", "runtime/worker/handover.py"}
# what only the memory agent runs: its processor, its outlet, its decoding, its state table and its erasures
MEMORY_AGENT_PARTS = (MEMORY_AGENT, "om_stream.runtime.worker.outlet", "om_stream.runtime.worker.decoding",
                      "om_stream.runtime.worker.state_table", "om_stream.runtime.worker.erasure")
OTHER_ROLES = ("om_stream.runtime.worker.model_requests", "om_stream.runtime.worker.recall_requests")


def _path_of(module: str) -> Path | None:
    relative = Path(*module.split(".")[1:])
    for path in (PACKAGE / relative.with_suffix(".py"), PACKAGE / relative / "__init__.py"):
        if path.exists():
            return path
    return None


def _reached(module: str) -> set[str]:
    """Every ``om_stream`` module ``module`` imports, directly or through the modules it imports."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        path = _path_of(todo.pop())
        for found in _om_imports(path) if path is not None else set():
            if found not in seen:
                seen.add(found)
                todo.append(found)
    return seen


def test_only_the_memory_agents_wiring_imports_its_processor() -> None:
    """The shared Kafka record types live in ``kafka_records``; the memory agent's module is its own."""
    importers = {str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py")) if MEMORY_AGENT in _om_imports(p)}
    assert importers <= MEMORY_AGENT_WIRING
    assert all((PACKAGE / module).exists() for module in MEMORY_AGENT_WIRING)  # a module renamed is renamed here


def test_the_model_workers_and_the_recall_agent_reach_nothing_of_the_memory_agent() -> None:
    reached = {role: sorted(_reached(role) & set(MEMORY_AGENT_PARTS)) for role in OTHER_ROLES}
    assert reached == {role: [] for role in OTHER_ROLES}


def test_the_role_rule_follows_imports_through_other_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "om_stream" / "demo"
    package.mkdir(parents=True)
    (package / "role.py").write_text("from om_stream.demo.shared import x\n")
    (package / "shared.py").write_text("def f():\n    from om_stream.demo.agent import y\n")
    (package / "agent.py").write_text("y = 1\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "om_stream")
    assert _reached("om_stream.demo.role") == {"om_stream.demo.shared", "om_stream.demo.agent"}
