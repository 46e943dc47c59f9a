"""The test suite's own layout: what several test modules share lives in ``tests/support``, never in a test module
that the others import (a test module imported by another runs its imports under two names, and renaming one of
its helpers breaks files that do not mention it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _test_modules_imported(path: Path) -> list[str]:
    """The test modules (``test_*``) that ``path`` imports, by their dotted names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        found += [name for name in names if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")]
    return found


def test_no_test_module_or_bench_imports_a_test_module() -> None:
    offenders = {str(path.relative_to(ROOT)): imported
                 for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
                 if (imported := _test_modules_imported(path))}
    assert offenders == {}, "move what is shared to tests/support"


def test_the_scan_finds_each_form_of_import(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text("import tests.unit.test_a\nfrom tests.component.test_b import helper\n"
                      "from tests.support.sim import Sim\nfrom . import test_c\n")
    assert _test_modules_imported(module) == ["tests.unit.test_a", "tests.component.test_b"]
