"""Contract scenarios for §4.8: spares, opportunistic fill, node failures and swaps.

"A fill lease ends ReclaimedBySpare whenever its spare is needed or closes for any reason
(NodeFailure if its node fails)"; the closure-reason list of §4.8 is complete.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import (
    A32,
    at,
    bad_closure_reasons,
    ends,
    envelope,
    node_gpus,
    open_leases,
    play,
    play_sim,
    slot_problems,
    stamp,
)

PATCH_DESIRED_8 = {
    "kind": "Run",
    "namespace": "t",
    "name": "j",
    "merge": {"spec": {"malleable": {"desiredTotalGPUs": 8}}},
}


def _filled(*later: dict[str, Any], until: str = "+6m") -> dict[str, Any]:
    # t/j: 16 in 2 groups of 8 (malleable, min 8), 8 spares per group: actives on A-n00/A-n01,
    # spares on A-n02 (group 0) and A-n03 (group 1): the domain is full. o/f (opportunistic, o's
    # envelope is empty, so it can only fill) places 2 groups of 8 as Borrowed leases on the spares.
    return scenario(
        {"t": "org:t", "o": "org:o"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_budget("o", "org:o").envelope("h", 0).build(),
                      a_run("t/j", "org:t").gpus(16).groups(8).spares(8).malleable(8, 16, 8).build()]),
         at(1, apply=[a_run("o/f", "org:o").opportunistic().gpus(16).groups(8).malleable(8, 16, 8).build()]),
         at(2, checkpoint="filled"), *later],
        until=until,
    )  # fmt: skip


def test_fill_runs_on_spare_held_gpus_as_borrowed_leases_and_debits_no_envelope() -> None:
    out = play(_filled())
    st = out["checkpoints"]["filled"]
    fill = open_leases(st, "o/f")
    assert fill and all(
        x["spec"]["slice"]["role"] == "Borrowed" and x["spec"]["reason"] == "Fill" for x in fill
    )
    assert node_gpus(fill) == {"A-n02": 8, "A-n03": 8}
    assert st["runs"]["o/f"]["phase"] == "Running" and st["runs"]["o/f"]["funding"]["fillGPUs"] == 16
    assert envelope(st, "o", "h")["usage"] == {
        "activeGPUs": 0,
        "spareGPUs": 0,
        "borrowedOutGPUs": 0,
        "unfundedGPUs": 0,
    }
    assert slot_problems(st) == []


@pytest.mark.parametrize(
    ("step", "want_spare_reason", "groups"),
    [
        ({"delete": {"kind": "Run", "namespace": "t", "name": "j"}}, "RunDeleted", {0, 1}),
        ({"workload": {"run": "t/j", "event": "Succeed"}}, "Completed", {0, 1}),
        ({"workload": {"run": "t/j", "event": "Fail"}}, None, {0, 1}),
        ({"patch": PATCH_DESIRED_8}, "Shrink", {1}),
    ],
    ids=["spare's run deleted", "spare's run succeeded", "spare's run failed", "spare's group shrunk"],
)
def test_a_fill_lease_closes_reclaimed_by_spare_whenever_its_spare_closes(
    step: dict[str, Any], want_spare_reason: str | None, groups: set[int]
) -> None:
    out = play(_filled(at(4, **step)))
    when = stamp(4)
    spares = [e for e in ends(out, "t/j", when) if e["role"] == "Spare"]
    assert {e["group"] for e in spares} == groups
    if want_spare_reason:
        assert {e["reason"] for e in spares} == {want_spare_reason}
    spare_nodes = {e["nodes"][0].split("#")[0] for e in spares}
    fill_ends = ends(out, "o/f", when)
    assert {e["nodes"][0].split("#")[0] for e in fill_ends} == spare_nodes
    assert {e["reason"] for e in fill_ends} == {"ReclaimedBySpare"}
    assert bad_closure_reasons(out) == []


def test_a_fill_lease_ends_with_node_failure_when_its_node_fails() -> None:
    # A-n03 holds only group 1's spare and o/f's fill on it: the spare is lost (NodeFailure), the
    # fill too (NodeFailure); t/j keeps training on its untouched actives
    out = play(_filled(at(4, node={"name": "A-n03", "event": "Fail"})))
    when = stamp(4)
    assert {(e["role"], e["reason"]) for e in ends(out, "t/j", when)} == {("Spare", "NodeFailure")}
    assert {e["reason"] for e in ends(out, "o/f", when)} == {"NodeFailure"}
    assert out["final"]["runs"]["t/j"]["phase"] == "Running"


def test_dropping_a_spare_for_a_reservation_reclaims_the_fill_on_it() -> None:
    # the domain is full (t/j actives + spares, o/f fill on the spares). v/r (8) reserved at +2m,
    # due +17m: no unfunded work, so spares are dropped: one spare of 8 clears the deficit and the
    # fill on it ends ReclaimedBySpare
    doc = _filled(until="+18m")
    doc["spec"]["fleet"]["tenants"].append({"namespace": "v", "owner": "org:v"})
    doc["spec"]["steps"].append(at(2, apply=[a_budget("v", "org:v").envelope("h", 64).build(),
                                             a_run("v/r", "org:v").gpus(8).build()]))  # fmt: skip
    out = play(doc)
    when = stamp(17)
    dropped = [e for e in ends(out, "t/j", when)]
    assert [(e["role"], e["reason"]) for e in dropped] == [("Spare", "DropSpare")]
    node = dropped[0]["nodes"][0].split("#")[0]
    fill_ends = ends(out, "o/f", when)
    assert [(e["nodes"][0].split("#")[0], e["reason"]) for e in fill_ends] == [(node, "ReclaimedBySpare")]
    assert out["final"]["runs"]["v/r"]["phase"] == "Running"
    assert bad_closure_reasons(out) == []


def test_an_opportunistic_run_never_takes_free_capacity_from_a_non_opportunistic_run() -> None:
    # spares are the only free-looking GPUs: a normal run does not fill them
    doc = _filled()
    doc["spec"]["steps"][0]["apply"][1] = a_budget("o", "org:o").envelope("h", 64).build()
    doc["spec"]["steps"][1]["apply"][0]["spec"].pop("opportunistic")
    out = play(doc)
    assert open_leases(out["final"], "o/f") == [] and out["final"]["runs"]["o/f"]["phase"] == "Pending"


# ------------------------------------------------------------------------------------------ swaps


def test_a_swap_uses_part_of_a_spare_and_keeps_the_rest_as_a_spare() -> None:
    # 12 in one group of 12 with an 8-GPU spare: actives 8 on A-n00 + 4 on A-n01, spare 8 on A-n02.
    # A-n01 fails: the spare closes (Swap), a 4-GPU Active lease (reason Swap) opens on A-n02 with
    # the spare's payer, and the other 4 of A-n02 stay a Spare lease.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/j", "org:t").gpus(12).groups(12).spares(8).build()]),
         at(5, node={"name": "A-n01", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out, sim = play_sim(doc)
    when = stamp(5)
    assert {(e["role"], e["nodes"][0].split("#")[0], e["reason"]) for e in ends(out, "t/j", when)} == {
        ("Spare", "A-n02", "Swap"),
        ("Active", "A-n01", "NodeFailure"),
    }
    st = out["final"]
    swapped = [x for x in open_leases(st, "t/j", "Active") if x["spec"]["reason"] == "Swap"]
    assert len(swapped) == 1 and node_gpus(swapped) == {"A-n02": 4}
    assert swapped[0]["spec"]["payer"] == {"owner": "org:t", "budget": "t", "envelope": "h"}
    assert node_gpus(open_leases(st, "t/j", "Spare")) == {"A-n02": 4}
    assert node_gpus(open_leases(st, "t/j", "Active")) == {"A-n00": 8, "A-n02": 4}
    assert st["runs"]["t/j"]["width"]["allocated"] == 12
    assert st["runs"]["t/j"]["message"] == "group 0 swapped to spare after node failure"
    assert st["nodes"]["A-n01"]["cordoned"] is True
    assert slot_problems(st) == []
    # the moved pod keeps the ranks the failed node held (8..11)
    pods = {m["spec"]["nodeName"]: m for m in sim.last.manifests.values() if m["kind"] == "Pod"}
    env = {e["name"]: e["value"] for e in pods["A-n02"]["spec"]["containers"][0]["env"]}
    assert env["JOBTREE_RANK_BASE"] == "8"


def test_a_swap_keeps_the_spares_payer_even_when_it_is_the_family() -> None:
    # c owns 4 and pays the 4-GPU active group; its parent (4) pays the 4-GPU spare on A-n01. A-n00
    # fails: the new Active lease on the spare's slots keeps the spare's payer, the parent.
    doc = scenario(
        {"c": "org:p:c"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 4).build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 4).build(),
                      a_run("c/j", "org:p:c").gpus(4).spares(4).build()]),
         at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    st = out["final"]
    active = open_leases(st, "c/j", "Active")
    assert len(active) == 1 and active[0]["spec"]["reason"] == "Swap"
    assert active[0]["spec"]["payer"]["owner"] == "org:p"
    assert st["runs"]["c/j"]["funding"]["family"] == [{"owner": "org:p", "gpus": 4}]


def test_a_spare_too_small_for_the_failed_gpus_is_not_usable_and_a_fixed_run_fails() -> None:
    # one group of 16 on A-n00/A-n01, spare of 4 on A-n02; A-n00 (8 of the group) fails: 4 < 8
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/j", "org:t").gpus(16).groups(16).spares(4).build()]),
         at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/j"]["phase"] == "Failed"
    closed = {(e["role"], e["nodes"][0].split("#")[0], e["reason"]) for e in ends(out, "t/j")}
    assert closed == {
        ("Active", "A-n00", "NodeFailure"),
        ("Active", "A-n01", "RunFailed"),
        ("Spare", "A-n02", "RunFailed"),
    }
    assert open_leases(out["final"], "t/j") == []


def test_a_spare_on_the_failed_node_itself_is_lost_and_cannot_save_its_group() -> None:
    # one node of 8: 4 active + 4 spare on S-n00. S-n00 fails: both close NodeFailure, the fixed
    # run fails
    doc = scenario(
        {"t": "org:t"}, [domain("S", 1)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/j", "org:t").gpus(4).spares(4).build()]),
         at(5, node={"name": "S-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {(e["role"], e["reason"]) for e in ends(out, "t/j")} == {
        ("Active", "NodeFailure"),
        ("Spare", "NodeFailure"),
    }
    assert out["final"]["runs"]["t/j"]["phase"] == "Failed"


def test_a_deleted_node_fails_its_groups_over_like_a_failed_one() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/j", "org:t").gpus(8).spares(8).build()]),
         at(5, node={"name": "A-n00", "event": "Delete"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {(e["role"], e["reason"]) for e in ends(out, "t/j")} == {
        ("Active", "NodeFailure"),
        ("Spare", "Swap"),
    }
    assert out["final"]["runs"]["t/j"]["message"] == "group 0 swapped to spare after node failure"
    assert out["final"]["nodes"]["A-n00"]["state"] == "Deleted"


@pytest.mark.parametrize(("checkpointed", "want_phase"), [(False, "Failed"), (True, "Running")])
def test_a_malleable_run_at_its_minimum_without_a_spare_fails_or_restarts_from_checkpoint(
    checkpointed: bool, want_phase: str
) -> None:
    # 16 in 2 groups, min 16: losing a group would go below the minimum. Without a checkpoint the
    # run fails; with one it is requeued and restarts in the same pass on the 24 healthy GPUs.
    run = a_run("t/m", "org:t").gpus(16).groups(8).malleable(16, 24, 8, desired=16)
    if checkpointed:
        run.checkpointed()
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), run.build()]),
         at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert sorted(e["reason"] for e in ends(out, "t/m", stamp(5))) == ["NodeFailure", "RunFailed"]
    assert out["final"]["runs"]["t/m"]["phase"] == want_phase


def test_cordoned_nodes_offer_no_capacity_and_uncordoning_returns_it() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, node={"name": "A-n00", "event": "Cordon"}), at(0, node={"name": "A-n01", "event": "Cordon"}),
         at(0, node={"name": "A-n02", "event": "Cordon"}),
         at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/r", "org:t").gpus(16).build()]),
         at(1, checkpoint="cordoned"),
         at(5, node={"name": "A-n00", "event": "Uncordon"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    st = out["checkpoints"]["cordoned"]
    assert st["runs"]["t/r"]["phase"] == "Pending"
    # Ambiguous, not asserted exactly: the deficit. 8 are free in A, 16 wanted (a user would read
    # "short by 8"), but the planner leaves cordoned GPUs out of the capacity that defines the
    # scope, finds no scope and reports 16.
    assert st["reservations"]["t/r"]["status"]["reason"].startswith("cluster short by ")
    assert st["nodes"]["A-n00"] == {"cordoned": True, "state": "Ready"}
    assert node_gpus(open_leases(out["final"], "t/r")) == {"A-n00": 8, "A-n03": 8}


def test_a_node_that_is_ready_again_within_the_grace_changes_nothing() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(5, node={"name": "A-n00", "event": "NotReady"}), at(5, checkpoint="not-ready"),
         at(6, node={"name": "A-n00", "event": "Ready"})],
        until="+10m", fleet={"failure": {"notReadyGraceSeconds": 120}},
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert out["checkpoints"]["not-ready"]["nodes"]["A-n00"]["state"] == "NotReady"
    assert ends(out) == []
    assert out["final"]["nodes"] == {}


def test_a_spare_on_a_cordoned_node_takes_no_swap() -> None:
    # §7.6: a cordoned node receives nothing new, a replacement included. The spare's node A-n01 is
    # cordoned at +2m (its spare pod keeps running: cordon never fences); when A-n00 fails at +5m
    # the group has no usable spare, and a fixed-width run without checkpoint fails: NodeFailure on
    # the failed node, RunFailed for its spare elsewhere.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/j", "org:t").gpus(8).spares(8).build()]),
         at(2, node={"name": "A-n01", "event": "Cordon"}), at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {(e["role"], e["reason"]) for e in ends(out, "t/j")} == {
        ("Active", "NodeFailure"),
        ("Spare", "RunFailed"),
    }
    assert out["final"]["runs"]["t/j"]["phase"] == "Failed"


def test_when_a_group_and_its_spare_fail_together_every_lease_on_a_failed_node_ends_node_failure() -> None:
    # 16 in groups of 8 with an 8-GPU spare each: g0 A-n00, g1 A-n01, spares A-n02 (g0), A-n03
    # (g1). A-n00 and A-n02 fail at the same instant: g0's spare is lost with its node, g0 has no
    # usable spare, the fixed run fails; leases on healthy nodes end RunFailed.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/j", "org:t").gpus(16).groups(8).spares(8).build()]),
         at(5, node={"name": "A-n00", "event": "Fail"}), at(5, node={"name": "A-n02", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/j"]["phase"] == "Failed"
    closed = {(e["nodes"][0].split("#")[0], e["role"], e["reason"]) for e in ends(out, "t/j")}
    assert closed == {
        ("A-n00", "Active", "NodeFailure"),
        ("A-n02", "Spare", "NodeFailure"),
        ("A-n01", "Active", "RunFailed"),
        ("A-n03", "Spare", "RunFailed"),
    }


def test_the_seeds_spares_field_is_an_alias_of_spares_per_group() -> None:
    run = a_run("t/j", "org:t").gpus(8).build()
    run["spec"]["spares"] = 2
    doc = scenario(
        {"t": "org:t"}, A32, [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), run])]
    )
    out = play(doc)
    assert node_gpus(open_leases(out["final"], "t/j", "Spare")) == {"A-n01": 2}


def test_a_malleable_run_with_a_usable_spare_swaps_instead_of_losing_the_group() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/m", "org:t").gpus(16).groups(8).spares(8).malleable(8, 16, 8).build()]),
         at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {(e["role"], e["reason"]) for e in ends(out, "t/m")} == {
        ("Active", "NodeFailure"),
        ("Spare", "Swap"),
    }
    assert out["final"]["runs"]["t/m"]["width"]["allocated"] == 16
    assert out["final"]["runs"]["t/m"]["message"] == "group 0 swapped to spare after node failure"


def test_an_opportunistic_run_with_spares_never_breaks_the_slot_invariant() -> None:
    # t/j (16 in groups of 8, 8 spares each) fills A. o/f is opportunistic and asks for 2 spares per
    # group. Whatever the planner makes of a filler's spares (not said by the design), the pass
    # must keep §4.9: no slot is held by two Spare leases.
    doc = scenario(
        {"t": "org:t", "o": "org:o"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_budget("o", "org:o").envelope("h", 64).build(),
                      a_run("t/j", "org:t").gpus(16).groups(8).spares(8).build()]),
         at(1, apply=[a_run("o/f", "org:o").opportunistic().gpus(8).groups(8).spares(2).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    assert slot_problems(out["final"]) == []
    assert out["final"]["runs"]["t/j"]["phase"] == "Running"


def test_a_filler_whose_file_turned_invalid_is_not_left_running_on_nothing() -> None:
    # t/j: 16 with an 8-GPU spare per group fills A; o/f fills both spares; its file turns invalid at
    # +3m; v/r (16) due at +17m drops both spares, reclaiming all of o/f's fill
    doc = scenario(
        {"t": "org:t", "o": "org:o", "v": "org:v"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_budget("o", "org:o").envelope("h", 0).build(),
                      a_budget("v", "org:v").envelope("h", 64).build(),
                      a_run("t/j", "org:t").gpus(16).groups(8).spares(8).build()]),
         at(1, apply=[a_run("o/f", "org:o").opportunistic().gpus(16).groups(8).build()]),
         at(2, apply=[a_run("v/r", "org:v").gpus(16).groups(8).build()]),
         at(3, patch={"kind": "Run", "namespace": "o", "name": "f", "merge": {"spec": {"resources": {"totalGPUs": 0}}}})],
        until="+18m",
    )  # fmt: skip
    out = play(doc)
    assert {e["reason"] for e in ends(out, "o/f")} == {"ReclaimedBySpare"}
    assert open_leases(out["final"], "o/f") == []
    assert out["final"]["runs"]["o/f"]["phase"] != "Running"
