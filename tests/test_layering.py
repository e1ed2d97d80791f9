"""The packages depend one way: solvers <- search <- cost_models <- experiments; solvers never import TVM, Ray or
MLflow. Checked on every import statement of every module (top level or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORDER = ("solvers", "search", "cost_models", "experiments")
FORBIDDEN_IN_SOLVERS = ("tvm", "tvm_ffi", "ray", "mlflow")


def imported(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (relative imports excluded)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", ORDER)
def test_no_package_imports_a_later_one(package):
    later = set(ORDER[ORDER.index(package) + 1:]) | (set(FORBIDDEN_IN_SOLVERS) if package == "solvers" else set())
    offenders = {str(path.relative_to(ROOT)): sorted(imported(path) & later)
                 for path in sorted((ROOT / package).rglob("*.py")) if imported(path) & later}
    assert not offenders, f"{package} must not import {sorted(later)}: {offenders}"
