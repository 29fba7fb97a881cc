"""The planner decides on kinds, never on text (STYLE habit 12): outside `planner/reasons.py` no
planner module spells a role, phase, reservation state, closure or open reason as a string literal,
so every such word is one typed constant and no decision can hinge on a message's wording."""

from __future__ import annotations

import ast
from typing import get_args

from planner.reasons import Closure, Confidence, Ledger, OpenReason, Phase, ResState, Role
from schemas import lease, state
from schemas.lease import CLOSURE_REASONS
from tests.support import REPO

PLANNER = REPO / "planner"
VOCABULARY = {
    str(v) for enum in (Closure, Confidence, Ledger, OpenReason, Phase, ResState, Role) for v in enum
}


def spelled(source: str, name: str) -> list[str]:
    """`name:line: 'word'` for each vocabulary word the source spells as a literal, docstrings aside."""
    tree = ast.parse(source, name)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"{name}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in VOCABULARY and id(node) not in docstrings
    ]


def test_no_planner_module_spells_the_vocabulary_as_text() -> None:
    found = []
    for path in sorted(PLANNER.glob("*.py")):
        if path.name != "reasons.py":
            found += spelled(path.read_text(), path.name)
    assert found == []


def test_the_vocabulary_check_sees_a_literal_and_leaves_docstrings_alone() -> None:
    source = 'def f(lease):\n    """An Active lease."""\n    return lease.role == "Active" or "RunDeleted"\n'
    assert sorted(spelled(source, "m.py")) == ["m.py:3: 'Active'", "m.py:3: 'RunDeleted'"]
    assert spelled('"""Active"""\nX = 1\n', "n.py") == []


def test_the_planner_s_words_are_the_published_schemas_words() -> None:
    # the planner does not import the published models (a pass would build them for nothing): this
    # checks that its closures, run phases and open reasons are what a lease and a status file may say
    assert {c.value for c in Closure} == {*CLOSURE_REASONS, "RandomPreempt"}
    assert {p.value for p in Phase} == set(get_args(state.Phase))
    assert {r.value for r in OpenReason} == set(get_args(lease.OpenReason))
