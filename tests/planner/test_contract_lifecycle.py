"""Contract scenarios for run lifecycle: line order, job forests (`after`), completions, failures, deletes.

Ranking (§4.1): submission time (when the Run first appeared), then namespace/name, then group.
"""

from __future__ import annotations

from typing import Any

from tests.support.builders import a_budget, a_run, scenario
from tests.support.scenarios import A32, at, ends, open_leases, play, stamp, starts

BUDGETS = [
    a_budget("t", "org:t").envelope("h", 64).build(),
    a_budget("s", "org:s").envelope("h", 64).build(),
    a_budget("u", "org:u").envelope("h", 64).build(),
]
TENANTS = {"t": "org:t", "s": "org:s", "u": "org:u"}


def test_freed_capacity_goes_to_the_earliest_submitted_run_not_the_first_name() -> None:
    # u's x (16) and y (16) fill the domain. t/zeta (16) arrives at +1m, t/alpha (16) at +2m. At +5m
    # x succeeds: 16 free → zeta, submitted first, starts; alpha waits.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("u/y", "org:u").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/zeta", "org:t").gpus(16).groups(8).build()]),
         at(2, apply=[a_run("t/alpha", "org:t").gpus(16).groups(8).build()]),
         at(5, workload={"run": "u/x", "event": "Succeed"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/zeta")} == {stamp(5)}
    assert starts(out, "t/alpha") == [] and out["final"]["runs"]["t/alpha"]["phase"] == "Pending"


def test_runs_submitted_together_line_up_by_namespace_then_name() -> None:
    # u/x (8) and u/y (24) fill the domain. At +1m, in file order, t/b, t/a and s/z (8 each)
    # arrive together. x succeeds at +5m (8 free): s/z goes first (namespace s < t). y succeeds at
    # +10m: t/a and t/b start.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(8).build(),
                      a_run("u/y", "org:u").gpus(24).groups(8).build()]),
         at(1, apply=[a_run("t/b", "org:t").gpus(8).build(), a_run("t/a", "org:t").gpus(8).build(),
                      a_run("s/z", "org:s").gpus(8).build()]),
         at(5, workload={"run": "u/x", "event": "Succeed"}),
         at(10, workload={"run": "u/y", "event": "Succeed"})],
        until="+11m",
    )  # fmt: skip
    out = play(doc)
    assert {e["at"] for e in starts(out, "s/z")} == {stamp(5)}
    assert {e["at"] for e in starts(out, "t/a")} == {stamp(10)}
    assert {e["at"] for e in starts(out, "t/b")} == {stamp(10)}


# ------------------------------------------------------------------------------------ job forests


def _chain(*later: dict[str, Any]) -> dict[str, Any]:
    # a → b → c: b waits for a, c waits for b
    return scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/a", "org:t").gpus(8).build(),
                      a_run("t/b", "org:t").gpus(8).after("a").build(),
                      a_run("t/c", "org:t").gpus(8).after("b").build()]),
         at(1, checkpoint="start"), *later],
        until="+20m",
    )  # fmt: skip


def test_a_chain_waits_without_reservations_and_runs_link_by_link() -> None:
    out = play(_chain(at(5, workload={"run": "t/a", "event": "Succeed"}), at(6, checkpoint="b-running"),
                      at(10, workload={"run": "t/b", "event": "Succeed"})))  # fmt: skip
    first = out["checkpoints"]["start"]
    assert [first["runs"][r]["phase"] for r in ("t/a", "t/b", "t/c")] == ["Running", "Waiting", "Waiting"]
    assert "t/b" not in first["reservations"] and "t/c" not in first["reservations"]
    second = out["checkpoints"]["b-running"]["runs"]
    assert (second["t/b"]["phase"], second["t/c"]["phase"]) == ("Running", "Waiting")
    assert {e["at"] for e in starts(out, "t/b")} == {stamp(5)}
    assert {e["at"] for e in starts(out, "t/c")} == {stamp(10)}


def test_a_failed_dependency_fails_the_whole_chain_behind_it() -> None:
    # a fails at +5m: b fails because a failed, c because b failed; neither ever starts
    out = play(_chain(at(5, workload={"run": "t/a", "event": "Fail"}), at(5, checkpoint="failed")))
    runs = out["checkpoints"]["failed"]["runs"]
    assert runs["t/a"]["phase"] == "Failed"
    assert runs["t/b"]["phase"] == "Failed"
    assert runs["t/c"]["phase"] == "Failed"
    assert starts(out, "t/b") == [] and starts(out, "t/c") == []


def test_deleting_a_dependency_fails_the_run_waiting_for_it() -> None:
    out = play(
        _chain(at(5, delete={"kind": "Run", "namespace": "t", "name": "a"}), at(5, checkpoint="deleted"))
    )
    runs = out["checkpoints"]["deleted"]["runs"]
    assert runs["t/b"]["phase"] == "Failed"
    assert [e["reason"] for e in ends(out, "t/a")] == ["RunDeleted"]


def test_a_run_submitted_after_its_dependency_succeeded_starts_at_once() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/a", "org:t").gpus(8).build()]),
         at(5, workload={"run": "t/a", "event": "Succeed"}),
         at(10, apply=[a_run("t/b", "org:t").gpus(8).after("a").build()])],
        until="+11m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/b"]["phase"] == "Running"
    assert {e["at"] for e in starts(out, "t/b")} == {stamp(10)}


