"""Contract scenarios for §4.6 activation and the resolver: fixed cut order, lottery, notice, minRuntime.

The seed is 0x + the first 16 hex digits of SHA-256 of "<ns>/<name>|<activation instant>"; the
draw picks owners[H(seed|k|owner) mod n] then groups[H(seed|k|group) mod m], H = first 16 hex
digits of SHA-256 read as an integer (the public lottery test reads `owner`/`group` literally).
"""

from __future__ import annotations

import hashlib

from tests.support.builders import a_budget, a_run, scenario
from tests.support.scenarios import A32, at, bad_closure_reasons, ends, open_leases, play, stamp, starts

TENANTS = {"t": "org:t", "u": "org:u", "s": "org:s", "v": "org:v"}
BUDGETS = [a_budget(ns, owner).envelope("h", 64).build() for ns, owner in sorted(TENANTS.items())]
NOT_T = [b for b in BUDGETS if b["metadata"]["name"] != "t"]


def seed_of(key: str, instant: str) -> str:
    return "0x" + hashlib.sha256(f"{key}|{instant}".encode()).hexdigest()[:16]


def h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)


def test_the_resolver_reclaims_unfunded_then_drops_spares_then_shrinks_each_only_while_short() -> None:
    # A (32): t/unf 8 (unfunded after t's cut to 0), s/sp 4 + 1 spare, u/m 16 malleable (min 8);
    # 3 free. v/r (16) reserved at +2m, due +17m with a deficit of 13: reclaim t/unf (8 → short 5),
    # drop s/sp's spare (1 → short 4), shrink u/m's group 1 (8 → done). No lottery.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(), *NOT_T,
                      a_run("t/unf", "org:t").gpus(8).build(),
                      a_run("s/sp", "org:s").gpus(4).spares(1).build(),
                      a_run("u/m", "org:u").gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(1, apply=[a_budget("t", "org:t").envelope("h", 0).build()]),
         at(2, apply=[a_run("v/r", "org:v").gpus(16).groups(8).build()])],
        until="+18m",
    )  # fmt: skip
    out = play(doc)
    cut = {(e["run"], e["group"], e["role"], e["reason"]) for e in ends(out, at=stamp(17))}
    assert cut == {
        ("t/unf", 0, "Active", "ReclaimUnfunded"),
        ("s/sp", 0, "Spare", "DropSpare"),
        ("u/m", 1, "Active", "Shrink"),
    }
    runs = out["final"]["runs"]
    assert runs["v/r"]["phase"] == "Running" and runs["v/r"]["width"]["allocated"] == 16
    assert runs["s/sp"]["phase"] == "Running" and runs["u/m"]["width"]["allocated"] == 8
    assert runs["t/unf"]["phase"] == "Pending"


def test_dropping_spares_is_enough_when_it_clears_the_deficit() -> None:
    # A: u/x 16 in 2 groups with 4 spares each (24 held) and s/y 8: full. t/r (8) due at +16m:
    # dropping both spares frees 8 → r starts; x keeps training at 16; y is never in the conflict set
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(16).groups(8).spares(4).build(),
                      a_run("s/y", "org:s").gpus(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()]), at(2, checkpoint="warned")],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    warned = out["checkpoints"]["warned"]
    assert warned["reservations"]["t/r"]["status"]["forecast"]["remedies"] == [
        "Drop spares in scope",
        "Run fair lottery if deficit remains",
    ]
    assert [c["run"] for c in warned["reservations"]["t/r"]["status"]["conflictSet"]] == ["u/x"]
    assert warned["runs"]["u/x"]["conflicts"][0]["probability"] == 1.0
    assert "conflicts" not in warned["runs"]["s/y"]
    cut = ends(out, at=stamp(16))
    assert {(e["run"], e["role"], e["reason"]) for e in cut} == {("u/x", "Spare", "DropSpare")}
    assert sum(e["gpus"] for e in cut) == 8
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"
    assert (
        out["final"]["runs"]["u/x"]["phase"] == "Running"
        and out["final"]["runs"]["u/x"]["width"]["allocated"] == 16
    )


