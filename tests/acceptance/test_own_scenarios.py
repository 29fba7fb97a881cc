"""Scenarios of our own for the rules of DESIGN §4, each expectation worked out by hand first.

Every test builds a small Scenario (tests/builders.py), plays it through the simulator exactly as
`jobtree simulate --format json` would, and asserts what a user would read in that output.
Unless a test says otherwise: one domain A of 4 nodes × 8 H100 GPUs (32 GPUs), notice 15m.
"""

from __future__ import annotations

from typing import Any

from reconciler.passes.simulation import Simulation
from schemas.scenario import Scenario
from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import ended, leases_of, started


def play(doc: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = Simulation(Scenario.model_validate(doc), doc).play()
    return result


def at(minutes: int, **step: Any) -> dict[str, Any]:
    return {"at": f"+{minutes}m", **step}


def stamp(minutes: int, seconds: int = 0) -> str:
    return f"2026-03-02T{9 + minutes // 60:02d}:{minutes % 60:02d}:{seconds:02d}Z"


A32 = [domain("A", 4)]


# ------------------------------------------------------------------------------ family and sponsors


def test_a_child_borrows_from_its_parent_and_turns_unfunded_when_the_parent_returns() -> None:
    # child c owns 8 and needs 16: the parent's 16 pays the other 8 (family). When the parent's own
    # 16-GPU run arrives, the parent envelope funds its owner first: the child's family-paid group
    # is left unfunded but keeps running (32 GPUs hold both runs physically).
    doc = scenario(
        {"c": "org:p:c", "p": "org:p"}, A32,
        [
            at(0, apply=[a_budget("p", "org:p").envelope("h", 16).build(),
                         a_budget("c", "org:p:c", "org:p").envelope("h", 8).build(),
                         a_run("c/r1", "org:p:c").gpus(16).groups(8).build()]),
            at(5, apply=[a_run("p/r2", "org:p").gpus(16).groups(8).build()]),
            at(1, checkpoint="borrowing"),
            at(6, checkpoint="returned"),
        ],
        until="+10m",
    )  # fmt: skip
    out = play(doc)
    first = out["checkpoints"]["borrowing"]["runs"]["c/r1"]
    assert first["phase"] == "Running"
    assert first["funding"]["ownedGPUs"] == 8 and first["funding"]["borrowedGPUs"] == 8
    assert first["funding"]["family"] == [{"owner": "org:p", "gpus": 8}]
    later = out["checkpoints"]["returned"]["runs"]
    assert later["p/r2"]["phase"] == "Running" and later["p/r2"]["funding"]["ownedGPUs"] == 16
    assert later["c/r1"]["phase"] == "Running"
    assert later["c/r1"]["funding"]["unfundedGPUs"] == 8 and later["c/r1"]["funding"]["ownedGPUs"] == 8
    assert ended(out["ledger"], "c/r1") == []  # unfunded, never killed


def test_sharing_none_keeps_a_parent_envelope_from_its_children() -> None:
    doc = scenario(
        {"c": "org:p:c"}, A32,
        [at(0, apply=[a_budget("p", "org:p").envelope("h", 16, sharing="none").build(),
                      a_budget("c", "org:p:c", "org:p").envelope("h", 8).build(),
                      a_run("c/r1", "org:p:c").gpus(16).groups(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["c/r1"]["phase"] == "Pending"
    res = out["final"]["reservations"]["c/r1"]["status"]
    assert res["reason"] == "budget headroom short by 8 GPUs" and res["forecast"]["deficitGPUs"] == 8


def _sponsored(lending: dict[str, Any], run_gpus: int = 16) -> dict[str, Any]:
    return scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_budget("s", "org:s").envelope("h", 24, lending=lending).build(),
                      a_run("t/r1", "org:t").gpus(run_gpus).groups(8).borrowing("org:s").build()])],
    )  # fmt: skip


def test_a_sponsor_lends_when_its_acl_admits_the_borrower_by_prefix() -> None:
    out = play(_sponsored({"allow": True, "to": ["org:t*"]}))
    run = out["final"]["runs"]["t/r1"]
    assert run["phase"] == "Running"
    assert run["funding"]["sponsors"] == [{"owner": "org:s", "gpus": 8}]
    lender = next(e for e in out["final"]["budgets"]["s"]["envelopes"] if e["name"] == "h")
    assert lender["lentGPUs"] == 8


def test_a_sponsor_whose_acl_does_not_admit_the_borrower_lends_nothing_and_says_so() -> None:
    out = play(_sponsored({"allow": True, "to": ["org:q:*", "org:tt"]}))
    assert out["final"]["runs"]["t/r1"]["phase"] == "Pending"
    res = out["final"]["reservations"]["t/r1"]["status"]
    assert res["reason"] == "budget headroom short by 8 GPUs"
    # §4.5: every remedy that applies, the binding one (the refusal) first
    assert res["forecast"]["remedies"] == [
        "Update the lending policy and re-submit",
        "Wait for budget headroom, add sponsors, or shrink the run",
    ]


def test_a_lending_cap_limits_what_a_sponsor_lends() -> None:
    # own 8 + at most 8 lent = 16 < 24 wanted: short by 8, waiting for headroom
    out = play(_sponsored({"allow": True, "to": ["*"], "maxConcurrency": 8}, run_gpus=24))
    assert out["final"]["runs"]["t/r1"]["phase"] == "Pending"
    assert out["final"]["reservations"]["t/r1"]["status"]["reason"] == "budget headroom short by 8 GPUs"


def test_without_allow_borrow_sponsors_are_never_asked() -> None:
    doc = _sponsored({"allow": True, "to": ["*"]})
    run = doc["spec"]["steps"][0]["apply"][2]
    run["spec"]["funding"]["allowBorrow"] = False
    out = play(doc)
    assert out["final"]["runs"]["t/r1"]["phase"] == "Pending"


# ----------------------------------------------------------------------------------------- windows


def test_a_future_window_gives_a_window_aligned_reservation_and_the_run_starts_when_it_opens() -> None:
    # window opens at +30m (after the 15m notice): ETA = window start + 10 s, window-aligned; the
    # pass at the window start finds the run fully funded and placeable and starts it then.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, start=stamp(30)).build(),
                      a_run("t/r1", "org:t").gpus(16).groups(8).build()]),
         at(1, checkpoint="waiting")],
        until="+40m",
    )  # fmt: skip
    out = play(doc)
    res = out["checkpoints"]["waiting"]["reservations"]["t/r1"]
    assert res["spec"]["earliestStart"] == stamp(30, 10)
    assert res["status"]["forecast"]["confidence"] == "window-aligned"
    assert res["status"]["reason"] == f"budget window opens at {stamp(30)}"
    assert {e["at"] for e in started(out["ledger"], "t/r1")} == {stamp(30)}


