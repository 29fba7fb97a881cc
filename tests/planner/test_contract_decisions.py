"""Contract scenarios for issue "Decisions II" (§4.3, §4.5-§4.8), each worked out by hand first.

All-or-nothing activation, no run below its minimum, shrink by cover order, the infeasible form,
`after` failing on time, no shrink-to-nothing flap, honest window reasons, and a fixed point with
a zero notice period. Unless a test says otherwise a domain holds 8-GPU nodes and the notice
period is 15 minutes.
"""

from __future__ import annotations

from typing import Any

from planner.lottery import seed_for
from reconciler.passes import pipeline
from reconciler.passes.simulation import Simulation
from schemas.common import parse_time
from schemas.scenario import Scenario
from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import A32, at, ends, leases_of, play, stamp, starts


def _res(state: dict[str, Any], run: str) -> dict[str, Any]:
    res: dict[str, Any] = state["reservations"][run]
    return res


def _at(hours: int, minutes: int = 0) -> str:
    return f"2026-03-02T{9 + hours:02d}:{minutes:02d}:00Z"


# -- all-or-nothing activation ---------------------------------------------------------------------


def _three_and_one(min_runtime: str, steps: list[dict[str, Any]], until: str) -> dict[str, Any]:
    # The fleet: A is 3 nodes (24 GPUs). a1, a2, a3 (8 each, team a, cannot checkpoint)
    # start at 09:00; b1 (16, paid by team b's own envelope) arrives at 09:01, short by 16.
    runs = [a_run(f"a/a{i}", "org:a").gpus(8).build() for i in (1, 2, 3)]
    doc = scenario(
        {"a": "org:a", "b": "org:b"}, [domain("A", 3)],
        [at(0, apply=[a_budget("a", "org:a").envelope("h", 24).build(),
                      a_budget("b", "org:b").envelope("h", 16).build(), *runs]),
         at(1, apply=[a_run("b/b1", "org:b").gpus(16).build()]), *steps],
        until=until, fleet={"reservations": {"minRuntime": min_runtime}},
    )  # fmt: skip
    doc["spec"]["tick"] = "15m"
    return doc


def test_an_activation_cuts_only_what_together_clears_its_deficit_and_starts_on_it_at_once() -> None:
    # minRuntime 2h: b1 warns all three a-runs and its ETA is 11:00, when they have run 2 h. At
    # 11:00 A-n00 fails: a1 (on it, no spare) fails, 16 GPUs remain, held by a2 and a3. b1 is due:
    # one cut alone frees 8 of its 16, so its lottery cuts both, and b1 starts at 11:00 on exactly
    # what they freed. a2 and a3 are requeued, not restarted at 11:00.
    doc = _three_and_one(
        "2h", [at(60, checkpoint="waiting"), at(120, node={"name": "A-n00", "event": "Fail"}),
               at(120, checkpoint="activated")], "+130m",
    )  # fmt: skip
    out = play(doc)
    assert _res(out["checkpoints"]["waiting"], "b/b1")["spec"]["earliestStart"] == _at(2)
    seed = seed_for("b/b1", parse_time(_at(2)))
    cut = [e for e in ends(out, at=_at(2)) if e["reason"].startswith("RandomPreempt")]
    assert sorted(e["run"] for e in cut) == ["a/a2", "a/a3"]
    assert {e["reason"] for e in cut} == {f"RandomPreempt({seed})"}
    assert sum(e["gpus"] for e in starts(out, "b/b1", _at(2))) == 16
    assert sorted({n for e in starts(out, "b/b1", _at(2)) for n in e["nodes"]}) == sorted(
        {n for e in cut for n in e["nodes"]}
    )  # on exactly the slots its cuts freed
    assert starts(out, "a/a2", _at(2)) == starts(out, "a/a3", _at(2)) == []
    runs_now = out["checkpoints"]["activated"]["runs"]
    assert runs_now["a/a1"]["phase"] == "Failed" and runs_now["b/b1"]["phase"] == "Running"
    assert runs_now["a/a2"]["phase"] == runs_now["a/a3"]["phase"] == "Pending"


