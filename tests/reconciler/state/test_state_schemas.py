"""Every file jobtree writes under `state/` validates against the published JSON Schema of its kind.

The shape of each state file is written down twice: as the published schema
(`schemas/json/*.schema.json`: lease, reservation, runstatus, budgetstatus, fleetstate,
observedcluster, ledgerline) and by the code that writes it (`planner.status`,
`reconciler.state.codec`, `reconciler.state.observed`). This reads every state file of every
commit of real histories (each worked example and contract scenario as `simulate --git` writes it,
and the template fleet reconciled pass by pass; tests/cluster/test_journal_fold.py adds a history
with an observed cluster, a folded swap and a workload outcome) and checks each document against
the published file, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from click.testing import CliRunner

from reconciler.cli.simulate import command as simulate
from reconciler.state import layout
from tests.support import TESTS
from tests.support.git import T0, reconciled
from tests.support.scenarios import EXAMPLES
from tests.support.statefiles import check, kind_of, state_files

SCENARIOS = sorted([*EXAMPLES.glob("*.yaml"), *(TESTS / "scenarios" / "contract").glob("*.yaml")])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_every_state_file_of_a_simulated_history_validates_against_its_published_schema(
    scenario: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(simulate, [str(scenario), "--git", str(tmp_path / "history")])
    assert result.exit_code == 0, result.output
    files = state_files(pygit2.Repository(str(tmp_path / "history")))
    assert any(name.startswith(layout.LEASES) for name in files)  # the history holds leases to check
    assert check(files) == []


def test_every_state_file_a_reconcile_writes_validates_against_its_published_schema(tmp_path: Path) -> None:
    from reconciler.passes.reconcile import reconcile_once

    work, repo = reconciled(tmp_path)
    for minutes in (5, 10, 60):
        reconcile_once(work, now=T0 + minutes * 60)
    files = state_files(repo)
    assert {kind_of(name.split("@")[0]) for name in files} >= {layout.LEASES, layout.RUN_STATUS}
    assert check(files) == []


def test_the_check_names_the_file_and_field_its_published_schema_rejects() -> None:
    problems = check(
        {
            "state/status/runs/t/r1.yaml@1": b"run: t/r1\nstatus:\n  phase: Bogus\n",
            "state/ledger/2026-03-02.jsonl@2": b'{"at": "2026-03-02T09:00:00Z", "event": "Nope", "run": "t/r1"}\n',
            "state/fleet.yaml@3": b"asOf: null\ncordoned: []\nunfunded: [t/r1]\n",
            "state/fleet.svg@4": b"<html/>",
        }
    )
    assert "state/status/runs/t/r1.yaml@1: status/phase: 'Bogus' is not one of" in "\n".join(problems)
    assert any(p.startswith("state/ledger/2026-03-02.jsonl@2: : ") for p in problems)
    assert any(p.startswith("state/fleet.yaml@3: unfunded/0: 't/r1' does not match") for p in problems)
    assert "state/fleet.svg@4: not an SVG document (html)" in problems
    with pytest.raises(AssertionError, match="state/new.yaml: a state file of no known kind"):
        check({"state/new.yaml@5": b"{}\n"})
