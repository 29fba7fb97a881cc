"""Contract scenarios for §4.5 reservations and forecasts: ETA, reasons, deficits, remedies, conflict
sets, backfill, and what a pass at or after earliestStart does when the shortfall is funding.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import A32, at, ends, play, stamp, starts

LOTTERY = "Run fair lottery if deficit remains"


def _full(
    *later: dict[str, Any], t_gpus: int = 64, fleet: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    # u/x (24, groups of 8) and u/y (8) fill domain A; team t has `t_gpus` GPUs of budget
    return scenario(
        {"t": "org:t", "u": "org:u", "s": "org:s"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", t_gpus).build(),
                      a_budget("u", "org:u").envelope("h", 64).build(),
                      a_budget("s", "org:s").envelope("h", 64).build(),
                      a_run("u/x", "org:u").gpus(24).groups(8).build(),
                      a_run("u/y", "org:u").gpus(8).build()]),
         *later],
        fleet=fleet, **kw,
    )  # fmt: skip


def test_earliest_start_is_now_plus_the_fleets_notice_period_with_conservative_confidence() -> None:
    out = play(
        _full(
            at(1, apply=[a_run("t/r", "org:t").gpus(8).build()]),
            fleet={"reservations": {"noticePeriod": "5m"}},
        )
    )
    res = out["final"]["reservations"]["t/r"]
    assert res["spec"]["earliestStart"] == stamp(6)
    assert res["status"]["forecast"]["confidence"] == "conservative"
    assert res["status"]["reason"] == "cluster short by 8 GPUs in scope"
    assert "countdownSeconds" not in res["status"] and "countdownSeconds" not in res["spec"]


def test_a_window_opening_inside_the_notice_period_still_gives_now_plus_notice() -> None:
    # window opens at +5m: later of (+15m, +5m10s) = +15m; the run starts at the window's opening
    # pass because it is then fully funded and fits. (Ambiguous, not asserted: the confidence.)
    # Short of headroom now, funded by the coming window: both remedies, the window's first (§4.5).
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, start=stamp(5)).build(),
                      a_run("t/r", "org:t").gpus(8).build()]),
         at(1, checkpoint="waiting")],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    res = out["checkpoints"]["waiting"]["reservations"]["t/r"]
    assert res["spec"]["earliestStart"] == stamp(15)
    assert res["status"]["reason"] == f"budget window opens at {stamp(5)}"
    assert res["status"]["forecast"]["remedies"] == [
        "Wait for the budget window to open",
        "Wait for budget headroom, add sponsors, or shrink the run",
    ]
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(5)}


def test_when_funding_and_capacity_are_both_short_the_funding_reason_wins() -> None:
    # nothing is free and t's envelope holds 8 of the 16 wanted
    out = play(_full(at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]), t_gpus=8))
    status = out["final"]["reservations"]["t/r"]["status"]
    assert status["reason"] == "budget headroom short by 8 GPUs"
    assert status["forecast"]["deficitGPUs"] == 8
    assert status["forecast"]["remedies"] == ["Wait for budget headroom, add sponsors, or shrink the run"]


def test_at_earliest_start_a_run_short_of_funding_and_capacity_cuts_nobody() -> None:
    doc = _full(at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]), at(17, checkpoint="due"),
                t_gpus=8, until="+20m")  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert out["checkpoints"]["due"]["runs"]["t/r"]["phase"] == "Pending"
    assert ends(out) == []
    assert "conflicts" not in out["checkpoints"]["due"]["runs"]["u/x"]


def test_a_reservation_past_its_eta_activates_at_the_first_pass_it_is_funded() -> None:
    # budget-short at +0 (16 GPUs free physically); the budget is raised at +20m, past the ETA
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(20, apply=[a_budget("t", "org:t").envelope("h", 16).build()])],
        until="+21m",
    )  # fmt: skip
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(20)}
    assert out["final"]["reservations"]["t/r"]["status"]["state"] == "Released"


def test_a_budget_raise_before_the_eta_starts_the_run_early() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(5, apply=[a_budget("t", "org:t").envelope("h", 16).build()])],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(5)}


def test_a_reservation_keeps_its_eta_while_its_forecast_is_refreshed() -> None:
    # at +1m: 0 free, t/r (16) short by 16, ETA +16m. u/y (8) succeeds at +5m: short by 8 now, and
    # the ETA does not move because time passed or capacity changed
    doc = _full(at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]), at(2, checkpoint="first"),
                at(5, workload={"run": "u/y", "event": "Succeed"}), at(6, checkpoint="refreshed"),
                until="+10m")  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    first = out["checkpoints"]["first"]["reservations"]["t/r"]
    assert first["spec"]["earliestStart"] == stamp(16)
    assert first["status"]["reason"] == "cluster short by 16 GPUs in scope"
    later = out["checkpoints"]["refreshed"]["reservations"]["t/r"]
    assert later["spec"]["earliestStart"] == stamp(16)
    assert later["status"]["reason"] == "cluster short by 8 GPUs in scope"
    assert later["status"]["forecast"]["deficitGPUs"] == 8


# ------------------------------------------------------------------------------------- remedies


def test_remedies_list_only_what_exists_in_scope_and_end_with_the_lottery() -> None:
    # only fixed-width funded runs in scope: nothing to reclaim, drop or shrink
    out = play(_full(at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])))
    assert out["final"]["reservations"]["t/r"]["status"]["forecast"]["remedies"] == [LOTTERY]


def test_a_malleable_run_at_its_minimum_offers_no_shrink_remedy() -> None:
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_budget("u", "org:u").envelope("h", 64).build(),
                      a_run("u/m", "org:u").gpus(32).groups(8).malleable(32, 40, 8, desired=32).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["reservations"]["t/r"]["status"]["forecast"]["remedies"] == [LOTTERY]


def test_remedies_come_in_the_fixed_order_when_everything_is_in_scope() -> None:
    # in A (32): t/unf 8 (t's budget then cut to 0: unfunded), s/sp 4 + 1 spare, u/m 16 malleable
    # (min 8): 29 held, 3 free. v/r (16) at +2m: cluster short by 13.
    doc = scenario(
        {"t": "org:t", "u": "org:u", "s": "org:s", "v": "org:v"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("u", "org:u").envelope("h", 64).build(),
                      a_budget("s", "org:s").envelope("h", 64).build(),
                      a_budget("v", "org:v").envelope("h", 64).build(),
                      a_run("t/unf", "org:t").gpus(8).build(),
                      a_run("s/sp", "org:s").gpus(4).spares(1).build(),
                      a_run("u/m", "org:u").gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(1, apply=[a_budget("t", "org:t").envelope("h", 0).build()]),
         at(2, apply=[a_run("v/r", "org:v").gpus(16).groups(8).build()])],
        until="+3m",
    )  # fmt: skip
    status = play(doc)["final"]["reservations"]["v/r"]["status"]
    assert status["reason"] == "cluster short by 13 GPUs in scope"
    assert status["forecast"]["remedies"] == [
        "Reclaim unfunded capacity in scope",
        "Drop spares in scope",
        "Shrink elastic runs by step size",
        LOTTERY,
    ]


# ------------------------------------------------------------------------------- conflict sets


def test_the_conflict_set_names_lottery_candidates_in_scope_with_a_probability_below_one() -> None:
    # A: u/x (16) and s/y (16), fixed, two owners. B: w/z (16). t's envelope selects A only, so the
    # scope of t/r (8) is A: x and y may lose the lottery (neither for certain); z is out of scope.
    doc = scenario(
        {"t": "org:t", "u": "org:u", "s": "org:s", "w": "org:w"}, [domain("A", 4), domain("B", 2)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, selector={"fabric.domain": "A"}).build(),
                      a_budget("u", "org:u").envelope("h", 64, selector={"fabric.domain": "A"}).build(),
                      a_budget("s", "org:s").envelope("h", 64, selector={"fabric.domain": "A"}).build(),
                      a_budget("w", "org:w").envelope("h", 64, selector={"fabric.domain": "B"}).build(),
                      a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("s/y", "org:s").gpus(16).groups(8).build(),
                      a_run("w/z", "org:w").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+2m",
    )  # fmt: skip
    st = play(doc)["final"]
    members = {c["run"]: c["probability"] for c in st["reservations"]["t/r"]["status"]["conflictSet"]}
    assert set(members) == {"u/x", "s/y"}
    assert all(0 < p < 1 for p in members.values())
    for run in ("u/x", "s/y"):
        (mine,) = st["runs"][run]["conflicts"]
        assert mine["reservation"] == "t/r" and mine["probability"] == members[run]
    assert "conflicts" not in st["runs"]["w/z"]


# ------------------------------------------------------------------------------------- backfill


def _backfill(t_gpus: int) -> dict[str, Any]:
    # A (32): u/x 24 → 8 free. B (8): empty. t/r (16, A only) is reserved at +1m. At +2m s/small
    # (8, A only) and v/small (8, B only) arrive behind it.
    return scenario(
        {"t": "org:t", "u": "org:u", "s": "org:s", "v": "org:v"}, [domain("A", 4), domain("B", 1)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", t_gpus, selector={"fabric.domain": "A"}).build(),
                      a_budget("u", "org:u").envelope("h", 64, selector={"fabric.domain": "A"}).build(),
                      a_budget("s", "org:s").envelope("h", 64, selector={"fabric.domain": "A"}).build(),
                      a_budget("v", "org:v").envelope("h", 64, selector={"fabric.domain": "B"}).build(),
                      a_run("u/x", "org:u").gpus(24).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(2, apply=[a_run("s/small", "org:s").gpus(8).build(), a_run("v/small", "org:v").gpus(8).build()])],
        until="+3m",
    )  # fmt: skip


def test_backfill_never_raises_a_funded_reservations_deficit_but_may_run_outside_its_scope() -> None:
    out = play(_backfill(64))
    assert out["final"]["reservations"]["t/r"]["status"]["forecast"]["deficitGPUs"] == 8
    assert starts(out, "s/small") == [] and out["final"]["runs"]["s/small"]["phase"] == "Pending"
    assert out["final"]["runs"]["v/small"]["phase"] == "Running"


def test_a_reservation_short_of_funding_holds_no_capacity_against_backfill() -> None:
    out = play(_backfill(8))
    assert out["final"]["reservations"]["t/r"]["status"]["reason"] == "budget headroom short by 8 GPUs"
    assert out["final"]["runs"]["s/small"]["phase"] == "Running"


def test_conflict_probabilities_of_symmetric_lottery_candidates_are_equal() -> None:
    # u/x and s/y (16 fixed each, different owners) fill A; t/r (8) needs one draw: the owner is
    # picked uniformly, so each run is cut with probability 1/2
    doc = scenario(
        {"t": "org:t", "u": "org:u", "s": "org:s"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_budget("u", "org:u").envelope("h", 64).build(),
                      a_budget("s", "org:s").envelope("h", 64).build(),
                      a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("s/y", "org:s").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+2m",
    )  # fmt: skip
    members = {
        c["run"]: c["probability"] for c in play(doc)["final"]["reservations"]["t/r"]["status"]["conflictSet"]
    }
    assert members == {"u/x": pytest.approx(0.5, abs=0.05), "s/y": pytest.approx(0.5, abs=0.05)}