def test_shrink_takes_the_lowest_ranked_malleable_run_first() -> None:
    # u/m1 (+0) and s/m2 (+1m) are 16 each, min 8: full. t/r (8) due +17m: reverse ranking puts
    # m2's group 1 first; m1 is untouched.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/m1", "org:u").gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(1, apply=[a_run("s/m2", "org:s").gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(2, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+18m",
    )  # fmt: skip
    out = play(doc)
    assert [(e["run"], e["group"], e["reason"]) for e in ends(out)] == [("s/m2", 1, "Shrink")]
    assert out["final"]["runs"]["s/m2"]["message"] == "shrunk to 8 GPUs"
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"


def test_a_malleable_run_loses_only_its_unfunded_group_to_reclaim() -> None:
    # t/m (16, min 8) is cut to 8 of budget at +1m: group 1 unfunded. u/x 16 fills the rest.
    # s/r (8) due +17m: reclaim t/m's group 1 only; t/m keeps training at its minimum.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("t/m", "org:t").gpus(16).groups(8).malleable(8, 16, 8).build(),
                      a_run("u/x", "org:u").gpus(16).groups(8).build()]),
         at(1, apply=[a_budget("t", "org:t").envelope("h", 8).build()]),
         at(2, apply=[a_run("s/r", "org:s").gpus(8).build()])],
        until="+18m",
    )  # fmt: skip
    out = play(doc)
    assert [(e["run"], e["group"], e["reason"]) for e in ends(out)] == [("t/m", 1, "ReclaimUnfunded")]
    assert out["final"]["runs"]["t/m"]["phase"] == "Running"
    assert out["final"]["runs"]["t/m"]["funding"]["unfundedGPUs"] == 0


def test_the_lottery_draw_can_be_replayed_from_the_published_seed() -> None:
    # u/x and s/y (16 fixed each, 2 groups) fill A. t/r (8) due at +16m: no unfunded, spare or
    # elastic capacity → lottery. Draw 0: owners [org:s, org:u], then that owner's groups sorted by
    # (ns/name, group); the fixed-width victim loses both groups, which clears the deficit.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("s/y", "org:s").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    seed = seed_of("t/r", stamp(16))
    assert out["final"]["reservations"]["t/r"]["status"]["seed"] == seed
    owners = ["org:s", "org:u"]
    owner = owners[h(f"{seed}|0|owner") % 2]
    victim = {"org:s": "s/y", "org:u": "u/x"}[owner]
    cut = ends(out, at=stamp(16))
    assert {(e["run"], e["reason"]) for e in cut} == {(victim, f"RandomPreempt({seed})")}
    assert sorted(e["group"] for e in cut) == [0, 1]
    assert out["final"]["runs"][victim]["phase"] == "Pending"
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"


def test_a_lottery_victim_is_requeued_keeping_its_place_in_line() -> None:
    # u/x (32 fixed) fills A. t/r (16) arrives +1m, s/w (16) +2m. At +16m t/r's lottery can only
    # pick x: all of x ends, r starts on 16. x is Pending again with its +0 place: w (behind x)
    # cannot backfill the 16 free GPUs because that would raise x's deficit. r succeeds at +30m:
    # x (first in line) restarts, w still waits.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(2, apply=[a_run("s/w", "org:s").gpus(16).groups(8).build()]),
         at(20, checkpoint="after-draw"),
         at(30, workload={"run": "t/r", "event": "Succeed"})],
        until="+31m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    seed = seed_of("t/r", stamp(16))
    assert {e["reason"] for e in ends(out, "u/x", stamp(16))} == {f"RandomPreempt({seed})"}
    mid = out["checkpoints"]["after-draw"]["runs"]
    assert mid["u/x"]["phase"] == "Pending" and mid["s/w"]["phase"] == "Pending"
    assert starts(out, "s/w") == []
    assert {e["at"] for e in starts(out, "u/x")} == {stamp(0), stamp(30)}


