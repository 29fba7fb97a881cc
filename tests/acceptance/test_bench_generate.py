"""The benchmark generator writes a valid fleet, and the same seed always gives the same bytes."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from schemas import fleetcheck
from schemas.load import load_fleet
from schemas.scenario import Scenario
from schemas.yamldoc import parse
from tests.support import REPO

# bench/ is a top-level directory, not an installed package: import it from the checkout.
ROOT = REPO
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
generate = importlib.import_module("bench.generate")


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_generated_fleet_repo_and_scenarios_are_valid(tmp_path: Path) -> None:
    fleet = generate.write(tmp_path, seed=7, scale=0.01, contended=True)

    files = _tree(tmp_path / generate.REPO_DIR)
    loaded = load_fleet(files)
    assert [str(d) for d in loaded.diagnostics] == []
    assert loaded.config is not None and loaded.inventory is not None
    assert len(loaded.budgets) == len(fleet.budgets) and len(loaded.runs) == len(fleet.runs)
    checked = fleetcheck.check_fleet(files)  # the cross-object rules too
    assert [str(d) for d in checked.diagnostics] == []
    assert len(checked.runs) == len(fleet.runs) and len(checked.budgets) == len(fleet.budgets)

    tenancy = {t.namespace: t.owner for t in loaded.config.model.spec.tenants}
    for run in loaded.runs:
        assert run.model.spec.owner == tenancy[run.model.metadata.namespace]

    for name in (generate.SCENARIO_FILE, generate.CONTENDED_FILE):
        (doc,) = parse((tmp_path / name).read_bytes(), name)
        scenario = Scenario.model_validate(doc.data)
        objects = [obj for step in scenario.spec.steps for obj in step.apply or []]
        assert objects, name


def test_same_seed_gives_identical_bytes(tmp_path: Path) -> None:
    generate.write(tmp_path / "a", seed=3, scale=0.01, contended=True)
    generate.write(tmp_path / "b", seed=3, scale=0.01, contended=True)
    want_a, got_b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert want_a == got_b


def test_different_seeds_give_different_runs(tmp_path: Path) -> None:
    generate.write(tmp_path / "a", seed=1, scale=0.01)
    generate.write(tmp_path / "b", seed=2, scale=0.01)
    assert _tree(tmp_path / "a") != _tree(tmp_path / "b")