def test_windows_opening_one_after_another_add_up_to_the_funding_a_run_needs() -> None:
    # 16 GPUs needed; one envelope of 8 opens at +30m and another of 8 at +40m: neither alone pays
    # for the run, both together do, so the ETA aligns to the later window: +40m + 10 s.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("a", 8, start=stamp(30))
                      .envelope("b", 8, start=stamp(40)).build(),
                      a_run("t/r1", "org:t").gpus(16).groups(8).build()]),
         at(1, checkpoint="waiting")],
        until="+50m",
    )  # fmt: skip
    out = play(doc)
    res = out["checkpoints"]["waiting"]["reservations"]["t/r1"]
    assert res["status"]["reason"] == f"budget window opens at {stamp(40)}"
    assert res["spec"]["earliestStart"] == stamp(40, 10)
    assert {e["at"] for e in started(out["ledger"], "t/r1")} == {stamp(40)}


def test_a_window_that_closes_demotes_running_work_to_unfunded_and_never_ends_it() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16, end=stamp(20)).build(),
                      a_run("t/r1", "org:t").gpus(16).groups(8).build()]),
         at(21, checkpoint="after")],
        until="+30m",
    )  # fmt: skip
    out = play(doc)
    run = out["checkpoints"]["after"]["runs"]["t/r1"]
    assert run["phase"] == "Running" and run["funding"]["unfundedGPUs"] == 16
    assert ended(out["ledger"], "t/r1") == []


def test_a_budget_cut_demotes_to_unfunded_and_never_ends_work() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16).build(),
                      a_run("t/r1", "org:t").gpus(16).groups(8).build()]),
         at(5, apply=[a_budget("t", "org:t").envelope("h", 8).build()]),
         at(6, checkpoint="cut")],
        until="+10m",
    )  # fmt: skip
    out = play(doc)
    run = out["checkpoints"]["cut"]["runs"]["t/r1"]
    assert run["phase"] == "Running"
    assert run["funding"]["ownedGPUs"] == 8 and run["funding"]["unfundedGPUs"] == 8
    assert ended(out["ledger"], "t/r1") == []