def test_a_run_started_in_the_same_pass_by_another_reservation_is_never_cut() -> None:
    # u/x (32 fixed) fills A. t/r1 (32) and t/r2 (16) arrive together at +1m: both due +16m, r1
    # first by name. r1's lottery ends x and r1 takes all 32; r2 may not cut r1 (it started this
    # pass, never in r2's conflict set for the notice period): r2 stays Pending and r1 runs on.
    # x, requeued, keeps its place in line ahead of r2 (§4.6) and is reserved at once: it warns r1
    # now (+16m) and may cut it at +31m, and r1 is in x's conflict set. r2 could only cut x's run
    # once that has run and been warned (+46m), but x's activation requeues r1, which ranks ahead of
    # r2 and would take those GPUs back first: nothing known makes r2 startable, so its ETA is
    # null (an ETA of +46m would recede at every activation of the two, §4.5).
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r1", "org:t").gpus(32).groups(8).build(),
                      a_run("t/r2", "org:t").gpus(16).groups(8).build()]),
         at(20, checkpoint="after")],
        until="+25m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/r1")} == {stamp(16)}
    assert ends(out, "t/r1") == []
    after = out["checkpoints"]["after"]
    assert after["runs"]["t/r2"]["phase"] == "Pending"
    assert {c["run"] for c in after["reservations"]["u/x"]["status"]["conflictSet"]} == {"t/r1"}
    assert after["reservations"]["u/x"]["spec"]["earliestStart"] == stamp(31)
    assert after["reservations"]["t/r2"]["spec"]["earliestStart"] is None
    assert after["reservations"]["t/r2"]["status"]["forecast"]["confidence"] == "unknown"


def test_a_run_that_joined_a_conflict_set_later_gets_its_full_notice() -> None:
    # u/x (32 fixed). t/r1 (32) at +1m (due +16m), s/r2 (16) at +2m (due +17m). At +16m r1 ends x
    # and starts. At +17m r2 is due, but r1 has been in its conflict set for 1 minute only: r2
    # stays Pending and nothing is cut before +32m.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r1", "org:t").gpus(32).groups(8).build()]),
         at(2, apply=[a_run("s/r2", "org:s").gpus(16).groups(8).build()]),
         at(25, checkpoint="after")],
        until="+30m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/r1")} == {stamp(16)}
    assert ends(out, "t/r1") == []
    assert out["checkpoints"]["after"]["runs"]["s/r2"]["phase"] == "Pending"


def test_min_runtime_protects_a_fresh_run_from_cuts_only_until_it_has_run_that_long() -> None:
    # minRuntime 30m: u/x (32 fixed) started at +0. t/r (16) is due at +16m and cannot cut x then.
    # It stays Pending and is re-checked every pass; x may be cut from +30m on. Ambiguous (so the
    # window is wide): whether x is in r's conflict set from the start (cut at +30m) or joins when
    # its protection ends and then gets its 15-minute notice (cut at +45m or +46m).
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(20, checkpoint="protected")],
        until="+50m", fleet={"reservations": {"minRuntime": "30m"}},
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert out["checkpoints"]["protected"]["runs"]["t/r"]["phase"] == "Pending"
    cut = ends(out, "u/x")
    assert cut, "x is cut once its minimum runtime has passed"
    assert stamp(30) <= min(e["at"] for e in cut) <= stamp(46)
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"


def test_owning_the_capacity_buys_no_priority_in_the_lottery() -> None:
    # the reservation's owner t also owns the only running run (t/x, 32 fixed): t/x is the only
    # candidate and is cut like anyone else's run
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("t/x", "org:t").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("u/r", "org:u").gpus(8).build()])],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    seed = seed_of("u/r", stamp(16))
    assert {e["reason"] for e in ends(out, "t/x")} == {f"RandomPreempt({seed})"}
    assert out["final"]["runs"]["u/r"]["phase"] == "Running"
    assert bad_closure_reasons(out) == []
    assert open_leases(out["final"], "t/x") == []


