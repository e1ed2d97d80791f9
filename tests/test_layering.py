"""The packages depend one way: solvers <- search <- cost_models <- experiments; solvers never import TVM, Ray or
MLflow; and within each package no modules import each other in a circle. Checked on every import statement of every
module (top level, inside a function or under ``TYPE_CHECKING``)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import networkx as nx
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


def module_name(path: Path) -> str:
    """``search/kinds/conv2d.py`` -> ``search.kinds.conv2d``; a package's ``__init__.py`` -> the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports: ``from a.b import c`` imports ``a.b.c`` if that is a module,
    else ``a.b``; importing a package imports its ``__init__``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
    return (found & modules) - {name}


def import_graph(package: str) -> nx.DiGraph:
    """Module -> module it imports, within ``package``."""
    paths = sorted((ROOT / package).rglob("*.py"))
    modules = {module_name(path) for path in paths}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    graph.add_edges_from((module_name(path), target) for path in paths for target in imported_modules(path, modules))
    return graph


@pytest.mark.parametrize("package", ORDER)
def test_no_modules_import_each_other_in_a_circle(package):
    circles = [sorted(component) for component in nx.strongly_connected_components(import_graph(package))
               if len(component) > 1]
    assert not circles, f"modules of {package} import each other in a circle: " + "; ".join(
        ", ".join(circle) for circle in sorted(circles))