def test_at_earliest_start_a_budget_shortfall_stays_pending_and_cuts_nobody() -> None:
    # r1 holds the whole envelope; r2 is short of budget (not of GPUs: 16 are free). At its
    # earliestStart (+15m) it is still short: Pending with the funding reason, nothing ends.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16).build(),
                      a_run("t/r1", "org:t").gpus(16).groups(8).build(),
                      a_run("t/r2", "org:t").gpus(16).groups(8).build()]),
         at(16, checkpoint="due")],
        until="+20m",
    )  # fmt: skip
    out = play(doc)
    due = out["checkpoints"]["due"]
    assert due["runs"]["t/r2"]["phase"] == "Pending"
    assert due["reservations"]["t/r2"]["status"]["reason"] == "budget headroom short by 16 GPUs"
    assert [e for e in out["ledger"] if e["event"] == "End"] == []


# ------------------------------------------------------------------------------------------ packing


def test_packing_prefers_the_domain_with_most_free_gpus_then_nodes_by_most_free_then_name() -> None:
    # A has 2 nodes × 8, B 3 nodes × 8. First an 8-GPU run: B has most free (24 > 16) → B-n00.
    # Then a 16-GPU run in groups of 8: B has 16 free, A 16 free → tie → domain key order: A.
    doc = scenario(
        {"t": "org:t"}, [domain("A", 2), domain("B", 3)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/one", "org:t").gpus(8).build()]),
         at(1, apply=[a_run("t/two", "org:t").gpus(16).groups(8).build()])],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    one = {n.split("#")[0] for x in leases_of(out["final"], "t/one") for n in x["spec"]["slice"]["nodes"]}
    two = {n.split("#")[0] for x in leases_of(out["final"], "t/two") for n in x["spec"]["slice"]["nodes"]}
    assert one == {"B-n00"}
    assert two == {"A-n00", "A-n01"}


def test_groups_that_must_share_one_domain_wait_with_the_grouping_reason() -> None:
    # 24 GPUs in groups of 8 without cross-group spread: no domain has 24 (A 16, B 16)
    doc = scenario(
        {"t": "org:t"}, [domain("A", 2), domain("B", 2)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r1", "org:t").gpus(24).groups(8, spread=False).build()])],
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r1"]["phase"] == "Pending"
    assert (
        out["final"]["reservations"]["t/r1"]["status"]["reason"] == "no single domain satisfies run grouping"
    )


def test_a_selector_is_a_hard_location_constraint() -> None:
    # the only envelope selects region east; west has room, east has none → the run waits
    doc = scenario(
        {"t": "org:t"}, [domain("W", 4, region="west"), domain("E", 1, region="east", cluster="c2")],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64, selector={"region": "east"}).build(),
                      a_run("t/r1", "org:t").gpus(16).groups(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r1"]["phase"] == "Pending"
    assert leases_of(out["final"], "t/r1") == []


def test_a_node_missing_a_label_is_reported_and_left_out_while_the_rest_serve() -> None:
    nodes = [
        {"name": "x-0", "gpus": 8, "labels": {"region": "west", "cluster": "c1", "gpu.flavor": "H100-80GB"}},
    ]
    doc = scenario(
        {"t": "org:t"}, [domain("A", 1)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r1", "org:t").gpus(8).build()])],
        nodes=nodes,
    )  # fmt: skip
    out = play(doc)
    problems = [d for d in out["final"]["diagnostics"] if d.get("node") == "x-0"]
    assert len(problems) == 1 and "fabric.domain" in problems[0]["message"]
    assert out["final"]["runs"]["t/r1"]["phase"] == "Running"
    assert {
        n.split("#")[0] for x in leases_of(out["final"], "t/r1") for n in x["spec"]["slice"]["nodes"]
    } == {"A-n00"}


# ---------------------------------------------------------------------------------------- lifecycle


def _two_runs(*later: dict[str, Any], after: bool = False) -> dict[str, Any]:
    second = a_run("t/r2", "org:t").gpus(8)
    if after:
        second.after("r1")
    return scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r1", "org:t").gpus(8).build(), second.build()]), *later],
        until="+20m",
    )  # fmt: skip


def test_a_succeeded_workload_completes_its_leases() -> None:
    out = play(_two_runs(at(10, workload={"run": "t/r1", "event": "Succeed"})))
    assert out["final"]["runs"]["t/r1"]["phase"] == "Succeeded"
    assert [e["reason"] for e in ended(out["ledger"], "t/r1")] == ["Completed"]
    assert ended(out["ledger"], "t/r1")[0]["at"] == stamp(10)


def test_a_failed_workload_ends_with_workload_failed() -> None:
    out = play(_two_runs(at(10, workload={"run": "t/r1", "event": "Fail"})))
    assert out["final"]["runs"]["t/r1"]["phase"] == "Failed"
    assert [e["reason"] for e in ended(out["ledger"], "t/r1")] == ["WorkloadFailed"]


def test_deleting_a_run_closes_its_leases_with_run_deleted() -> None:
    out = play(_two_runs(at(10, delete={"kind": "Run", "namespace": "t", "name": "r1"})))
    assert [e["reason"] for e in ended(out["ledger"], "t/r1")] == ["RunDeleted"]
    assert "t/r1" not in {x["spec"]["runRef"]["name"] for x in out["final"]["leases"]}


def test_a_run_after_another_waits_until_that_run_succeeded() -> None:
    out = play(
        _two_runs(at(1, checkpoint="early"), at(10, workload={"run": "t/r1", "event": "Succeed"}), after=True)
    )
    assert out["checkpoints"]["early"]["runs"]["t/r2"]["phase"] == "Waiting"
    assert [e["at"] for e in started(out["ledger"], "t/r2")] == [stamp(10)]


# ------------------------------------------------------------------------------------------ failures


def _failing(run: Any, fail: str = "A-n00", grace: int | None = None, event: str = "Fail") -> dict[str, Any]:
    fleet = {"failure": {"notReadyGraceSeconds": grace}} if grace is not None else None
    return scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), run.build()]),
         at(5, node={"name": fail, "event": event}), at(6, checkpoint="after")],
        until="+10m", fleet=fleet,
    )  # fmt: skip