def test_a_reservation_cuts_nobody_while_its_noticed_runs_cannot_clear_the_deficit() -> None:
    # u/x (16) and s/z (8) run; s/y (16, after z, submitted at +0) waits. t/r (32) at +1m: short
    # by 24, conflict set {x, z}, ETA +16m. At +5m z succeeds and y (ahead of r in line) starts: r
    # is short by 32 and y joins its conflict set; x alone cannot clear 32, so the forecast moves
    # the ETA to +20m, when y has had its notice too: nothing is due at +16m and nobody is cut. At
    # +20m both are drawn and r starts. (The ETA keeps the resolver from ever facing a member
    # without its notice here; test_promises reaches the resolver's own check directly.)
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("s/z", "org:s").gpus(8).build(),
                      a_run("s/y", "org:s").gpus(16).groups(8).after("z").build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(32).groups(8).build()]),
         at(5, workload={"run": "s/z", "event": "Succeed"}), at(17, checkpoint="due")],
        until="+21m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert {e["at"] for e in starts(out, "s/y")} == {stamp(5)}
    due = out["checkpoints"]["due"]
    assert due["runs"]["t/r"]["phase"] == "Pending"
    assert {c["run"] for c in due["reservations"]["t/r"]["status"]["conflictSet"]} == {"u/x", "s/y"}
    assert due["reservations"]["t/r"]["spec"]["earliestStart"] == stamp(20)
    cut = [e for e in ends(out) if e["reason"] != "Completed"]
    assert {e["at"] for e in cut} == {stamp(20)}
    assert {e["run"] for e in cut} == {"u/x", "s/y"}
    assert {e["reason"] for e in cut} == {f"RandomPreempt({seed_of('t/r', stamp(20))})"}
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"


def test_a_checkpointed_run_requeued_by_a_failure_keeps_its_place_in_line() -> None:
    # t/j (16, checkpointed) and u/x (16) fill A; s/w (8) is reserved at +1m. A-n00 fails at +5m:
    # j has no spare and is requeued with its +0 place; 8 GPUs are free but j needs 16, and w
    # (behind j) may not take them since that would raise j's deficit
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("t/j", "org:t").gpus(16).groups(8).checkpointed().build(),
                      a_run("u/x", "org:u").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("s/w", "org:s").gpus(8).build()]),
         at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+10m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert out["final"]["runs"]["t/j"]["phase"] == "Pending"
    assert starts(out, "s/w") == []


NO_LOTTERY = {"reservations": {"lottery": False}}


def test_without_the_lottery_structural_cuts_still_clear_a_deficit_and_no_lottery_is_offered() -> None:
    # As the spares case above, on a fleet with `reservations.lottery: false`: dropping u/x's two
    # spares (8) clears t/r's deficit at +16m; the remedies do not offer a lottery that cannot run.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(16).groups(8).spares(4).build(),
                      a_run("s/y", "org:s").gpus(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()]), at(2, checkpoint="warned")],
        until="+17m", fleet=NO_LOTTERY,
    )  # fmt: skip
    out = play(doc)
    forecast = out["checkpoints"]["warned"]["reservations"]["t/r"]["status"]["forecast"]
    assert forecast["remedies"] == ["Drop spares in scope"]
    assert {(e["run"], e["role"], e["reason"]) for e in ends(out, at=stamp(16))} == {
        ("u/x", "Spare", "DropSpare")
    }
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"


def test_without_the_lottery_a_deficit_only_a_draw_could_clear_waits_for_capacity_and_cuts_nobody() -> None:
    # u/x and s/y (16 fixed each) fill A; t/r (8) arrives at +1m. With the lottery the draw at +16m
    # ends one of them (above). Without it nothing structural can free a GPU: t/r has no ETA and no
    # conflict set, nobody is warned or cut, and it starts when s/y succeeds at +40m.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("s/y", "org:s").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()]), at(20, checkpoint="waiting"),
         at(40, workload={"run": "s/y", "event": "Succeed"})],
        until="+41m", fleet=NO_LOTTERY,
    )  # fmt: skip
    out = play(doc)
    waiting = out["checkpoints"]["waiting"]
    status = waiting["reservations"]["t/r"]["status"]
    assert status.get("earliestStart") is None
    assert status.get("conflictSet", []) == []
    assert "conflicts" not in waiting["runs"]["u/x"] and "conflicts" not in waiting["runs"]["s/y"]
    assert [e for e in ends(out) if e["reason"] != "Completed"] == []
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(40)}
    assert out["final"]["runs"]["u/x"]["phase"] == "Running"