def test_no_activation_cuts_a_run_for_a_reservation_that_free_capacity_would_start() -> None:
    # minRuntime 0 (the design's churn: each victim keeps its place and cuts in turn). At 09:16 b1's
    # lottery cuts two a-runs (16) and b1 starts on them; both are requeued ahead of b1, warn it,
    # and are due at 09:31. At 09:31 the first of them activates; if its draw cuts b1, what the cut
    # freed beyond its 8 goes to the next in line that fits (the other requeued a-run) without
    # another cut: no reservation cuts for a run that free capacity would start. Through two hours:
    # every cut belongs to a reservation whose run started at that instant (by its seed), and no
    # run is both cut and started at one instant.
    out = play(_three_and_one("0s", [], "+2h"))
    instants = sorted({e["at"] for e in out["ledger"] if e["event"] == "End"})
    assert instants
    for instant in instants:
        cut = [e for e in ends(out, at=instant) if e["reason"].startswith("RandomPreempt")]
        started = {e["run"] for e in starts(out, at=instant)}
        assert not {e["run"] for e in cut} & started, instant
        seeds = {e["reason"] for e in cut}
        assert seeds <= {f"RandomPreempt({seed_for(r, parse_time(instant))})" for r in started}, instant
    assert {e["at"] for e in starts(out, "b/b1")} >= {stamp(16)}


def test_a_run_cut_whole_is_not_restarted_by_the_pass_that_cut_it_even_where_it_fits() -> None:
    # A is 2 nodes; B one node, empty. t's envelope pays only in A (cluster c1), u's anywhere.
    # u/v (8) and s/w (8) fill A; t/r (8) at +1m is short by 8 in A and warns both. At +16m its
    # lottery draws one of them; the victim fits on B (free, its funding reaches B) but was cut at
    # this instant: it is reserved ("it fits and starts at a later pass") and starts at the next
    # pass, +17m, on B.
    doc = scenario(
        {"t": "org:t", "u": "org:u", "s": "org:s"},
        [domain("A", 2, cluster="c1"), domain("B", 1, cluster="c2")],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8, selector={"cluster": "c1"}).build(),
                      a_budget("u", "org:u").envelope("h", 8, selector={"cluster": "c1"}).build(),
                      a_budget("s", "org:s").envelope("h", 8, selector={"cluster": "c1"}).build(),
                      a_run("u/v", "org:u").gpus(8).build(), a_run("s/w", "org:s").gpus(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build(),
                      a_budget("u", "org:u").envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 8).build()]),
         at(16, checkpoint="cut")],
        until="+17m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    cut = [e for e in ends(out, at=stamp(16)) if e["reason"].startswith("RandomPreempt")]
    assert len({e["run"] for e in cut}) == 1
    victim = cut[0]["run"]
    assert starts(out, victim, stamp(16)) == []
    state = out["checkpoints"]["cut"]
    assert state["runs"][victim]["phase"] == "Pending" and state["runs"]["t/r"]["phase"] == "Running"
    res = _res(state, victim)["status"]
    assert res["reason"] == "requeued by a cut at this pass; it fits and starts at a later pass"
    assert res["forecast"]["remedies"] == []
    assert [e["nodes"][0].split("#")[0] for e in starts(out, victim, stamp(17))] == ["B-n00"]


def test_a_spare_on_a_cordoned_node_frees_nothing_so_it_is_not_what_clears_a_deficit() -> None:
    # A is 2 nodes. u/x (4 + a 4-GPU spare) starts at +0: active on A-n00, spare on A-n01 (most
    # free). s/w (8) at +1m takes the other 4 + 4. t/r (4) at +2m is short by 4: dropping x's spare
    # clears it, so x alone is warned (+2m), ETA +17m. A-n01 is cordoned at +10m: a GPU freed
    # there takes no new work, so x's spare no longer counts; by +17m only x can have had its
    # notice, and its 4 Active GPUs on A-n00 still clear the deficit: the ETA and the conflict set
    # stay. At +17m x's spare is not dropped (that would buy nothing): the lottery's one
    # candidate, x, ends whole and r starts at once on the 4 it freed on A-n00. w is never cut.
    doc = scenario(
        {"t": "org:t", "u": "org:u", "s": "org:s"}, [domain("A", 2)],
        [at(0, apply=[*(a_budget(n, f"org:{n}").envelope("h", 16).build() for n in ("t", "u", "s")),
                      a_run("u/x", "org:u").gpus(4).spares(4).build()]),
         at(1, apply=[a_run("s/w", "org:s").gpus(8).build()]),
         at(2, apply=[a_run("t/r", "org:t").gpus(4).build()]),
         at(10, node={"name": "A-n01", "event": "Cordon"}), at(11, checkpoint="cordoned")],
        until="+18m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert [(e["role"], e["nodes"][0].split("#")[0]) for e in starts(out, "u/x")] == [
        ("Active", "A-n00"),
        ("Spare", "A-n01"),
    ]
    res = _res(out["checkpoints"]["cordoned"], "t/r")
    assert [(c["run"], c["since"]) for c in res["status"]["conflictSet"]] == [("u/x", stamp(2))]
    assert res["spec"]["earliestStart"] == stamp(17)
    seed = seed_for("t/r", parse_time(stamp(17)))
    assert {(e["role"], e["reason"]) for e in ends(out, "u/x")} == {
        ("Active", f"RandomPreempt({seed})"),
        ("Spare", f"RandomPreempt({seed})"),
    }
    assert ends(out, "s/w") == []
    assert [(e["at"], e["nodes"][0].split("#")[0]) for e in starts(out, "t/r")] == [(stamp(17), "A-n00")]


