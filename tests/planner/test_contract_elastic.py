"""Contract scenarios for §4.7 elasticity: admission width, one step of growth per pass, voluntary shrink."""

from __future__ import annotations

from typing import Any

from tests.support.builders import a_budget, a_run, scenario
from tests.support.scenarios import A32, at, ends, open_leases, play, stamp, starts


def _elastic(run: Any, *later: dict[str, Any], t_gpus: int = 64, blocker: int = 0, tick: str | None = "1m",
             until: str = "+6m") -> dict[str, Any]:  # fmt: skip
    first = [
        a_budget("t", "org:t").envelope("h", t_gpus).build(),
        a_budget("u", "org:u").envelope("h", 64).build(),
    ]
    if blocker:
        first.append(a_run("a/x", "org:u").gpus(blocker).groups(8).build())  # ranks before t/m
    doc = scenario(
        {"t": "org:t", "a": "org:u"}, A32, [at(0, apply=[*first, run.build()]), *later], until=until
    )
    if tick:
        doc["spec"]["tick"] = tick
    return doc


def test_a_malleable_run_starts_at_the_largest_width_that_fits_and_grows_when_capacity_frees() -> None:
    # a/x holds 8: t/m (32, min 8, step 8) starts at 24 without a reservation. x succeeds at +5m;
    # the freed GPUs are usable in that pass: t/m grows to 32 = desired, nothing pending.
    doc = _elastic(
        a_run("t/m", "org:t").gpus(32).groups(8).malleable(8, 32, 8),
        at(0, checkpoint="admitted"), at(5, workload={"run": "a/x", "event": "Succeed"}), at(5, checkpoint="grown"),
        blocker=8, tick=None,
    )  # fmt: skip
    out = play(doc)
    first = out["checkpoints"]["admitted"]
    assert (
        first["runs"]["t/m"]["message"] == "bound 24 GPUs"
        and first["runs"]["t/m"]["width"]["allocated"] == 24
    )
    assert "t/m" not in first["reservations"]
    grown = out["checkpoints"]["grown"]["runs"]["t/m"]
    assert grown["message"] == "grew to 32 GPUs" and grown["width"]["allocated"] == 32
    assert "pending" not in grown["width"]
    assert {e["reason"] for e in starts(out, "t/m", stamp(5))} == {"Grow"}


def test_a_malleable_run_starts_at_the_largest_funded_width() -> None:
    out = play(_elastic(a_run("t/m", "org:t").gpus(32).groups(8).malleable(8, 32, 8), t_gpus=16, tick=None))
    run = out["final"]["runs"]["t/m"]
    assert run["phase"] == "Running" and run["width"]["allocated"] == 16
    assert run["width"]["pending"] == "Grow to 32"
    assert "t/m" not in out["final"]["reservations"]


def test_a_malleable_run_is_reserved_only_when_its_minimum_does_not_fit() -> None:
    out = play(_elastic(a_run("t/m", "org:t").gpus(32).groups(8).malleable(16, 32, 8), blocker=24, tick=None))
    assert out["final"]["runs"]["t/m"]["phase"] == "Pending"
    assert starts(out, "t/m") == []
    assert out["final"]["reservations"]["t/m"]["status"]["state"] == "Pending"


def test_growth_is_one_step_per_pass_up_to_desired() -> None:
    # 8 at +0; +1m 16, +2m 24 (desired 24 < max 32): then it stops
    doc = _elastic(
        a_run("t/m", "org:t").gpus(8).groups(8).malleable(8, 32, 8, desired=24),
        at(1, checkpoint="one"), at(2, checkpoint="two"),
    )  # fmt: skip
    out = play(doc)
    one = out["checkpoints"]["one"]["runs"]["t/m"]
    assert (one["width"]["allocated"], one["width"]["pending"], one["message"]) == (
        16,
        "Grow to 24",
        "grew to 16 GPUs",
    )
    two = out["checkpoints"]["two"]["runs"]["t/m"]
    assert (two["width"]["allocated"], two["message"]) == (24, "grew to 24 GPUs") and "pending" not in two[
        "width"
    ]
    assert out["final"]["runs"]["t/m"]["width"]["allocated"] == 24
    assert [e["at"] for e in starts(out, "t/m") if e["reason"] == "Grow"] == [stamp(1), stamp(2)]


