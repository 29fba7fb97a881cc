"""Contract scenarios at the seams of the rules: windows meeting reservations, recall meeting the
resolver, the lottery's owner list and repeated draws, scope limits, retention, status fields.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import A32, at, ends, open_leases, play, stamp, starts

LOTTERY = "Run fair lottery if deficit remains"


def seed_of(key: str, instant: str) -> str:
    return "0x" + hashlib.sha256(f"{key}|{instant}".encode()).hexdigest()[:16]


def h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)


def _teams(*names: str) -> dict[str, str]:
    return {n: f"org:{n}" for n in names}


def _budgets(*names: str, gpus: int = 64, **fields: Any) -> list[dict[str, Any]]:
    return [a_budget(n, f"org:{n}").envelope("h", gpus, **fields).build() for n in names]


# ------------------------------------------------------------------------ windows × reservations


def test_a_window_aligned_reservation_cuts_at_its_eta_after_giving_notice_in_advance() -> None:
    # u/x (32 fixed) fills A. t's envelope opens at +30m; t/r (16) is reserved at +0 for 09:30:10.
    # Under the forecast, activation must cut x (nothing else to reclaim, drop or shrink), so x is
    # in the conflict set from +0 and has had its 15 minutes by 09:30:10: the lottery (only x)
    # ends x then and r starts (seeds, worked example 6: "At midnight, activation runs structural
    # cuts (if needed), starts Leases").
    doc = scenario(
        _teams("t", "u"), A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32, start=stamp(30)).build(), *_budgets("u"),
                      a_run("u/x", "org:u").gpus(32).groups(8).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(1, checkpoint="warned")],
        until="+50m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    warned = out["checkpoints"]["warned"]
    assert warned["reservations"]["t/r"]["spec"]["earliestStart"] == stamp(30, 10)
    assert [c["reservation"] for c in warned["runs"]["u/x"].get("conflicts", [])] == ["t/r"]
    seed = seed_of("t/r", stamp(30, 10))
    assert {(e["at"], e["reason"]) for e in ends(out, "u/x")} == {(stamp(30, 10), f"RandomPreempt({seed})")}
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(30, 10)}


def test_a_new_window_moves_the_reservations_eta() -> None:
    # window at +30m → ETA 09:30:10. At +5m the budget moves the window to +40m: the forecast
    # itself changed, so the ETA moves to 09:40:10; the run starts when that window opens
    def budget(start: str) -> dict[str, Any]:
        return a_budget("t", "org:t").envelope("h", 16, start=start).build()

    doc = scenario(
        _teams("t"), A32,
        [at(0, apply=[budget(stamp(30)), a_run("t/r", "org:t").gpus(8).build()]),
         at(1, checkpoint="first"), at(5, apply=[budget(stamp(40))]), at(6, checkpoint="moved")],
        until="+41m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["first"]["reservations"]["t/r"]["spec"]["earliestStart"] == stamp(30, 10)
    moved = out["checkpoints"]["moved"]["reservations"]["t/r"]
    assert moved["spec"]["earliestStart"] == stamp(40, 10)
    assert moved["status"]["reason"] == f"budget window opens at {stamp(40)}"
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(40)}


def test_a_window_closing_on_running_work_makes_it_the_first_capacity_reclaimed() -> None:
    # A: t/r (16, t's window ends +10m) and u/x (16), both fixed. v/r (16) reserved at +2m, due
    # +17m. At +10m t/r turns unfunded; at +17m it is reclaimed (ReclaimUnfunded) and x is spared.
    doc = scenario(
        _teams("t", "u", "v"), A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, end=stamp(10)).build(), *_budgets("u", "v"),
                      a_run("t/r", "org:t").gpus(16).groups(8).build(),
                      a_run("u/x", "org:u").gpus(16).groups(8).build()]),
         at(2, apply=[a_run("v/r", "org:v").gpus(16).groups(8).build()])],
        until="+18m",
    )  # fmt: skip
    out = play(doc)
    assert {(e["run"], e["reason"]) for e in ends(out)} == {("t/r", "ReclaimUnfunded")}
    assert out["final"]["runs"]["v/r"]["phase"] == "Running"
    assert out["final"]["runs"]["u/x"]["phase"] == "Running"


def test_a_reservation_whose_window_closes_before_its_eta_becomes_a_funding_shortfall_and_cuts_nobody() -> (
    None
):
    # u/x (32) fills A. t/r (16) is short of capacity at +1m (conflict set: x). t's only envelope
    # closes at +10m: now it is short of budget, which never cuts anyone: at its ETA (+16m)
    # nothing ends, and x is no longer warned.
    doc = scenario(
        _teams("t", "u"), A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32, end=stamp(10)).build(), *_budgets("u"),
                      a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(11, checkpoint="closed")],
        until="+20m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    closed = out["checkpoints"]["closed"]
    assert closed["reservations"]["t/r"]["status"]["reason"].startswith("budget headroom short by ")
    assert "conflicts" not in closed["runs"]["u/x"]
    assert ends(out) == []
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending"


# -------------------------------------------------------------------------- recall × resolver


def test_an_owner_recalling_its_envelope_reclaims_family_claims_before_anything_else() -> None:
    # c owns nothing; c/m (32, malleable min 8) runs on its parent p's 32 and fills A. p's own 16
    # arrives at +1m: family claims on p's envelope are recallable, so p/own is funded and only
    # short of capacity. At +16m the recalled claims (c/m's groups 3 and 2, lowest-ranked first)
    # are reclaimed as unfunded capacity: no shrink, no lottery; c/m keeps 16.
    doc = scenario(
        {"c": "org:p:c", "p": "org:p"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 32).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 0).build(),
                      a_run("c/m", "org:p:c").gpus(32).groups(8).malleable(8, 32, 8).build()]),
         at(1, apply=[a_run("p/own", "org:p").gpus(16).groups(8).build()])],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    assert {(e["run"], e["group"], e["reason"]) for e in ends(out)} == {
        ("c/m", 3, "ReclaimUnfunded"),
        ("c/m", 2, "ReclaimUnfunded"),
    }
    assert out["final"]["runs"]["p/own"]["phase"] == "Running"
    assert out["final"]["runs"]["c/m"]["width"]["allocated"] == 16


def test_a_lender_short_of_its_own_budget_never_cuts_its_borrower() -> None:
    # s (16) lent 8 to t/r; s's own 16-GPU run is short of budget by 8 and stays so past its ETA:
    # the loan is never recalled and nothing ends
    doc = scenario(
        _teams("t", "s"), A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 16, lending={"allow": True, "to": ["*"]}).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).borrowing("org:s").build()]),
         at(1, apply=[a_run("s/own", "org:s").gpus(16).groups(8).build()])],
        until="+20m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert ends(out) == []
    assert out["final"]["runs"]["s/own"]["phase"] == "Pending"
    assert out["final"]["runs"]["t/r"]["funding"]["sponsors"] == [{"owner": "org:s", "gpus": 8}]


def test_only_the_lowest_ranked_unfunded_run_is_reclaimed_when_that_clears_the_deficit() -> None:
    # t/u1 (+0) and t/u2 (+1m), 8 each, both unfunded after t's cut to 0; u/x 16 fills A. v/r (8)
    # due at +18m: u2 (submitted later, lower ranked) is reclaimed; u1 keeps running unfunded.
    doc = scenario(
        _teams("t", "u", "v"), A32,
        [at(0, apply=[*_budgets("t", "u", "v"), a_run("t/u1", "org:t").gpus(8).build(),
                      a_run("u/x", "org:u").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/u2", "org:t").gpus(8).build()]),
         at(2, apply=[a_budget("t", "org:t").envelope("h", 0).build()]),
         at(3, apply=[a_run("v/r", "org:v").gpus(8).build()])],
        until="+19m",
    )  # fmt: skip
    out = play(doc)
    assert [(e["run"], e["reason"]) for e in ends(out)] == [("t/u2", "ReclaimUnfunded")]
    assert out["final"]["runs"]["t/u1"]["phase"] == "Running"


def test_spares_outside_the_reservations_scope_are_neither_offered_nor_dropped() -> None:
    # A (16): u/x 16 fixed. B (16): w/sp 8 + 8 spare. t/r (8) may only use A: its remedies offer
    # only the lottery, and at +16m x is drawn while w's spare is left alone
    doc = scenario(
        _teams("t", "u", "w"), [domain("A", 2), domain("B", 2)],
        [at(0, apply=[*_budgets("t", "u", selector={"fabric.domain": "A"}), *_budgets("w", selector={"fabric.domain": "B"}),
                      a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("w/sp", "org:w").gpus(8).spares(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()]), at(2, checkpoint="reserved")],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["reserved"]["reservations"]["t/r"]["status"]["forecast"]["remedies"] == [
        LOTTERY
    ]
    assert {e["run"] for e in ends(out)} == {"u/x"}
    assert len(open_leases(out["final"], "w/sp", "Spare")) == 1


# ------------------------------------------------------------------------------------ lottery


def test_lottery_owners_are_the_owners_of_the_runs_not_the_payers() -> None:
    # z/x (owner org:z, all 16 paid by sponsor org:a) and m/y (owner org:m, 16) fill A. The draw's
    # owner list is [org:m, org:z]; a payer-based list would be [org:a, org:m] (reversed victims).
    doc = scenario(
        {"z": "org:z", "m": "org:m", "t": "org:t"}, A32,
        [at(0, apply=[a_budget("z", "org:z").envelope("h", 0).build(),
                      a_budget("a", "org:a").envelope("h", 16, lending={"allow": True, "to": ["*"]}).build(),
                      *_budgets("m", "t"),
                      a_run("z/x", "org:z").gpus(16).groups(8).borrowing("org:a").build(),
                      a_run("m/y", "org:m").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    seed = seed_of("t/r", stamp(16))
    victim = ["m/y", "z/x"][h(f"{seed}|0|owner") % 2]
    assert {e["run"] for e in ends(out)} == {victim}


def test_the_lottery_draws_again_while_the_deficit_remains() -> None:
    # four owners a..d each run 8 (fixed) and fill A; t/r (16) due at +16m needs two draws:
    # k = 0 over [a, b, c, d], then k = 1 over the three still running
    owners = ["a", "b", "c", "d"]
    doc = scenario(
        _teams(*owners, "t"), A32,
        [at(0, apply=[*_budgets(*owners, "t"), *[a_run(f"{o}/x", f"org:{o}").gpus(8).build() for o in owners]]),
         at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()])],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    seed = seed_of("t/r", stamp(16))
    left = list(owners)
    want = []
    for k in range(2):
        pick = left[h(f"{seed}|{k}|owner") % len(left)]
        want.append(f"{pick}/x")
        left.remove(pick)
    assert sorted(e["run"] for e in ends(out)) == sorted(want)
    assert {e["reason"] for e in ends(out)} == {f"RandomPreempt({seed})"}
    assert out["final"]["runs"]["t/r"]["phase"] == "Running"


# ------------------------------------------------------------------------------- other seams


def test_two_groups_on_one_failed_node_both_swap_to_their_own_spares() -> None:
    # S-big (8), S-s1 (4), S-s2 (4) in one domain. 8 in groups of 4 with a 4-GPU spare each:
    # both groups on S-big (most free, then name), spares on S-s1 and S-s2. S-big fails: each
    # group moves to its own spare; the run keeps all 8.
    def node(name: str, gpus: int) -> dict[str, Any]:
        labels = {"region": "west", "cluster": "c1", "fabric.domain": "S", "gpu.flavor": "H100-80GB"}
        return {"name": name, "gpus": gpus, "labels": labels}

    doc = scenario(
        _teams("t"), [],
        [at(0, apply=[*_budgets("t"), a_run("t/j", "org:t").gpus(8).groups(4).spares(4).build()]),
         at(1, checkpoint="placed"), at(5, node={"name": "S-big", "event": "Fail"})],
        until="+6m", nodes=[node("S-big", 8), node("S-s1", 4), node("S-s2", 4)],
    )  # fmt: skip
    out = play(doc)
    placed = {(x["spec"]["group"], x["spec"]["slice"]["role"], x["spec"]["slice"]["nodes"][0].split("#")[0])
              for x in open_leases(out["checkpoints"]["placed"], "t/j")}  # fmt: skip
    assert placed == {
        (0, "Active", "S-big"),
        (1, "Active", "S-big"),
        (0, "Spare", "S-s1"),
        (1, "Spare", "S-s2"),
    }
    final = {(x["spec"]["group"], x["spec"]["slice"]["role"], x["spec"]["slice"]["nodes"][0].split("#")[0])
             for x in open_leases(out["final"], "t/j")}  # fmt: skip
    assert final == {(0, "Active", "S-s1"), (1, "Active", "S-s2")}
    assert (
        out["final"]["runs"]["t/j"]["phase"] == "Running"
        and out["final"]["runs"]["t/j"]["width"]["allocated"] == 8
    )


def test_deleting_a_budget_leaves_its_running_work_unfunded_and_never_ends_it() -> None:
    doc = scenario(
        _teams("t"), A32,
        [at(0, apply=[*_budgets("t"), a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(5, delete={"kind": "Budget", "name": "t"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    run = out["final"]["runs"]["t/r"]
    assert run["phase"] == "Running" and run["funding"]["unfundedGPUs"] == 16
    assert ends(out) == []


def test_an_envelope_of_another_flavor_funds_nothing() -> None:
    # t's only envelope is of A100-80GB: the run's H100-80GB funding reaches no domain, so it could
    # not be placed even on an empty fleet of the domains its funding reaches (§4.5): the infeasible
    # form, naming the constraint, with no ETA, no funding advice and nothing held.
    doc = scenario(
        _teams("t"), A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, flavor="A100-80GB").build(),
                      a_run("t/r", "org:t").gpus(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["phase"] == "Pending"
    res = out["final"]["reservations"]["t/r"]
    assert res["status"]["reason"] == "needs 8 GPUs; its funding reaches 0"
    assert res["spec"]["earliestStart"] is None and res["status"]["forecast"]["remedies"] == []


def test_growth_goes_to_malleable_runs_in_ranking_order() -> None:
    # a/x 8, t/m1 8 and t/m2 8 (both up to 16) at +0: 8 free. The +1m pass grows m1 only.
    doc = scenario(
        {"a": "org:t", "t": "org:t"}, A32,
        [at(0, apply=[*_budgets("t"), a_run("a/x", "org:t").gpus(8).build(),
                      a_run("t/m1", "org:t").gpus(8).groups(8).malleable(8, 16, 8).build(),
                      a_run("t/m2", "org:t").gpus(8).groups(8).malleable(8, 16, 8).build()]),
         at(0, checkpoint="admitted")],
        until="+2m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    first = out["checkpoints"]["admitted"]["runs"]
    assert (first["t/m1"]["width"]["allocated"], first["t/m2"]["width"]["allocated"]) == (8, 8)
    runs = out["final"]["runs"]
    assert (runs["t/m1"]["width"]["allocated"], runs["t/m2"]["width"]["allocated"]) == (16, 8)


def test_a_reserved_runs_status_names_its_reservation_and_a_complete_width() -> None:
    doc = scenario(
        _teams("t", "u"), A32,
        [at(0, apply=[*_budgets("t", "u"), a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+2m",
    )  # fmt: skip
    run = play(doc)["final"]["runs"]["t/r"]
    assert run["phase"] == "Pending"
    assert run["reservation"] == {"name": "r", "earliestStart": stamp(16)}
    assert {k: run["width"][k] for k in ("min", "max", "desired", "allocated")} == {
        "min": 8, "max": 8, "desired": 8, "allocated": 0,
    }  # fmt: skip


def test_a_released_reservation_is_dropped_after_the_retention_period() -> None:
    # retention 5m: released at +3m (capacity freed early), still shown at +4m, gone by +10m
    doc = scenario(
        _teams("t", "u"), A32,
        [at(0, apply=[*_budgets("t", "u"), a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()]),
         at(3, workload={"run": "u/x", "event": "Succeed"}),
         at(4, checkpoint="released"), at(10, checkpoint="dropped")],
        until="+11m", fleet={"reservations": {"retention": "5m"}},
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert out["checkpoints"]["released"]["reservations"]["t/r"]["status"]["state"] == "Released"
    assert "t/r" not in out["checkpoints"]["dropped"]["reservations"]
