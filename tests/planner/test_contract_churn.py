"""§4.1 and §4.6: cuts only where the activation that needs them uses what they free; nothing cut
sits idle while a run that fits waits; a pass is a fixed point; `minRuntime` bounds churn.

Expectations are worked out by hand from DESIGN.md; the generated fleet is the benchmark's
(`bench/generate.py`) at 1% of its size, as the issue's repro used.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from planner.lottery import seed_for
from planner.world import FleetState
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.spec import validated
from schemas.common import parse_time
from tests.support import REPO
from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import at, play, stamp

generate = importlib.import_module("bench.generate")

CUTS = ("RandomPreempt", "DropSpare", "Shrink", "ReclaimUnfunded")


def _generated(tmp_path: Path, seed: int) -> pipeline.Spec:
    generate.write(tmp_path, seed=seed, scale=0.01)
    repo = tmp_path / generate.REPO_DIR
    spec = validated.read_spec(
        {p.relative_to(repo).as_posix(): p.read_bytes() for p in sorted(repo.rglob("*.yaml"))}
    )
    assert spec.diagnostics == []
    return spec


@pytest.mark.parametrize("seed", [1, 2])
def test_on_a_generated_fleet_no_pass_cuts_what_its_activations_do_not_use(tmp_path: Path, seed: int) -> None:
    # The repro (seed 1, 1%): 09:00, then 09:15 twice. Over a longer timeline, at every pass:
    # - a second pass at the same instant opens and closes nothing (what the first cut, it used);
    # - every lottery seed a pass publishes belongs to a reservation it activated at that instant;
    # - no waiting reservation is "short by 0", and none shows an ETA in the past.
    spec = _generated(tmp_path, seed)
    cluster = EmbeddedCluster(spec.inventory)
    state = FleetState()
    t0 = parse_time("2026-03-02T09:00:00Z")
    cut_any = False
    for minutes in (0, 15, 30, 45, 60, 90, 120):
        now = t0 + minutes * 60
        first = pipeline.run_pass(spec, cluster, state, now, render=False)
        again = pipeline.run_pass(spec, cluster, first.state, now, render=False)
        assert [(e.event, e.lease.run) for e in again.events] == [], minutes
        assert again.state.reservations == first.state.reservations, minutes
        assert again.runs == first.runs, minutes
        released = {
            k for k, r in first.state.reservations.items() if r.state == "Released" and r.ended == now
        }
        seeds = {
            e.reason[len("RandomPreempt(") : -1]
            for e in first.events
            if e.reason.startswith("RandomPreempt(")
        }
        assert seeds <= {seed_for(k, now) for k in released}, minutes
        cut_any = cut_any or any(e.event == "End" and e.reason.startswith(CUTS) for e in first.events)
        for key, res in first.state.reservations.items():
            if res.state == "Pending":
                assert res.reason != "cluster short by 0 GPUs in scope", (minutes, key)
                assert res.earliest_start is None or res.earliest_start > now, (minutes, key)
        state = first.state
    assert cut_any  # the timeline really exercised the resolver


def _contended(min_runtime: str) -> dict[str, Any]:
    # A holds 16 GPUs. a/x and b/y (8 each, fixed, cannot checkpoint) start at 09:00; c/z (8) arrives
    # at 09:05. Notice 15 minutes, until 12:00.
    return scenario(
        {"a": "org:a", "b": "org:b", "c": "org:c"}, [domain("A", 2)],
        [at(0, apply=[*(a_budget(n, f"org:{n}").envelope("h", 16).build() for n in ("a", "b", "c")),
                      a_run("a/x", "org:a").gpus(8).build(),
                      a_run("b/y", "org:b").gpus(8).build()]),
         at(5, apply=[a_run("c/z", "org:c").gpus(8).build()])],
        until="+180m", fleet={"reservations": {"minRuntime": min_runtime}},
    )  # fmt: skip


def test_without_min_runtime_equal_claims_cut_one_run_every_notice_period() -> None:
    # minRuntime 0: z is due at 09:20 and cuts x or y; the victim, requeued, is reserved at once and
    # due 15 minutes later, when it cuts in turn: a cut at 09:20, 09:35, ..., 11:50 — 11 by 12:00.
    out = play(_contended("0s"))
    cuts = sorted(
        {e["at"] for e in out["ledger"] if e["event"] == "End" and e["reason"].startswith("RandomPreempt")}
    )
    assert cuts == [stamp(20 + 15 * k) for k in range(11)]


def test_the_templates_min_runtime_of_two_hours_bounds_the_churn() -> None:
    # minRuntime 2h: x and y are protected until 11:00, so z's ETA is 11:00, when it cuts one of
    # them. The victim may cut the other (warned from 11:00, protected until 11:00) at 11:15; the
    # next victim must wait for z's protection (until 13:00). Two cuts by 12:00, each run having
    # run at least two hours.
    out = play(_contended("2h"))
    cuts = sorted(
        {e["at"] for e in out["ledger"] if e["event"] == "End" and e["reason"].startswith("RandomPreempt")}
    )
    assert cuts == [stamp(120), stamp(135)]
    template = (REPO / "fleet-repo-template" / "jobtree.yaml").read_text()
    assert "minRuntime: 2h" in template
