"""No import cycle anywhere in the product, counting the imports import-linter cannot see.

import-linter reads only the imports at the top of a module. A cycle closed by an import inside a
function (`gitstore → worktree → checkoutjournal → gitstore`, `schemas.rules ⇄ fleetcheck`) is
still a cycle: this walks the syntax tree of every module, top-level, deferred and
`TYPE_CHECKING` imports alike, and fails naming each cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO

ROOT = REPO
PACKAGES = ("schemas", "planner", "reconciler", "bench")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every project module `name` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    yield sub  # `from reconciler.git import read`: the submodule
                elif base in known:
                    yield base  # `from reconciler.git.read import resolve`: the module


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back_through_any_import_top_level_or_deferred() -> None:
    modules = _modules()
    known = set(modules)
    graph = {name: set(_imports(name, path, known)) - {name} for name, path in modules.items()}
    assert _cycles(graph) == []


@pytest.mark.parametrize(
    ("graph", "want"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
    ids=["a three-module ring is found", "a chain is no cycle"],
)
def test_the_cycle_finder_finds_rings_and_only_rings(
    graph: dict[str, set[str]], want: list[list[str]]
) -> None:
    assert _cycles(graph) == want


def test_a_deferred_import_counts(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from reconciler.git import read\n    import schemas.layout\n")
    got = set(_imports("reconciler.passes.m", path, {"reconciler.git.read", "schemas.layout"}))
    assert got == {"reconciler.git.read", "schemas.layout"}
