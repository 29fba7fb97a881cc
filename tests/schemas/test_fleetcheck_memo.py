"""The simulator validates an unchanged object once: later passes reuse its verdict, edits are re-checked."""

from __future__ import annotations

from typing import Any

from reconciler.spec.validated import read_spec
from schemas import fleetcheck
from schemas.yamldoc import Document
from tests.support.builders import a_run

FLEET = b"""apiVersion: rq.davidlangworthy.io/v1
kind: FleetConfig
metadata: {name: f}
spec:
  tenants: [{namespace: t, owner: "org:t"}]
"""


def docs_of(*runs: dict[str, Any]) -> dict[str, list[Document]]:
    out = {}
    for run in runs:
        path = f"runs/t/{run['metadata']['name']}.yaml"
        out[path] = [Document(path, 0, run, 1, 1)]
    return out


def test_the_same_document_list_is_validated_once(monkeypatch: Any) -> None:
    parsed = docs_of(a_run("t/a", "org:t").build(), a_run("t/b", "org:t").build())
    memo: dict[str, Any] = {}
    first = read_spec({"jobtree.yaml": FLEET}, parsed, memo)
    checked: list[str] = []
    real = fleetcheck._entries
    monkeypatch.setattr(fleetcheck, "_entries", lambda p, k, d: checked.append(p) or real(p, k, d))
    edited = a_run("t/b", "org:t").gpus(-4).build()
    again = read_spec({"jobtree.yaml": FLEET}, {**parsed, **docs_of(edited)}, memo)
    assert checked == ["runs/t/b.yaml"], "only the edited object is validated again"
    assert [r.metadata.name for r in first.runs] == ["a", "b"]
    assert [r.metadata.name for r in again.runs] == ["a"], "the edited run is now invalid and left out"
    assert any("runs/t/b.yaml" in str(d) for d in again.diagnostics)
    back = read_spec({"jobtree.yaml": FLEET}, parsed, memo)
    assert [r.metadata.name for r in back.runs] == ["a", "b"]
    assert not back.diagnostics


def test_a_second_fleet_config_is_refused_the_same_way_every_time() -> None:
    files = {"jobtree.yaml": FLEET + b"---\n" + FLEET}  # parsed once, then served from the parse cache
    verdicts = [fleetcheck.check_fleet(files) for _ in range(3)]
    for v in verdicts:
        assert [d.message for d in v.diagnostics] == [
            "only one FleetConfig per fleet; merge this one into the first"
        ], "the cached entry is never changed in place, so the diagnostic is not repeated"
