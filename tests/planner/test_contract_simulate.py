"""Contract scenarios for §6 `jobtree simulate`: pass instants, step order at one instant, merge
patches, the STATE and EVENT shapes, validation, and byte-identical output.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from schemas.scenario import Scenario
from tests.support import TESTS
from tests.support.builders import a_budget, a_run, scenario
from tests.support.scenarios import (
    A32,
    at,
    bad_closure_reasons,
    ends,
    play,
    simulate,
    simulate_bytes,
    stamp,
    starts,
)

CONTRACT = TESTS / "scenarios" / "contract"


def test_checkpoints_at_an_instant_see_that_instants_pass_whatever_their_file_order() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(5, checkpoint="same-instant"),
         at(5, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/r", "org:t").gpus(8).build()])],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    st = out["checkpoints"]["same-instant"]
    assert st["at"] == stamp(5)
    assert st["runs"]["t/r"]["phase"] == "Running"


def test_a_checkpoint_never_causes_a_pass() -> None:
    # t/m is admitted at 8 (budget 8). At +1m the budget is raised (a pass: one growth step to 16).
    # No tick: nothing is due at +5m, so the checkpoint there still shows 16, not 24 or 32.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 8).build(),
                      a_run("t/m", "org:t").gpus(32).groups(8).malleable(8, 32, 8).build()]),
         at(1, apply=[a_budget("t", "org:t").envelope("h", 32).build()]),
         at(3, checkpoint="c3"), at(5, checkpoint="c5")],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert out["checkpoints"]["c3"]["runs"]["t/m"]["width"]["allocated"] == 16
    assert out["checkpoints"]["c5"]["runs"]["t/m"]["width"]["allocated"] == 16
    assert [e["at"] for e in starts(out, "t/m") if e["reason"] == "Grow"] == [stamp(1)]


def test_steps_at_one_instant_apply_in_file_order_before_the_single_pass() -> None:
    # at +0 a 16-GPU run is applied, then replaced by an 8-GPU version in a later step of the same
    # instant: one pass sees only the final spec
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/r", "org:t").gpus(16).build()]),
         at(0, apply=[a_run("t/r", "org:t").gpus(8).build()])],
    )  # fmt: skip
    out = play(doc)
    assert sum(e["gpus"] for e in starts(out, "t/r")) == 8


def test_a_merge_patch_null_removes_a_field_so_its_default_applies_again() -> None:
    # desired 16 of max 32 at +0 (16 running). At +1m the patch removes desiredTotalGPUs: desired
    # defaults to max (32) again and the run grows one step (24) in that pass.
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(),
                      a_run("t/m", "org:t").gpus(16).groups(8).malleable(8, 32, 8, desired=16).build()]),
         at(1, patch={"kind": "Run", "namespace": "t", "name": "m",
                      "merge": {"spec": {"malleable": {"desiredTotalGPUs": None}}}})],
        until="+2m",
    )  # fmt: skip
    run = play(doc)["final"]["runs"]["t/m"]
    assert run["width"]["desired"] == 32 and run["width"]["allocated"] == 24


def test_a_merge_patch_replaces_lists_whole() -> None:
    # envelopes [h (16), spare-env (16)] patched to [h (16)]: spare-env is gone, so the second run
    # it paid for is now unfunded (never ended)
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 16).envelope("g", 16).build(),
                      a_run("t/r", "org:t").gpus(32).groups(8).build()]),
         at(5, patch={"kind": "Budget", "name": "t",
                      "merge": {"spec": {"envelopes": [{"name": "h", "flavor": "H100-80GB", "concurrency": 16}]}}})],
        until="+6m",
    )  # fmt: skip
    out = play(doc)
    assert [e["name"] for e in out["final"]["budgets"]["t"]["envelopes"]] == ["h"]
    assert out["final"]["runs"]["t/r"]["funding"]["unfundedGPUs"] == 16
    assert ends(out) == []


def test_absolute_step_times_are_the_same_instants_as_offsets() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build()]),
         {"at": stamp(7), "apply": [a_run("t/r", "org:t").gpus(8).build()]}],
        until="+8m",
    )  # fmt: skip
    assert {e["at"] for e in starts(play(doc), "t/r")} == {stamp(7)}


def test_state_reports_only_nodes_that_are_not_ready_and_schedulable() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(1, node={"name": "A-n00", "event": "Fail"}), at(1, node={"name": "A-n01", "event": "Delete"}),
         at(1, node={"name": "A-n02", "event": "NotReady"}), at(1, node={"name": "A-n03", "event": "Cordon"}),
         at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build()])],
        until="+2m",
    )  # fmt: skip
    nodes = play(doc)["final"]["nodes"]
    # (whether a failed node that held no lease is cordoned is not said: §4.8 cordons it while
    # failing over the Active leases on it)
    assert nodes["A-n00"]["state"] == "Failed"
    assert nodes["A-n01"]["state"] == "Deleted"
    assert nodes["A-n02"]["state"] == "NotReady"
    assert nodes["A-n03"] == {"cordoned": True, "state": "Ready"}


def _busy() -> dict[str, Any]:
    # starts, grows, a spare, a fill, a swap, a shrink, a completion and a deletion
    return scenario(
        {"t": "org:t", "o": "org:o"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 32).build(),
                      a_budget("o", "org:o").envelope("h", 8).build(),
                      a_run("t/j", "org:t").gpus(8).groups(8).spares(4).malleable(8, 16, 8).build(),
                      a_run("t/k", "org:t").gpus(4).build()]),
         at(1, apply=[a_run("o/f", "org:o").opportunistic().gpus(4).build()]),
         at(3, node={"name": "A-n00", "event": "Fail"}),
         at(4, workload={"run": "t/k", "event": "Succeed"}),
         at(5, patch={"kind": "Run", "namespace": "t", "name": "j",
                      "merge": {"spec": {"malleable": {"desiredTotalGPUs": 8}}}}),
         at(6, delete={"kind": "Run", "namespace": "t", "name": "j"})],
        until="+7m",
    )  # fmt: skip


def test_ledger_events_carry_every_field_and_pair_up_per_lease() -> None:
    out = play(_busy())
    want = {"at", "event", "lease", "run", "group", "role", "gpus", "nodes", "payer", "reason"}
    opened: dict[str, dict[str, Any]] = {}
    for e in out["ledger"]:
        assert set(e) == want, e
        assert set(e["payer"]) == {"owner", "budget", "envelope"}
        assert e["gpus"] == len(e["nodes"])
        assert e["role"] in ("Active", "Spare", "Borrowed")
        if e["event"] == "Start":
            assert e["reason"] in ("Start", "Grow", "Swap", "Fill")
            assert e["lease"] not in opened
            opened[e["lease"]] = e
        else:
            assert e["event"] == "End"
            start = opened.pop(e["lease"])
            assert (start["run"], start["group"], start["nodes"]) == (e["run"], e["group"], e["nodes"])
            assert start["at"] <= e["at"]
    assert {x["metadata"]["name"] for x in out["final"]["leases"]} == set(opened)


def test_every_closure_reason_in_a_busy_timeline_is_on_the_designs_list() -> None:
    out = play(_busy())
    assert bad_closure_reasons(out) == []


def test_shuffling_objects_inside_a_step_changes_no_output_byte() -> None:
    doc = _busy()
    shuffled = copy.deepcopy(doc)
    shuffled["spec"]["steps"][0]["apply"].reverse()
    shuffled["spec"]["fleet"]["tenants"].reverse()
    assert json.dumps(play(doc), sort_keys=True) == json.dumps(play(shuffled), sort_keys=True)


def test_the_contract_scenario_files_simulate_to_identical_bytes_twice() -> None:
    files = sorted(CONTRACT.glob("*.yaml"))
    assert files
    for path in files:
        first = simulate_bytes(path)
        assert first and first == simulate_bytes(path), path.name


def test_an_invalid_run_is_reported_and_never_blocks_its_neighbours() -> None:
    # t/bad names another team's owner: rejected with a diagnostic; t/good still starts
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_budget("u", "org:u").envelope("h", 64).build(),
                      a_run("t/bad", "org:u").gpus(8).build(), a_run("t/good", "org:t").gpus(8).build()])],
    )  # fmt: skip
    st = play(doc)["final"]
    assert st["runs"]["t/good"]["phase"] == "Running"
    assert "t/bad" not in st["runs"] or st["runs"]["t/bad"]["phase"] != "Running"
    assert any("bad" in json.dumps(d) for d in st["diagnostics"])


def test_running_work_is_left_alone_when_its_file_turns_invalid() -> None:
    doc = scenario(
        {"t": "org:t"}, A32,
        [at(0, apply=[a_budget("t", "org:t").envelope("h", 64).build(), a_run("t/r", "org:t").gpus(8).build()]),
         at(5, patch={"kind": "Run", "namespace": "t", "name": "r", "merge": {"spec": {"resources": {"totalGPUs": 0}}}}),
         at(6, checkpoint="invalid")],
        until="+7m",
    )  # fmt: skip
    out = play(doc)
    assert ends(out) == []
    assert out["checkpoints"]["invalid"]["diagnostics"]
    assert len(out["checkpoints"]["invalid"]["leases"]) == 1


def test_the_resolver_order_scenario_file_shows_what_its_comment_says() -> None:
    out = simulate(CONTRACT / "resolver-order.yaml")
    res = out["checkpoints"]["reserved"]["reservations"]["v/r"]
    assert res["spec"]["earliestStart"] == stamp(17)
    assert res["status"]["reason"] == "cluster short by 13 GPUs in scope"
    assert res["status"]["forecast"]["remedies"] == [
        "Reclaim unfunded capacity in scope",
        "Drop spares in scope",
        "Shrink elastic runs by step size",
        "Run fair lottery if deficit remains",
    ]
    cut = {(e["run"], e["group"], e["role"], e["reason"]) for e in ends(out, at=stamp(17))}
    assert cut == {
        ("t/unf", 0, "Active", "ReclaimUnfunded"),
        ("s/sp", 0, "Spare", "DropSpare"),
        ("u/m", 1, "Active", "Shrink"),
    }
    runs = out["checkpoints"]["activated"]["runs"]
    assert runs["v/r"]["phase"] == "Running" and runs["v/r"]["width"]["allocated"] == 16
    assert runs["t/unf"]["phase"] == "Pending" and runs["u/m"]["width"]["allocated"] == 8


def test_the_forest_and_family_scenario_file_shows_what_its_comment_says() -> None:
    out = simulate(CONTRACT / "forest-and-family.yaml")
    waiting = out["checkpoints"]["waiting"]
    assert (
        waiting["runs"]["c/train"]["phase"] == "Waiting" and waiting["runs"]["c/eval"]["phase"] == "Waiting"
    )
    assert waiting["reservations"] == {}
    runs = out["checkpoints"]["released"]["runs"]
    assert runs["c/eval"]["phase"] == "Running" and runs["c/eval"]["funding"]["ownedGPUs"] == 8
    assert runs["c/train"]["funding"]["borrowedGPUs"] == 16
    assert runs["c/train"]["funding"]["family"] == [{"owner": "org:p", "gpus": 16}]


def test_every_timestamp_written_is_rfc3339_utc_with_z_and_whole_seconds() -> None:
    stamp_re = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
    found: list[str] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and re.match(r"^\d{4}-\d{2}-\d{2}T", node):
            found.append(node)
            assert stamp_re.match(node), (key, node)

    doc = _busy()
    doc["spec"]["steps"].append(
        at(2, seconds=30, apply=[a_run("t/late", "org:t").gpus(32).groups(8).build()])
    )
    walk(play(doc))
    assert found


def _simulate_file(tmp: Any, doc: dict[str, Any]) -> tuple[int, str]:
    from click.testing import CliRunner

    from reconciler.cli.simulate import command

    path = tmp / "s.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML: lines are those of this one-line file
    result = CliRunner().invoke(command, [str(path), "--format", "json"])
    return result.exit_code, result.output


def test_a_zero_tick_is_refused_with_the_file_line_and_what_to_change(tmp_path: Any) -> None:
    doc = scenario({"t": "org:t"}, A32, [], until="+1h")
    doc["spec"]["tick"] = "0s"
    code, output = _simulate_file(tmp_path, doc)
    assert code == 3
    assert f"{tmp_path / 's.yaml'}:1:" in output
    assert "spec.tick: tick must be at least 1s; set a positive duration such as 1m, or remove tick" in output
    assert "Traceback" not in output


def test_a_tick_asking_for_more_passes_than_a_scenario_may_take_is_refused(tmp_path: Any) -> None:
    # tick 1s until +24000h: 24000 x 3600 + 1 = 86,400,001 periodic passes, past the 100,000 limit
    # (the scenario ran until killed). tick 1m until +1000h is 60,001 passes: accepted.
    doc = scenario({"t": "org:t"}, A32, [], until="+24000h")
    doc["spec"]["tick"] = "1s"
    code, output = _simulate_file(tmp_path, doc)
    assert code == 3
    assert (
        "spec.tick: tick 1s from start to until +24000h asks for 86,400,001 passes; at most 100,000 are "
        "allowed: set a longer tick or an earlier until"
    ) in output
    assert Scenario.model_validate({**doc, "spec": {**doc["spec"], "tick": "1m", "until": "+1000h"}})
