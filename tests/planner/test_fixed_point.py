"""Planning again at the same instant from what a pass wrote changes nothing, on realistic fleets.

The property tests check this on small random timelines; these check it on two 10,000-GPU fleets
from the benchmark generator (500 runs, families, lending, spares, elastic runs), where a long
line of reservations makes a pass's decisions depend on each other. Each of these fleets started
more runs on a second pass before the planner was fixed: a chunk sent where its funding could not
pay (seed 1), spares that no longer fitted after every group was placed, and reservation scopes
drawn over funding that runs behind them spent (seed 4). With no notice period, a reservation
that a pass tried before its forecast warned a run it may then cut is tried again in that pass.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from planner.lottery import seed_for
from planner.world import FleetState
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.passes.simulation import Simulation
from reconciler.spec import validated
from schemas.common import parse_time
from schemas.scenario import Scenario
from tests.planner.generated import play_checked
from tests.support import REPO
from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import at, stamp

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


def test_a_due_reservation_cuts_a_run_its_forecast_warned_in_the_same_pass_when_notice_is_zero() -> None:
    """noticePeriod 0s, minRuntime 0s. x's 16 GPUs are on A (one 8-GPU node), its family org:b pays
    anywhere (B: three 4-GPU nodes). At +1m r1 (2) and r2 (16, groups of 4) start; r3 (8, groups of
    4) waits and warns them. At +2m r3 is due: the lottery cuts r1 and r2, r3 takes A, and r2 is
    reserved with nobody to cut (r3 started at that instant). At +3m r1 starts on B; r2, due, finds
    nobody in its published set to cut, then its forecast warns r3 from +3m, cuttable at once with no
    notice: r2 is tried again in that same pass and the lottery cuts r3 (its only candidate), as a
    second pass at +3m would. Before, r2 waited with ETA +3m and a second pass at +3m started it."""
    doc = scenario(
        {"x": "org:x"},
        [domain("A", 1, cluster="c0"), domain("B", 3, 4, cluster="c1")],
        [at(0, apply=[a_budget("x", "org:x", "org:r").envelope("e0", 16, selector={"cluster": "c0"}).build(),
                      a_budget("b", "org:b", "org:r").envelope("e0", 32).build(), a_budget("r", "org:r").build()]),
         at(1, apply=[a_run("x/r1", "org:x").gpus(2).build(), a_run("x/r2", "org:x").gpus(16).groups(4).build(),
                      a_run("x/r3", "org:x").gpus(8).groups(4).build()])],
        until="+3m",
        fleet={"reservations": {"noticePeriod": "0s", "minRuntime": "0s"}},
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    sim = Simulation(Scenario.model_validate(doc), doc)
    sim.play()

    at_3 = [
        (e["event"], e["run"], e["reason"])
        for e in sim.ledger
        if e["at"] == stamp(3) and e["event"] in ("Start", "End")
    ]
    seed = seed_for("x/r2", parse_time(stamp(3)))
    assert sorted(set(at_3)) == [
        ("End", "x/r3", f"RandomPreempt({seed})"),
        ("Start", "x/r1", "Start"),
        ("Start", "x/r2", "Start"),
    ]
    assert sim.state.runs["x/r2"].phase == "Running" and sim.state.runs["x/r3"].phase == "Pending"
    assert play_checked(doc).problems == []  # and a second pass at each instant changes nothing
