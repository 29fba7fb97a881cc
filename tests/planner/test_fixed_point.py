"""Planning again at the same instant from what a pass wrote changes nothing, on realistic fleets.

The property tests check this on small random timelines; these check it on two 10,000-GPU fleets
from the benchmark generator (500 runs, families, lending, spares, elastic runs), where a long
line of reservations makes a pass's decisions depend on each other. Each of these fleets started
more runs on a second pass before the planner was fixed: a chunk sent where its funding could not
pay (seed 1), spares that no longer fitted after every group was placed, and reservation scopes
drawn over funding that runs behind them spent (seed 4).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from planner.world import FleetState
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.spec import validated
from schemas.common import parse_time
from tests.support import REPO

ROOT = REPO
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
generate = importlib.import_module("bench.generate")


@pytest.mark.parametrize("seed", [1, 4])
def test_a_second_pass_at_the_same_instant_decides_nothing_new(seed: int, tmp_path: Path) -> None:
    generate.write(tmp_path, seed=seed, scale=0.1)
    repo = tmp_path / generate.REPO_DIR
    files = {p.relative_to(repo).as_posix(): p.read_bytes() for p in sorted(repo.rglob("*.yaml"))}
    spec = validated.read_spec(files)
    assert spec.diagnostics == []
    now = parse_time("2026-03-02T09:00:00Z")
    cluster = EmbeddedCluster(spec.inventory)

    first = pipeline.run_pass(spec, cluster, FleetState(), now, render=False)
    again = pipeline.run_pass(spec, cluster, first.state, now, render=False)

    running = sum(1 for s in first.runs.values() if s["phase"] == "Running")
    assert running > 100 and first.state.reservations  # a full fleet with a long line
    assert [(e.event, e.reason, e.lease.run) for e in again.events] == []
    assert again.state.leases == first.state.leases
    assert again.state.reservations == first.state.reservations
    assert again.runs == first.runs


def test_a_run_requeued_by_a_cut_keeps_its_message_so_the_next_pass_commits_nothing(tmp_path: Path) -> None:
    """Scenario 04: at 09:55 team-c/c2 activates and the lottery cuts team-b/b1, which is requeued
    and reserved at once. Reconciling that history again at 09:55 changes nothing: b1 keeps saying
    it was requeued (its reservation waits for the same reason) instead of a commit for a new message."""
    from click.testing import CliRunner

    from reconciler.cli.simulate import command as simulate
    from reconciler.passes.reconcile import reconcile_once

    scenario = ROOT / "examples" / "04-reservation-and-lottery.yaml"
    assert CliRunner().invoke(simulate, [str(scenario), "--git", str(tmp_path / "g")]).exit_code == 0
    done = reconcile_once(tmp_path / "g", now=parse_time("2026-03-02T09:55:00Z"))
    assert done.commit is None, done.summary
    status = (tmp_path / "g" / "state" / "status" / "runs" / "team-b" / "b1.yaml").read_text()
    assert 'message: "requeued after RandomPreempt(' in status and "for reservation team-c/c2" in status