def test_with_a_zero_notice_period_a_pass_is_still_a_fixed_point() -> None:
    # noticePeriod 0s: t/r (32) arrives at +1m on a full A and is due at once; its conflict set is
    # warned within the pass and the activation cuts in the same pass. Planning again at +1m from
    # the pass's own output opens and closes nothing.
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_budget("u", "org:u").envelope("h", 32).build(),
                      a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(32).groups(8).build()])],
        until="+2m", fleet={"reservations": {"noticePeriod": "0s"}},
    )  # fmt: skip
    sim = Simulation(Scenario.model_validate(doc), doc)
    out = sim.play()
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(1)}
    assert {e["reason"] for e in ends(out, "u/x")} == {
        f"RandomPreempt({seed_for('t/r', parse_time(stamp(1)))})"
    }
    assert sim.spec_cache is not None
    again = pipeline.run_pass(sim.spec_cache, sim.cluster, sim.state, parse_time(stamp(1)), render=False)
    assert again.events == [] and again.moves == []
    assert again.state.reservations == sim.state.reservations


# -- no run below its minimum ----------------------------------------------------------------------


def test_a_run_is_never_started_on_part_of_its_width_where_its_held_funding_reaches() -> None:
    # A (3 x 8, cluster c0) is full with y/f (24). x's own envelope (24) pays only in B (3 x 4 = 12,
    # cluster c1); its parent p's envelope (16) pays anywhere. x/r (24 in groups of 4) at +1m is
    # funded but fits nowhere: its own funding reaches only 12 GPUs, so its scope is drawn over
    # all its funding: 3 groups in B (own), 3 in A (family), short 12 in A. At +16m the lottery
    # cuts y/f and x/r starts with all 24 GPUs, never with the 12 its own envelope reaches.
    doc = scenario(
        {"x": "org:p:x", "y": "org:y"}, [domain("A", 3, cluster="c0"), domain("B", 3, 4, cluster="c1")],
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 16).build(),
                      a_budget("x", "org:p:x", "org:p").envelope("h", 24, selector={"cluster": "c1"}).build(),
                      a_budget("y", "org:y").envelope("h", 24, selector={"cluster": "c0"}).build(),
                      a_run("y/f", "org:y").gpus(24).groups(8).build()]),
         at(1, apply=[a_run("x/r", "org:p:x").gpus(24).groups(4).build()]),
         at(2, checkpoint="reserved"), at(16, checkpoint="started")],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    res = _res(out["checkpoints"]["reserved"], "x/r")
    assert res["status"]["reason"] == "cluster short by 12 GPUs in scope"
    assert res["spec"]["intendedSlice"]["domains"] == ["west/c1/B", "west/c0/A"]
    assert out["checkpoints"]["reserved"]["runs"]["x/r"]["phase"] == "Pending"
    run = out["checkpoints"]["started"]["runs"]["x/r"]
    assert run["phase"] == "Running" and run["width"]["allocated"] == 24
    assert sum(e["gpus"] for e in starts(out, "x/r")) == 24


# -- shrink order -----------------------------------------------------------------------------------


def _desired(run: str, gpus: int, minute: int) -> dict[str, Any]:
    ns, name = run.split("/")
    merge = {"spec": {"malleable": {"desiredTotalGPUs": gpus}}}
    return at(minute, patch={"kind": "Run", "namespace": ns, "name": name, "merge": merge})