def test_cordon_and_not_ready_without_grace_change_nothing_for_running_work() -> None:
    for event in ("Cordon", "NotReady"):
        out = play(_failing(a_run("t/r1", "org:t").gpus(16).groups(8), event=event))
        assert out["checkpoints"]["after"]["runs"]["t/r1"]["phase"] == "Running"
        assert ended(out["ledger"], "t/r1") == [], event


def test_a_fixed_width_run_without_a_spare_fails_when_a_node_fails() -> None:
    out = play(_failing(a_run("t/r1", "org:t").gpus(16).groups(8)))
    assert out["checkpoints"]["after"]["runs"]["t/r1"]["phase"] == "Failed"
    reasons = sorted(e["reason"] for e in ended(out["ledger"], "t/r1"))
    assert reasons == ["NodeFailure", "RunFailed"]


def test_a_checkpointed_run_without_a_spare_is_requeued_not_failed() -> None:
    # back to Pending with its place in line, so the same pass restarts it from its checkpoint on
    # the 24 healthy GPUs: most free nodes first, by name → A-n01 and A-n02 (A-n00 failed)
    out = play(_failing(a_run("t/r1", "org:t").gpus(16).groups(8).checkpointed()))
    assert sorted(e["reason"] for e in ended(out["ledger"], "t/r1")) == ["NodeFailure", "RunFailed"]
    restarted = started(out["ledger"], "t/r1", stamp(5))
    assert {e["nodes"][0].split("#")[0] for e in restarted} == {"A-n01", "A-n02"}
    assert out["checkpoints"]["after"]["runs"]["t/r1"]["phase"] == "Running"


def test_a_malleable_run_above_its_minimum_loses_only_the_failed_group() -> None:
    # 24 GPUs in 3 groups (min 8): group 0 on A-n00 fails, no spare → 16 GPUs keep training
    out = play(_failing(a_run("t/r1", "org:t").gpus(24).groups(8).malleable(8, 24, 8)))
    run = out["checkpoints"]["after"]["runs"]["t/r1"]
    assert run["phase"] == "Running"
    lost = ended(out["ledger"], "t/r1", stamp(5))
    assert [e["reason"] for e in lost] == ["NodeFailure"] and lost[0]["gpus"] == 8


def test_a_spare_on_the_failed_node_is_closed_with_node_failure() -> None:
    # 16 GPUs in groups of 8 on A-n00 and A-n01; each group's 1 spare GPU lands on A-n02 (most free)
    out = play(_failing(a_run("t/r1", "org:t").gpus(16).groups(8).spares(1), fail="A-n02"))
    spare_ends = [e for e in ended(out["ledger"], "t/r1") if e["role"] == "Spare"]
    assert spare_ends and {e["reason"] for e in spare_ends} == {"NodeFailure"}
    assert out["checkpoints"]["after"]["runs"]["t/r1"]["phase"] == "Running"


