"""§4.8 and §4.3 after failures, §4.1 metering, §3 status: what a researcher sees after something went
wrong — what happened, which leases ended why, group numbers that never clash, honest GPU-hours.

Expectations are worked out by hand from DESIGN.md before running.
"""

from __future__ import annotations

from typing import Any

from planner.world import FleetState
from reconciler.passes import pipeline
from reconciler.passes.embedded import EmbeddedCluster
from reconciler.spec import validated
from schemas.common import parse_time
from tests.support.builders import a_budget, a_run, domain, scenario
from tests.support.scenarios import at, ends, open_leases, play, stamp

T0 = parse_time("2026-03-02T09:00:00Z")


def _groups(state: dict[str, Any], run: str) -> set[int]:
    return {x["spec"]["group"] for x in open_leases(state, run, "Active")}


def test_a_run_put_back_in_line_by_a_failure_says_what_happened_while_it_waits() -> None:
    # A: 3 nodes x 8. t/r (16 in groups of 8, checkpointed) starts on A-n00 (group 0) and A-n01
    # (group 1); u/x (8) arrives at +1m and takes A-n02. A-n01 fails at +5m: no spare, fixed width,
    # checkpoint -> back in line. Its lease on A-n01 ends NodeFailure, the one on A-n00 RunFailed;
    # A-n01 is cordoned. It needs 16, 8 are free: it waits for 8 GPUs, and says why it waits.
    doc = scenario(
        {"t": "org:t", "u": "org:u"}, [domain("A", 3)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16).build(),
                      a_budget("u", "org:u").envelope("h", 8).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).checkpointed().build()]),
         at(1, apply=[a_run("u/x", "org:u").gpus(8).build()]),
         at(5, node={"name": "A-n01", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    run = out["final"]["runs"]["t/r"]
    assert run["phase"] == "Pending"
    assert run["message"] == "group 1 lost to node failure on A-n01; waiting for 8 GPUs"
    closed = {(e["group"], e["reason"]) for e in ends(out, "t/r", stamp(5))}
    assert closed == {(1, "NodeFailure"), (0, "RunFailed")}
    assert out["final"]["nodes"]["A-n01"]["cordoned"] is True


def test_a_checkpointed_run_losing_both_groups_on_one_node_ends_both_leases_node_failure() -> None:
    # One node of 16 GPUs holds both groups (8 each) of t/r. It fails: both leases were on the
    # failed node, so both end NodeFailure (RunFailed is for a failed run's leases elsewhere).
    doc = scenario(
        {"t": "org:t"}, [domain("A", 1, gpus=16), domain("B", 1, gpus=16)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16).build(),
                      a_run("t/r", "org:t").gpus(16).groups(8).checkpointed().build()]),
         at(5, node={"name": "A-n00", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert {
        (e["group"], e["reason"]) for e in ends(out, "t/r", stamp(5)) if e["nodes"][0].startswith("A-")
    } == {
        (0, "NodeFailure"),
        (1, "NodeFailure"),
    }


def test_a_failed_node_without_leases_is_cordoned_too() -> None:
    doc = scenario(
        {"t": "org:t"}, [domain("A", 2)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(), a_run("t/r", "org:t").gpus(8).build()]),
         at(5, node={"name": "A-n01", "event": "Fail"})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert open_leases(out["final"], "t/r")[0]["spec"]["slice"]["nodes"][0].startswith("A-n00")
    assert out["final"]["nodes"]["A-n01"]["cordoned"] is True


def test_groups_opened_after_failures_take_new_indices_never_one_still_open() -> None:
    # t/r malleable 8..32 step 8 (groups of 8) starts at 32: groups 0..3 on A-n00..A-n03 (A has 6
    # nodes). A-n00 and A-n02 fail at +5m: groups 0 and 2 are lost (24, then 16, still >= 8), and the
    # same pass grows one step: the new group is 4 (one above the highest it ever opened), on a free
    # node. The next pass grows again: group 5. No index is ever reused while open.
    doc = scenario(
        {"t": "org:t"}, [domain("A", 6)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 48).build(),
                      a_run("t/r", "org:t").gpus(32).groups(8).malleable(8, 32, 8).build()]),
         at(5, node={"name": "A-n00", "event": "Fail"}), at(5, node={"name": "A-n02", "event": "Fail"}),
         at(5, checkpoint="failed"), at(6, checkpoint="grown")],
        until="+6m",
    )  # fmt: skip
    doc["spec"]["tick"] = "1m"
    out = play(doc)
    assert _groups(out["checkpoints"]["failed"], "t/r") == {1, 3, 4}
    assert _groups(out["checkpoints"]["grown"], "t/r") == {1, 3, 4, 5}
    assert out["checkpoints"]["grown"]["runs"]["t/r"]["width"]["allocated"] == 32


