"""The planner decides on kinds, never on text (STYLE habit 12): outside `planner/reasons.py` no
planner module spells a role, phase, reservation state, closure or open reason as a string literal,
so every such word is one typed constant and no decision can hinge on a message's wording."""

from __future__ import annotations

import ast

from planner.reasons import Closure, Confidence, Ledger, OpenReason, Phase, ResState, Role
from tests.support import REPO

PLANNER = REPO / "planner"
VOCABULARY = {
    str(v) for enum in (Closure, Confidence, Ledger, OpenReason, Phase, ResState, Role) for v in enum
}


def test_no_planner_module_spells_the_vocabulary_as_text() -> None:
    found = []
    for path in sorted(PLANNER.glob("*.py")):
        if path.name == "reasons.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in VOCABULARY and id(node) not in docstrings:
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert found == []


def test_the_vocabulary_check_would_see_a_literal() -> None:
    tree = ast.parse('if lease.role == "Active": pass')
    assert any(isinstance(n, ast.Constant) and n.value in VOCABULARY for n in ast.walk(tree))