def test_lowering_desired_by_two_steps_closes_the_two_highest_groups_with_their_spares() -> None:
    # 28 in 4 groups of 7 with 1 spare each (32 held); desired lowered to 14 at +3m: groups 3 and
    # 2 and their spares close with Shrink; groups 0 and 1 and their spares stay
    doc = _elastic(
        a_run("t/m", "org:t").gpus(28).groups(7).spares(1).malleable(14, 28, 7),
        at(3, patch={"kind": "Run", "namespace": "t", "name": "m", "merge": {"spec": {"malleable": {"desiredTotalGPUs": 14}}}}),
        tick=None,
    )  # fmt: skip
    out = play(doc)
    closed = {(e["group"], e["role"], e["reason"]) for e in ends(out, "t/m")}
    assert closed == {(g, role, "Shrink") for g in (2, 3) for role in ("Active", "Spare")}
    run = out["final"]["runs"]["t/m"]
    assert run["message"] == "shrunk to 14 GPUs"
    assert (run["width"]["desired"], run["width"]["allocated"]) == (14, 14)
    assert {(x["spec"]["group"], x["spec"]["slice"]["role"]) for x in open_leases(out["final"], "t/m")} == {
        (0, "Active"), (0, "Spare"), (1, "Active"), (1, "Spare"),
    }  # fmt: skip


def test_a_grown_group_brings_its_own_spare() -> None:
    # 8 + 1 spare at +0; the +1m pass grows group 1, and sparesPerGroup applies to it as well
    doc = _elastic(
        a_run("t/m", "org:t").gpus(8).groups(8).spares(1).malleable(8, 16, 8), at(1, checkpoint="grown")
    )
    out = play(doc)
    st = out["checkpoints"]["grown"]
    assert {(x["spec"]["group"], x["spec"]["slice"]["role"]) for x in open_leases(st, "t/m")} == {
        (0, "Active"), (0, "Spare"), (1, "Active"), (1, "Spare"),
    }  # fmt: skip


def test_growth_waits_for_budget_and_resumes_when_it_is_raised() -> None:
    # envelope 16: admitted at 16 and stuck there ("Grow to 32" pending); raised to 32 at +3m →
    # one step per pass from then on: 24 at +3m, 32 at +4m
    doc = _elastic(
        a_run("t/m", "org:t").gpus(32).groups(8).malleable(8, 32, 8),
        at(2, checkpoint="stuck"), at(3, apply=[a_budget("t", "org:t").envelope("h", 32).build()]),
        t_gpus=16,
    )  # fmt: skip
    out = play(doc)
    stuck = out["checkpoints"]["stuck"]["runs"]["t/m"]
    assert stuck["width"]["allocated"] == 16 and stuck["width"]["pending"] == "Grow to 32"
    assert [e["at"] for e in starts(out, "t/m") if e["reason"] == "Grow"] == [stamp(3), stamp(4)]


def test_admissions_come_before_growth_in_a_pass() -> None:
    # a/x 16, t/m 8 (up to 16), a/y 8: full. At +5m y succeeds and t/n (8) arrives: the pass admits
    # n into the freed 8 before any growth, so m stays at 8
    doc = scenario(
        {"t": "org:t", "a": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_budget("u", "org:u").envelope("h", 64).build(),
                      a_run("a/x", "org:u").gpus(16).groups(8).build(), a_run("a/y", "org:u").gpus(8).build(),
                      a_run("t/m", "org:t").gpus(8).groups(8).malleable(8, 16, 8).build()]),
         at(5, workload={"run": "a/y", "event": "Succeed"}),
         at(5, apply=[a_run("t/n", "org:t").gpus(8).build()])],
        until="+8m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/n")} == {stamp(5)}
    assert out["final"]["runs"]["t/m"]["width"]["allocated"] == 8


def test_a_width_edit_to_a_running_fixed_width_run_is_reported_not_silently_ignored() -> None:
    # t/r runs 8 GPUs. At +2m its file asks for 16: a fixed-width run keeps the width it started
    # with (nothing is cut or restarted), and its status says when the new width applies.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/r", "org:t").gpus(8).build()]),
         at(2, patch={"kind": "Run", "namespace": "t", "name": "r",
                      "merge": {"spec": {"resources": {"totalGPUs": 16}}}}),
         at(3, checkpoint="edited")],
        until="+4m",
    )  # fmt: skip
    out = play(doc)
    status = out["checkpoints"]["edited"]["runs"]["t/r"]
    assert status["phase"] == "Running" and status["width"]["allocated"] == 8
    assert status["width"]["desired"] == 16
    assert status["width"]["pending"] == "16 GPUs once the run is re-created (a running run keeps its width)"
    assert ends(out) == []