def test_lowering_desired_closes_the_group_its_parent_pays_for_before_its_own() -> None:
    # t (child of p) owns 8; p lends its family 8. t/a (8) takes t's own envelope at +0. t/m
    # (malleable 8..16, step 8) at +1m starts at 8 paid by p (family: group 0). t/a succeeds at
    # +2m; at the +3m tick t/m grows by group 1, paid by t's own envelope. At +5m desired drops
    # to 8: the group funded furthest in cover order goes, group 0 (family), although group 1
    # has the higher index; t/m keeps group 1 on its own envelope and p's envelope is idle again.
    doc = scenario(
        {"t": "org:p:t"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 8).build(),
                      a_budget("t", "org:p:t", "org:p").envelope("h", 8).build(),
                      a_run("t/a", "org:p:t").gpus(8).build()]),
         at(1, apply=[a_run("t/m", "org:p:t").gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(2, workload={"run": "t/a", "event": "Succeed"}),
         at(4, checkpoint="grown"), _desired("t/m", 8, 5)],
        until="+6m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    grown = {
        x["spec"]["group"]: x["spec"]["payer"]["budget"]
        for x in leases_of(out["checkpoints"]["grown"], "t/m")
    }
    assert grown == {0: "p", 1: "t"}
    shrunk = ends(out, "t/m", stamp(5))
    assert [(e["group"], e["payer"]["budget"], e["reason"]) for e in shrunk] == [(0, "p", "Shrink")]
    final = out["final"]
    assert [x["spec"]["group"] for x in leases_of(final, "t/m")] == [1]
    assert final["runs"]["t/m"]["message"] == "shrunk to 8 GPUs"
    assert final["runs"]["t/m"]["funding"]["ownedGPUs"] == 8


def test_desired_lowered_to_the_open_width_after_a_group_completed_never_shrinks_to_nothing() -> None:
    # t/m (malleable 8..16, step 8) runs groups 0 and 1; group 0 succeeds at +2m (8 GPUs done,
    # counted toward its width). At +3m desired is lowered to 8, the width it has open: closing
    # group 1 would leave nothing open, so nothing closes, and the run keeps working at every
    # later tick (no shrink, re-admission, shrink flap).
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_run("t/m", "org:t").gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(2, workload={"run": "t/m", "event": "Succeed", "group": 0}), _desired("t/m", 8, 3)],
        until="+15m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert [(e["group"], e["reason"]) for e in ends(out, "t/m")] == [(0, "Completed")]
    assert {e["at"] for e in starts(out, "t/m")} == {stamp(0)}
    run = out["final"]["runs"]["t/m"]
    assert run["phase"] == "Running" and run["width"]["allocated"] == 8


# -- the infeasible form ----------------------------------------------------------------------------


def test_runs_no_fleet_their_funding_reaches_could_hold_say_which_constraint_and_hold_nothing() -> None:
    # A is 8 nodes x 8 H100-80GB (64 GPUs); t owns 128 H100-80GB and 32 A100 (no A100 node exists).
    # t/typo asks for "H100", t/a100 for A100, t/huge for 100 H100-80GB: none could ever start,
    # whatever is cut. Each gets §4.5's infeasible form: the constraint named, its whole need as
    # deficit, no earliestStart (confidence unknown), no remedies, nothing held. t/small (8),
    # submitted after them, starts at once.
    doc = scenario(
        {"t": "org:t"}, [domain("A", 8)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 128).envelope("a", 32, flavor="A100").build(),
                      a_run("t/typo", "org:t", "H100").gpus(8).build(),
                      a_run("t/a100", "org:t", "A100").gpus(8).build(),
                      a_run("t/huge", "org:t").gpus(100).build()]),
         at(1, apply=[a_run("t/small", "org:t").gpus(8).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    want = {
        "t/typo": ("no GPU of flavor H100 in the fleet", 8),
        "t/a100": ("no GPU of flavor A100 in the fleet", 8),
        "t/huge": ("needs 100 GPUs; its funding reaches 64", 100),
    }
    for run, (reason, deficit) in want.items():
        res = _res(out["final"], run)
        assert res["status"]["reason"] == reason, run
        assert res["status"]["forecast"]["deficitGPUs"] == deficit, run
        assert res["spec"]["earliestStart"] is None and res["status"]["forecast"]["confidence"] == "unknown"
        assert res["status"]["forecast"]["remedies"] == [] and res["status"]["conflictSet"] == []
        assert res["spec"]["intendedSlice"] == {"domains": [], "nodes": []}
        assert out["final"]["runs"][run]["message"] == f"cannot start: {reason}"
    assert out["final"]["runs"]["t/small"]["phase"] == "Running"


def test_a_run_out_of_reach_is_infeasible_even_when_its_funding_is_short_too() -> None:
    # 4096 GB200 on a fleet of 144 (two 72-GPU racks), t funds 256: the funding shortfall is real
    # but no funding could place it: the reason is the reach, with no funding advice.
    doc = scenario(
        {"t": "org:t"}, [domain("R1", 18, 4, "GB200"), domain("R2", 18, 4, "GB200")],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 256, flavor="GB200").build(),
                      a_run("t/big", "org:t", "GB200").gpus(4096).build()])],
    )  # fmt: skip
    res = _res(play(doc)["final"], "t/big")
    assert res["status"]["reason"] == "needs 4096 GPUs; its funding reaches 144"
    assert res["status"]["forecast"]["remedies"] == []