def test_a_released_waiter_keeps_its_submission_time_in_line() -> None:
    # t/b (8, after a) was submitted at +0 with a; u/x (24) fills the rest. At +1m u/d (8) arrives:
    # no GPU is free, so it is reserved. At +5m a succeeds (8 free). b enters the line with its
    # submission time (+0), ahead of d (+1m): b starts now and d keeps waiting.
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("t/a", "org:t").gpus(8).build(),
                      a_run("t/b", "org:t").gpus(8).after("a").build(),
                      a_run("u/x", "org:u").gpus(24).groups(8).build()]),
         at(1, apply=[a_run("u/d", "org:u").gpus(8).build()]),
         at(5, workload={"run": "t/a", "event": "Succeed"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/b")} == {stamp(5)}
    assert starts(out, "u/d") == [] and out["final"]["runs"]["u/d"]["phase"] == "Pending"


# ------------------------------------------------------------------------------ completions


def test_groups_complete_one_by_one_and_the_run_succeeds_with_the_last() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(5, workload={"run": "t/r", "event": "Succeed", "group": 1}),
         at(6, checkpoint="half"),
         at(10, workload={"run": "t/r", "event": "Succeed", "group": 0})],
        until="+11m",
    )  # fmt: skip
    out = play(doc)
    half = out["checkpoints"]["half"]
    assert half["runs"]["t/r"]["phase"] == "Running"
    assert {x["spec"]["group"] for x in open_leases(half, "t/r")} == {0}
    assert [(e["group"], e["reason"], e["at"]) for e in ends(out, "t/r")] == [
        (1, "Completed", stamp(5)),
        (0, "Completed", stamp(10)),
    ]
    assert out["final"]["runs"]["t/r"]["phase"] == "Succeeded"


def test_a_whole_run_failure_closes_every_lease_and_frees_its_gpus() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/r", "org:t").gpus(32).groups(8).build()]),
         at(5, workload={"run": "t/r", "event": "Fail"}),
         at(5, apply=[a_run("t/next", "org:t").gpus(32).groups(8).build()])],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/r"]["phase"] == "Failed"
    assert {e["reason"] for e in ends(out, "t/r")} == {"WorkloadFailed"}
    assert len(ends(out, "t/r")) == 4
    # capacity freed by an observation is usable in the same pass
    assert {e["at"] for e in starts(out, "t/next")} == {stamp(5)}


def test_a_run_after_two_others_waits_for_both() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/a", "org:t").gpus(8).build(), a_run("t/b", "org:t").gpus(8).build(),
                      a_run("t/c", "org:t").gpus(8).after("a", "b").build()]),
         at(5, workload={"run": "t/a", "event": "Succeed"}), at(6, checkpoint="one-done"),
         at(10, workload={"run": "t/b", "event": "Succeed"})],
        until="+11m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["one-done"]["runs"]["t/c"]["phase"] == "Waiting"
    assert {e["at"] for e in starts(out, "t/c")} == {stamp(10)}


def test_a_dependency_requeued_as_a_lottery_victim_has_not_failed_so_its_waiter_keeps_waiting() -> None:
    # u/a (32 fixed) fills A; u/b waits for a. t/r (8) due at +16m can only draw a: a is requeued
    # (a victim, not a failure), so b is still Waiting, not Failed
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/a", "org:u").gpus(32).groups(8).build(),
                      a_run("u/b", "org:u").gpus(8).after("a").build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(8).build()])],
        until="+17m",
    )  # fmt: skip
    out = play(doc)
    assert {e["reason"].split("(")[0] for e in ends(out, "u/a")} == {"RandomPreempt"}
    assert out["final"]["runs"]["u/a"]["phase"] == "Pending"
    assert out["final"]["runs"]["u/b"]["phase"] == "Waiting"


def test_a_dependency_requeued_after_a_node_failure_has_not_failed_either() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/a", "org:t").gpus(16).groups(8).checkpointed().build(),
                      a_run("t/b", "org:t").gpus(8).after("a").build()]),
         at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert out["final"]["runs"]["t/a"]["phase"] in ("Pending", "Running")
    assert out["final"]["runs"]["t/b"]["phase"] == "Waiting"


def test_deleting_the_blocking_run_lets_a_reserved_run_start_early() -> None:
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(32).groups(8).build()]),
         at(1, apply=[a_run("t/r", "org:t").gpus(16).groups(8).build()]),
         at(4, delete={"kind": "Run", "namespace": "u", "name": "x"})],
        until="+5m",
    )  # fmt: skip
    out = play(doc)
    assert {e["reason"] for e in ends(out, "u/x")} == {"RunDeleted"}
    assert {e["at"] for e in starts(out, "t/r")} == {stamp(4)}
    assert out["final"]["reservations"]["t/r"]["status"]["state"] == "Released"


def test_editing_a_waiting_run_keeps_its_submission_time() -> None:
    # u/x and u/y (16 each) fill A. t/a (16) arrives at +1m, t/b (16) at +2m; t/a's file is edited
    # (new image) at +3m. y succeeds at +5m: a still ranks first ("when the Run first appeared")
    edited = a_run("t/a", "org:t").gpus(16).groups(8).build()
    edited["spec"]["template"] = {"image": "registry.example/train:2"}
    doc = scenario(
        TENANTS, A32,
        [at(0, apply=[*BUDGETS, a_run("u/x", "org:u").gpus(16).groups(8).build(),
                      a_run("u/y", "org:u").gpus(16).groups(8).build()]),
         at(1, apply=[a_run("t/a", "org:t").gpus(16).groups(8).build()]),
         at(2, apply=[a_run("t/b", "org:t").gpus(16).groups(8).build()]),
         at(3, apply=[edited]),
         at(5, workload={"run": "u/y", "event": "Succeed"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {e["at"] for e in starts(out, "t/a")} == {stamp(5)}
    assert starts(out, "t/b") == []