def _capped_fleet(nodes: int, concurrency: int, hours: int, run: bytes) -> dict[str, bytes]:
    """A fleet repository: A of `nodes` x 8, t's one envelope with a GPU-hour cap, and run t/r."""
    return {
        "jobtree.yaml": b"apiVersion: rq.davidlangworthy.io/v1\nkind: FleetConfig\nmetadata: {name: f}\n"
        b"spec:\n  tenants: [{namespace: t, owner: 'org:t'}]\n",
        "inventory/nodes.yaml": b"domains: [{name: A, region: west, cluster: c1, flavor: H100-80GB, nodes: %d, "
        b"gpusPerNode: 8}]\n" % nodes,
        "budgets/t.yaml": b"apiVersion: rq.davidlangworthy.io/v1\nkind: Budget\nmetadata: {name: t}\n"
        b"spec: {owner: 'org:t', envelopes: [{name: h, flavor: H100-80GB, concurrency: %d, maxGPUHours: %d}]}\n"
        % (concurrency, hours),
        "runs/t/r.yaml": b"apiVersion: rq.davidlangworthy.io/v1\nkind: Run\nmetadata: {name: r, namespace: t}\n"
        b"spec: {owner: 'org:t', %s}\n" % run,
    }


def test_gpu_hours_past_a_spent_cap_are_charged_to_nobody_even_without_a_pass_then() -> None:
    # cap 4 GPU-hours, 4 GPUs from 09:00: spent at exactly 10:00. With no pass between 09:00 and
    # 10:30, the envelope is charged 4.0 GPU-hours (not 6.0) and the run 4.0 owned GPU-hours; at
    # 10:30 its group is unfunded (still running, charged to nobody).
    spec = validated.read_spec(_capped_fleet(1, 8, 4, b"resources: {gpuType: H100-80GB, totalGPUs: 4}"))
    assert spec.diagnostics == []
    cluster = EmbeddedCluster(spec.inventory)
    first = pipeline.run_pass(spec, cluster, FleetState(), T0, render=False)
    assert first.runs["t/r"]["phase"] == "Running"
    assert T0 + 3600 in first.due  # the instant the cap is spent is a due pass
    later = pipeline.run_pass(spec, cluster, first.state, T0 + 5400, render=False)
    envelope = later.budgets["t"]["envelopes"][0]
    assert envelope["consumedGPUHours"] == 4.0
    assert later.runs["t/r"]["funding"]["ownedGPUHours"] == 4.0
    assert later.runs["t/r"]["funding"]["unfundedGPUs"] == 4 and later.runs["t/r"]["phase"] == "Running"


def test_a_new_run_whose_file_is_invalid_gets_a_status_naming_the_file() -> None:
    # a Run with a typo (unknown field) never valid: it is kept out of planning, and its status says
    # which file to fix; fixed, it goes in line as any new run.
    bad = a_run("t/r", "org:t").gpus(8).build()
    bad["spec"]["gpuz"] = 8
    doc = scenario(
        {"t": "org:t"}, [domain("A", 1)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(), bad]), at(1, checkpoint="invalid")],
        until="+2m",
    )  # fmt: skip
    out = play(doc)
    run = out["checkpoints"]["invalid"]["runs"]["t/r"]
    assert run["phase"] == "Pending" and run["message"].startswith("spec invalid: fix ")
    assert open_leases(out["final"], "t/r") == []


def test_a_group_grown_after_the_highest_one_is_lost_takes_an_index_above_it() -> None:
    # t/r malleable 8..32 step 8 starts at 32: groups 0..3 on A-n00..A-n03 (A has 6 nodes). A-n03
    # fails at +5m: group 3, the highest, is lost (24 still >= 8) and the same pass grows one step.
    # The new group takes index 4, one above the highest the run has ever opened, not 3 (the
    # highest open is 2, and 3 groups are open).
    doc = scenario(
        {"t": "org:t"}, [domain("A", 6)],
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 48).build(),
                      a_run("t/r", "org:t").gpus(32).groups(8).malleable(8, 32, 8).build()]),
         at(5, node={"name": "A-n03", "event": "Fail"}), at(5, checkpoint="failed")],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert _groups(out["checkpoints"]["failed"], "t/r") == {0, 1, 2, 4}


def test_a_cap_spent_partly_by_spares_is_metered_at_the_instant_it_was_spent_without_a_pass_then() -> None:
    # cap 24 GPU-hours; t/r runs 8 active GPUs and an 8-GPU spare from 09:00 (spare rate 0.5): 12
    # GPU-hours an hour, spent at exactly 11:00. With no pass between 09:00 and 11:30 the envelope
    # holds 16 consumed + 8 spare GPU-hours (the cap, not 20 + 10), and the run 16 owned GPU-hours.
    run = b"resources: {gpuType: H100-80GB, totalGPUs: 8}, locality: {groupGPUs: 8}, sparesPerGroup: 8"
    spec = validated.read_spec(_capped_fleet(2, 16, 24, run))
    assert spec.diagnostics == []
    cluster = EmbeddedCluster(spec.inventory)
    first = pipeline.run_pass(spec, cluster, FleetState(), T0, render=False)
    assert T0 + 7200 in first.due
    later = pipeline.run_pass(spec, cluster, first.state, T0 + 9000, render=False)
    envelope = later.budgets["t"]["envelopes"][0]
    assert (envelope["consumedGPUHours"], envelope["spareGPUHours"]) == (16.0, 8.0)
    assert later.runs["t/r"]["funding"]["ownedGPUHours"] == 16.0