# -- after, on time --------------------------------------------------------------------------------


def test_a_run_waiting_after_a_run_a_node_failure_failed_fails_in_the_same_pass() -> None:
    # u/a (8, cannot checkpoint) runs on A-n00; u/b waits after a, u/c after b. A-n00 fails at +5m:
    # a fails (no spare), and so do b and c, at +5m, not one pass later per link of the chain.
    doc = scenario(
        {"u": "org:u"}, A32,
        [at(0, apply=[a_budget("u", "org:u").envelope("h", 32).build(), a_run("u/a", "org:u").gpus(8).build(),
                      a_run("u/b", "org:u").gpus(8).after("a").build(),
                      a_run("u/c", "org:u").gpus(8).after("b").build()]),
         at(5, node={"name": "A-n00", "event": "Fail"}), at(5, checkpoint="failed")],
        until="+6m",
    )  # fmt: skip
    runs = play(doc)["checkpoints"]["failed"]["runs"]
    assert runs["u/a"]["phase"] == "Failed"
    assert (runs["u/b"]["phase"], runs["u/b"]["message"]) == ("Failed", "dependency u/a failed")
    assert (runs["u/c"]["phase"], runs["u/c"]["message"]) == ("Failed", "dependency u/b failed")


# -- the right words --------------------------------------------------------------------------------


def test_a_window_whose_selector_matches_no_node_is_never_the_reason_nor_the_eta() -> None:
    # t owns 8 now and 16 more from 2027, but the 2027 envelope selects region "nowhere": it can
    # pay for no GPU. t/r (16) is short of headroom by 8 with nothing known to fund it: no ETA,
    # confidence unknown, and no "Wait for the budget window to open" advice. Likewise t/b, which
    # may borrow 4 from s: the borrow limit binds, and its ETA is not window-aligned.
    window = "2027-01-01T00:00:00Z"
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8)
                      .envelope("later", 16, start=window, selector={"region": "nowhere"}).build(),
                      a_budget("s", "org:s").envelope("h", 64, lending={"allow": True, "to": ["*"]}).build(),
                      a_run("t/r", "org:t").gpus(16).build(),
                      a_run("t/b", "org:t").gpus(16).borrowing("org:s", cap=4).build()])],
    )  # fmt: skip
    out = play(doc)
    r = _res(out["final"], "t/r")
    assert r["status"]["reason"] == "budget headroom short by 8 GPUs"
    assert r["status"]["forecast"]["remedies"] == [
        "Wait for budget headroom, add sponsors, or shrink the run"
    ]
    assert (r["spec"]["earliestStart"], r["status"]["forecast"]["confidence"]) == (None, "unknown")
    b = _res(out["final"], "t/b")
    assert b["status"]["reason"] == "borrow limit of 4 GPUs exhausted for requested width"
    assert b["status"]["forecast"]["confidence"] != "window-aligned"
    assert "Wait for the budget window to open" not in b["status"]["forecast"]["remedies"]


def test_a_run_funded_only_where_it_does_not_fit_is_short_of_headroom_not_of_capacity() -> None:
    # t pays 4 in A (cluster c1) and 4 in B (cluster c2), both empty 8-GPU domains. t/r (8, one
    # group of 8) is funded in all (4 + 4) but no one domain's funding pays its group: a funding
    # shortfall of 4 where it would go, with the headroom advice and no ETA, never "cluster short
    # by 0 GPUs in scope".
    doc = scenario(
        {"t": "org:t"}, [domain("A", 1, cluster="c1"), domain("B", 1, cluster="c2")],
        [at(0, apply=[a_budget("t", "org:t").envelope("a", 4, selector={"cluster": "c1"})
                      .envelope("b", 4, selector={"cluster": "c2"}).build(),
                      a_run("t/r", "org:t").gpus(8).groups(8).build()])],
    )  # fmt: skip
    out = play(doc)
    res = _res(out["final"], "t/r")
    assert res["status"]["reason"] == "budget headroom short by 4 GPUs"
    assert res["status"]["forecast"]["deficitGPUs"] == 4
    assert res["status"]["forecast"]["remedies"] == [
        "Wait for budget headroom, add sponsors, or shrink the run"
    ]
    assert (res["spec"]["earliestStart"], res["status"]["forecast"]["confidence"]) == (None, "unknown")
    assert out["final"]["runs"]["t/r"]["message"] == "reserved: budget headroom short by 4 GPUs"