def test_a_repaired_and_uncordoned_node_serves_new_work_again() -> None:
    # A-n00 fails under r1 (8 GPUs, no spare): r1 fails and jobtree cordons A-n00. The operator
    # repairs it (Ready) and uncordons it; r2 then needs all 32 GPUs, A-n00's included.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r1", "org:t").gpus(8).build()]),
         at(5, node={"name": "A-n00", "event": "Fail"}),
         at(6, checkpoint="down"),
         at(10, node={"name": "A-n00", "event": "Ready"}),
         at(11, node={"name": "A-n00", "event": "Uncordon"}),
         at(12, apply=[a_run("t/r2", "org:t").gpus(32).groups(8).build()])],
        until="+13m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["down"]["nodes"]["A-n00"] == {"cordoned": True, "state": "Failed"}
    assert out["final"]["runs"]["t/r2"]["phase"] == "Running"
    assert "A-n00" in {e["nodes"][0].split("#")[0] for e in started(out["ledger"], "t/r2")}


def test_fill_on_a_spare_that_a_shrink_closes_ends_reclaimed_by_spare() -> None:
    # r1 (16 in groups of 8, min 8, 1 spare per group) fills A-n00, A-n01 and puts both spares on
    # A-n02; the opportunistic f (2 GPUs) fills both spare GPUs. Lowering r1's desired width to 8
    # closes group 1 with its spare (Shrink): the fill lease on that spare GPU ends
    # ReclaimedBySpare — the complete list of closure reasons has no other for it.
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r1", "org:t").gpus(16).groups(8).malleable(8, 16, 8).spares(1).build()]),
         at(1, apply=[a_run("u/f", "org:u").gpus(2).groups(1).malleable(1, 2, 1).opportunistic().build()]),
         at(5, patch={"kind": "Run", "namespace": "t", "name": "r1",
                      "merge": {"spec": {"malleable": {"desiredTotalGPUs": 8}}}})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert [e["reason"] for e in ended(out["ledger"], "t/r1") if e["role"] == "Spare"] == ["Shrink"]
    fill_ends = ended(out["ledger"], "u/f", stamp(5))
    assert [e["reason"] for e in fill_ends] == ["ReclaimedBySpare"]
    assert out["final"]["runs"]["u/f"]["phase"] == "Running"
    assert out["final"]["runs"]["u/f"]["width"]["allocated"] == 1


def test_not_ready_past_the_opt_in_grace_fences_the_node() -> None:
    # NotReady at +5m, grace 60 s: the +6m tick pass finds it past grace and fails the group over
    doc = _failing(a_run("t/r1", "org:t").gpus(16).groups(8), event="NotReady", grace=60)
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    lost = ended(out["ledger"], "t/r1")
    assert "NodeFailure" in {e["reason"] for e in lost}
    assert min(e["at"] for e in lost) == stamp(6)


# ------------------------------------------------------------------------------------- reservations


def test_a_reserved_run_starts_early_when_capacity_frees_before_its_eta() -> None:
    # r1 holds all 32 GPUs; r2 (16) is reserved at +1m for +16m; r1 succeeds at +5m → the +5m
    # pass starts r2 at once and releases its reservation
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r1", "org:t").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r2", "org:t").gpus(16).groups(8).build()]),
         at(2, checkpoint="reserved"),
         at(5, workload={"run": "t/r1", "event": "Succeed"})],
        until="+20m",
    )  # fmt: skip
    out = play(doc)
    res = out["checkpoints"]["reserved"]["reservations"]["t/r2"]
    assert res["spec"]["earliestStart"] == stamp(16)
    assert res["status"]["reason"] == "cluster short by 16 GPUs in scope"
    assert [e["at"] for e in started(out["ledger"], "t/r2")] == [stamp(5), stamp(5)]
    assert out["final"]["reservations"]["t/r2"]["status"]["state"] == "Released"


def test_activation_shrinks_a_malleable_run_only_down_to_its_minimum() -> None:
    # r1: 32 GPUs in 4 groups, min 24. r2 (16) is reserved at +1m (conflict set published then) and
    # due at +16m: shrink r1 by one step (group 3, 32 -> 24, its floor); 8 GPUs still short, so the
    # lottery draws a group of the only candidate, r1; below its minimum r1 ends whole (requeued).
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r1", "org:t").gpus(32).groups(8).malleable(24, 32, 8).build()]),
         at(1, apply=[a_run("t/r2", "org:t").gpus(16).groups(8).build()])],
        until="+20m",
    )  # fmt: skip
    out = play(doc)
    cuts = ended(out["ledger"], "t/r1", stamp(16))
    shrink = [e for e in cuts if e["reason"] == "Shrink"]
    assert [e["group"] for e in shrink] == [3]
    seed = out["final"]["reservations"]["t/r2"]["status"]["seed"]
    assert {e["reason"] for e in cuts if e not in shrink} == {f"RandomPreempt({seed})"}
    assert out["final"]["runs"]["t/r1"]["phase"] == "Pending"
    assert out["final"]["runs"]["t/r2"]["phase"] == "Running"
