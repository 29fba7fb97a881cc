"""The six public scenarios: every expectation their comments state, worked out from the design."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from planner.resolve import replay
from reconciler.cli.simulate import command as simulate_command
from tests.support.scenarios import EXAMPLES, ended, leases_of, nodes_of, simulate, simulate_bytes, started


@pytest.fixture(scope="module")
def cofunded() -> dict[str, Any]:
    return simulate(EXAMPLES / "01-cofunded.yaml")


@pytest.fixture(scope="module")
def elastic() -> dict[str, Any]:
    return simulate(EXAMPLES / "02-elastic.yaml")


@pytest.fixture(scope="module")
def spares() -> dict[str, Any]:
    return simulate(EXAMPLES / "03-spares-fill-failure.yaml")


@pytest.fixture(scope="module")
def lottery() -> dict[str, Any]:
    return simulate(EXAMPLES / "04-reservation-and-lottery.yaml")


@pytest.fixture(scope="module")
def window() -> dict[str, Any]:
    return simulate(EXAMPLES / "05-future-window.yaml")


NCCL = EXAMPLES / "06-nccl-multinode.yaml"


@pytest.fixture(scope="module")
def nccl() -> dict[str, Any]:
    return simulate(NCCL)


def test_cofunded_run_borrows_its_fourth_group_from_the_sponsor(cofunded: dict[str, Any]) -> None:
    st = cofunded["checkpoints"]["admitted"]
    run = st["runs"]["rai-sys/train-128"]
    assert run["phase"] == "Running"
    assert run["width"]["allocated"] == 128
    assert run["funding"]["ownedGPUs"] == 96
    assert run["funding"]["borrowedGPUs"] == 32
    assert run["funding"]["sponsors"] == [{"owner": "org:ai:mm:vision", "gpus": 32}]
    for lease in leases_of(st, "rai-sys/train-128"):
        group, payer = lease["spec"]["group"], lease["spec"]["payer"]
        if group in (0, 1, 2):
            assert all(n.startswith("A-") for n in nodes_of(lease))
            assert payer["owner"] == "org:ai:rai:sys"
        else:
            assert group == 3
            assert all(n.startswith("B-") for n in nodes_of(lease))
            assert payer == {"owner": "org:ai:mm:vision", "budget": "mm-vision", "envelope": "west-h100"}
    lending = st["budgets"]["mm-vision"]["envelopes"][0]
    assert lending["usage"]["borrowedOutGPUs"] == 32


def test_cofunded_rerun_is_guarded_by_its_borrow_limit(cofunded: dict[str, Any]) -> None:
    st = cofunded["checkpoints"]["guarded"]
    assert st["runs"]["rai-sys/train-128-fixed"]["phase"] == "Pending"
    assert leases_of(st, "rai-sys/train-128-fixed") == []
    res = st["reservations"]["rai-sys/train-128-fixed"]
    assert res["status"]["state"] == "Pending"
    assert res["status"]["reason"] == "borrow limit of 16 GPUs exhausted for requested width"
    assert res["status"]["forecast"]["deficitGPUs"] == 16
    assert res["status"]["forecast"]["remedies"] == ["Increase maxBorrowGPUs or shrink the run"]


def test_elastic_run_starts_at_its_requested_width(elastic: dict[str, Any]) -> None:
    run = elastic["checkpoints"]["T0"]["runs"]["rai/train"]
    assert run["phase"] == "Running"
    assert {k: run["width"][k] for k in ("min", "max", "desired", "allocated")} == {
        "min": 96,
        "max": 160,
        "desired": 160,
        "allocated": 96,
    }
    assert run["message"] == "bound 96 GPUs"
    assert {x["spec"]["group"] for x in leases_of(elastic["checkpoints"]["T0"], "rai/train")} == {0, 1, 2}


def test_elastic_run_grows_one_step_per_pass(elastic: dict[str, Any]) -> None:
    run = elastic["checkpoints"]["T1"]["runs"]["rai/train"]
    assert run["width"]["allocated"] == 128
    assert run["width"]["pending"] == "Grow to 160"
    assert run["message"] == "grew to 128 GPUs"
    grew = started(elastic["ledger"], "rai/train", "2026-03-02T09:01:00Z")
    assert grew and all(e["reason"] == "Grow" and e["group"] == 3 for e in grew)


def test_lowering_desired_width_closes_the_highest_group(elastic: dict[str, Any]) -> None:
    st = elastic["checkpoints"]["T2"]
    run = st["runs"]["rai/train"]
    assert run["width"]["desired"] == 96 and run["width"]["allocated"] == 96
    assert run["message"] == "shrunk to 96 GPUs"
    assert "pending" not in run["width"]
    closed = ended(elastic["ledger"], "rai/train")
    assert closed and all(e["group"] == 3 and e["reason"] == "Shrink" for e in closed)
    assert {x["spec"]["group"] for x in leases_of(st, "rai/train")} == {0, 1, 2}
    t0_names = {x["metadata"]["name"] for x in leases_of(elastic["checkpoints"]["T0"], "rai/train")}
    assert t0_names == {x["metadata"]["name"] for x in leases_of(st, "rai/train")}


def _by_role(state: dict[str, Any], run: str, role: str) -> list[dict[str, Any]]:
    return [x for x in leases_of(state, run) if x["spec"]["slice"]["role"] == role]


def test_spares_sit_after_the_active_groups_in_the_same_domain(spares: dict[str, Any]) -> None:
    st = spares["checkpoints"]["T0"]
    assert st["runs"]["alpha/j1"]["phase"] == "Running"
    assert st["runs"]["alpha/j1"]["width"]["allocated"] == 64
    active = {g: set() for g in (0, 1)}
    for x in _by_role(st, "alpha/j1", "Active"):
        active[x["spec"]["group"]] |= nodes_of(x)
    assert active[0] == {f"A-n{i:02d}" for i in range(0, 8)}
    assert active[1] == {f"A-n{i:02d}" for i in range(8, 16)}
    spare = {
        x["spec"]["group"]: (nodes_of(x), len(x["spec"]["slice"]["nodes"]))
        for x in _by_role(st, "alpha/j1", "Spare")
    }
    assert spare == {0: ({"A-n16"}, 4), 1: ({"A-n17"}, 4)}


def test_opportunistic_run_fills_spare_held_gpus_without_debiting_a_budget(spares: dict[str, Any]) -> None:
    st = spares["checkpoints"]["T1"]
    j2 = st["runs"]["beta/j2"]
    assert j2["phase"] == "Running" and j2["width"]["allocated"] == 8
    leases = leases_of(st, "beta/j2")
    assert leases and all(
        x["spec"]["slice"]["role"] == "Borrowed" and x["spec"]["reason"] == "Fill" for x in leases
    )
    assert set().union(*(nodes_of(x) for x in leases)) == {"A-n16", "A-n17"}
    usage = st["budgets"]["beta"]["envelopes"][0]["usage"]
    assert usage == {"activeGPUs": 0, "spareGPUs": 0, "borrowedOutGPUs": 0, "unfundedGPUs": 0}


def test_failed_node_swaps_group_zero_onto_its_spare(spares: dict[str, Any]) -> None:
    st, ledger = spares["checkpoints"]["T2"], spares["ledger"]
    at = "2026-03-02T09:05:00Z"
    j2_ends = ended(ledger, "beta/j2", at)
    assert j2_ends and all(
        e["reason"] == "ReclaimedBySpare" and e["nodes"][0].startswith("A-n16#") for e in j2_ends
    )
    assert st["runs"]["beta/j2"]["phase"] == "Running" and st["runs"]["beta/j2"]["width"]["allocated"] == 4
    assert set().union(*(nodes_of(x) for x in leases_of(st, "beta/j2"))) == {"A-n17"}
    j1_ends = {(e["role"], e["nodes"][0].split("#")[0], e["reason"]) for e in ended(ledger, "alpha/j1", at)}
    assert j1_ends == {("Spare", "A-n16", "Swap"), ("Active", "A-n03", "NodeFailure")}
    swap = [x for x in _by_role(st, "alpha/j1", "Active") if x["spec"]["reason"] == "Swap"]
    assert len(swap) == 1 and nodes_of(swap[0]) == {"A-n16"} and swap[0]["spec"]["group"] == 0
    assert swap[0]["spec"]["payer"] == {"owner": "org:alpha", "budget": "alpha", "envelope": "nvl72"}
    j1 = st["runs"]["alpha/j1"]
    assert j1["width"]["allocated"] == 64
    assert j1["message"] == "group 0 swapped to spare after node failure"
    assert st["nodes"]["A-n03"]["cordoned"] is True


def test_the_swapped_pod_keeps_the_ranks_of_the_failed_one(spares: dict[str, Any]) -> None:
    # group 0 binds 8 nodes of 4 free GPUs each in placement order (most free, then name):
    # A-n00 serves ranks 0-3, A-n01 4-7, A-n02 8-11, A-n03 12-15, ... The A-n03 pod moves to the
    # spare on A-n16 and keeps rank 12; no other pod is renumbered.
    def ranks(state: dict[str, Any]) -> dict[str, int]:
        return {
            nodes_of(x).pop(): x["spec"]["slice"]["rank"]
            for x in _by_role(state, "alpha/j1", "Active")
            if x["spec"]["group"] == 0
        }

    before, after = ranks(spares["checkpoints"]["T0"]), ranks(spares["checkpoints"]["T2"])
    assert before == {f"A-n{i:02d}": 4 * i for i in range(8)}
    assert after == {**{n: r for n, r in before.items() if n != "A-n03"}, "A-n16": 12}


def test_second_failure_swaps_group_one_and_the_filler_requeues(spares: dict[str, Any]) -> None:
    st, ledger = spares["checkpoints"]["T3"], spares["ledger"]
    at = "2026-03-02T09:10:00Z"
    j1_ends = {(e["role"], e["nodes"][0].split("#")[0], e["reason"]) for e in ended(ledger, "alpha/j1", at)}
    assert j1_ends == {("Spare", "A-n17", "Swap"), ("Active", "A-n09", "NodeFailure")}
    assert st["runs"]["alpha/j1"]["message"] == "group 1 swapped to spare after node failure"
    assert st["runs"]["beta/j2"]["phase"] == "Pending"
    assert leases_of(st, "beta/j2") == []


def test_failure_without_a_spare_fails_the_fixed_width_run(spares: dict[str, Any]) -> None:
    st = spares["checkpoints"]["T4"]
    assert st["runs"]["alpha/j1"]["phase"] == "Failed"
    assert leases_of(st, "alpha/j1") == []
    reasons = {e["reason"] for e in ended(spares["ledger"], "alpha/j1", "2026-03-02T09:15:00Z")}
    assert reasons == {"NodeFailure", "RunFailed"}
    assert st["leases"] == []


def test_admits_three_runs_leaving_fourteen_idle(lottery: dict[str, Any]) -> None:
    st = lottery["checkpoints"]["T0"]
    want = {"team-a/j1": 32, "team-b/j2": 24, "team-a/j3": 2}
    for run, gpus in want.items():
        assert st["runs"][run]["phase"] == "Running" and st["runs"][run]["width"]["allocated"] == gpus
    assert 72 - sum(len(x["spec"]["slice"]["nodes"]) for x in st["leases"]) == 14


def test_budget_cut_ends_nothing_and_marks_the_highest_groups_unfunded(lottery: dict[str, Any]) -> None:
    st = lottery["checkpoints"]["T1"]
    assert not [e for e in lottery["ledger"] if e["event"] == "End" and e["at"] <= st["at"]]
    j1 = st["runs"]["team-a/j1"]["funding"]
    assert (j1["ownedGPUs"], j1["unfundedGPUs"]) == (24, 8)
    assert st["runs"]["team-a/j3"]["funding"]["unfundedGPUs"] == 2


def test_new_run_gets_a_reservation_with_deficit_remedies_and_warnings(lottery: dict[str, Any]) -> None:
    st = lottery["checkpoints"]["T2"]
    assert st["runs"]["team-b/j4"]["phase"] == "Pending"
    res = st["reservations"]["team-b/j4"]
    assert res["spec"]["earliestStart"] == "2026-03-02T09:25:00Z"
    assert res["status"]["reason"] == "cluster short by 18 GPUs in scope"
    assert res["status"]["forecast"]["deficitGPUs"] == 18
    assert res["status"]["forecast"]["remedies"] == [
        "Reclaim unfunded capacity in scope",
        "Shrink elastic runs by step size",
        "Run fair lottery if deficit remains",
    ]
    for run in ("team-a/j1", "team-a/j3"):
        assert st["runs"][run]["conflicts"] == [
            {"reservation": "team-b/j4", "probability": 1.0, "earliestStart": "2026-03-02T09:25:00Z"}
        ]
    assert "conflicts" not in st["runs"]["team-b/j2"]
    assert {c["run"] for c in res["status"]["conflictSet"]} == {"team-a/j1", "team-a/j3"}


def test_activation_reclaims_unfunded_groups_lowest_ranked_first(lottery: dict[str, Any]) -> None:
    st = lottery["checkpoints"]["T3"]
    ends = [e for e in lottery["ledger"] if e["event"] == "End" and e["at"] == "2026-03-02T09:25:00Z"]
    assert [e["run"] for e in ends][0] == "team-a/j3"
    assert {e["run"] for e in ends} == {"team-a/j3", "team-a/j1"}
    assert all(e["reason"] == "ReclaimUnfunded" for e in ends)
    assert sum(e["gpus"] for e in ends if e["run"] == "team-a/j1") == 32
    assert st["runs"]["team-a/j1"]["phase"] == "Pending"
    assert (
        st["runs"]["team-b/j2"]["phase"] == "Running" and st["runs"]["team-b/j2"]["width"]["allocated"] == 24
    )
    assert (
        st["runs"]["team-b/j4"]["phase"] == "Running" and st["runs"]["team-b/j4"]["width"]["allocated"] == 32
    )
    assert st["reservations"]["team-b/j4"]["status"]["state"] == "Released"
    assert not any("RandomPreempt" in e["reason"] for e in ends)


def test_lottery_draw_follows_the_published_seed(lottery: dict[str, Any]) -> None:
    st = lottery["checkpoints"]["T5"]
    at = "2026-03-02T09:55:00Z"
    ends = [e for e in lottery["ledger"] if e["event"] == "End" and e["at"] == at]
    seed = "0x8d72a19d5040e04f"
    assert st["reservations"]["team-c/c2"]["status"]["seed"] == seed
    shrink = [e for e in ends if e["reason"] == "Shrink"]
    assert {(e["run"], e["group"]) for e in shrink} == {("team-c/c1", 1)}
    preempt = [e for e in ends if e["reason"].startswith("RandomPreempt")]
    assert {e["reason"] for e in preempt} == {f"RandomPreempt({seed})"}
    assert {e["run"] for e in preempt} == {"team-b/b1"} and {e["group"] for e in preempt} == {0, 1, 2, 3}
    assert {e["run"] for e in ends} == {"team-c/c1", "team-b/b1"}
    assert st["runs"]["team-b/b1"]["phase"] == "Pending"
    assert st["runs"]["team-c/c1"]["width"]["allocated"] == 8
    assert (
        st["runs"]["team-c/c2"]["phase"] == "Running" and st["runs"]["team-c/c2"]["width"]["allocated"] == 16
    )


def test_future_window_reservation_is_window_aligned(window: dict[str, Any]) -> None:
    st = window["checkpoints"]["today"]
    assert st["runs"]["rai/big"]["phase"] == "Pending"
    res = st["reservations"]["rai/big"]
    assert res["status"]["state"] == "Pending"
    assert res["spec"]["earliestStart"] == "2026-03-03T00:00:10Z"
    assert res["status"]["forecast"]["confidence"] == "window-aligned"
    assert res["status"]["reason"] == "budget window opens at 2026-03-03T00:00:00Z"
    assert st["leases"] == []


def test_run_starts_when_the_window_opens_before_its_eta(window: dict[str, Any]) -> None:
    st = window["checkpoints"]["tomorrow"]
    run = st["runs"]["rai/big"]
    assert run["phase"] == "Running" and run["width"]["allocated"] == 4096
    starts = started(window["ledger"], "rai/big")
    assert {e["at"] for e in starts} == {"2026-03-03T00:00:00Z"}
    domains: dict[int, set[str]] = {}
    for x in leases_of(st, "rai/big"):
        domains.setdefault(x["spec"]["group"], set()).update(n.split("-")[0] for n in nodes_of(x))
    assert sorted(domains) == list(range(8))
    assert all(len(d) == 1 for d in domains.values())
    assert all(
        sum(len(x["spec"]["slice"]["nodes"]) for x in leases_of(st, "rai/big") if x["spec"]["group"] == g)
        == 512
        for g in domains
    )
    assert st["reservations"]["rai/big"]["status"]["state"] == "Released"


def active_on(state: dict[str, Any], run: str) -> dict[str, int]:
    return {
        n: len(x["spec"]["slice"]["nodes"])
        for x in leases_of(state, run)
        if not x["status"]["closed"] and x["spec"]["slice"]["role"] == "Active"
        for n in nodes_of(x)
    }


def test_nccl_job_runs_on_two_nodes_with_its_spare_on_a_third(nccl: dict[str, Any]) -> None:
    st = nccl["checkpoints"]["T0"]
    run = st["runs"]["nccl/allreduce"]
    assert (run["phase"], run["width"]["allocated"]) == ("Running", 16)
    assert active_on(st, "nccl/allreduce") == {"A-n00": 8, "A-n01": 8}
    spares = [x for x in leases_of(st, "nccl/allreduce") if x["spec"]["slice"]["role"] == "Spare"]
    assert [(sorted(nodes_of(x)), len(x["spec"]["slice"]["nodes"])) for x in spares] == [(["A-n02"], 8)]


def test_nccl_group_swaps_onto_its_spare_when_a_node_fails(nccl: dict[str, Any]) -> None:
    st = nccl["checkpoints"]["T1"]
    run = st["runs"]["nccl/allreduce"]
    assert (run["width"]["allocated"], run["message"]) == (16, "group 0 swapped to spare after node failure")
    assert active_on(st, "nccl/allreduce") == {"A-n00": 8, "A-n02": 8}
    reasons = {e["reason"] for e in ended(nccl["ledger"], "nccl/allreduce", "2026-03-02T09:05:00Z")}
    assert reasons == {"NodeFailure", "Swap"}


def _pods_at(repo: Path, rev: str) -> dict[str, dict[str, Any]]:
    text = subprocess.run(
        ["git", "show", f"{rev}:rendered/gpu-a/nccl/allreduce.yaml"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    docs = [d for d in yaml.safe_load_all(text) if d["kind"] == "Pod"]
    return {d["spec"]["nodeName"]: d for d in docs}


def test_nccl_pods_are_the_template_with_jobtrees_part_set(tmp_path: Path) -> None:
    result = CliRunner().invoke(simulate_command, [str(NCCL), "--git", str(tmp_path / "what-if")])
    assert result.exit_code == 0, result.output
    template = yaml.safe_load(NCCL.read_text())["spec"]["steps"][0]["apply"][1]["spec"]["template"]
    want_logs, want_nccl = template["spec"]["containers"]
    for rev, workers, spare in (
        ("HEAD~1", {"A-n00": "0", "A-n01": "8"}, "A-n02"),
        ("HEAD", {"A-n00": "0", "A-n02": "8"}, None),
    ):
        pods = _pods_at(tmp_path / "what-if", rev)
        for node, rank in workers.items():
            spec = pods[node]["spec"]
            assert (spec["restartPolicy"], spec["subdomain"]) == ("Never", "allreduce")
            assert {k: spec[k] for k in ("securityContext", "tolerations", "volumes")} == {
                k: template["spec"][k] for k in ("securityContext", "tolerations", "volumes")
            }
            logs, nccl_container = spec["containers"]
            assert logs == want_logs
            assert nccl_container["resources"] == {
                "requests": {"cpu": "16", "memory": "256Gi", "nvidia.com/gpu": 8},
                "limits": {"memory": "256Gi", "nvidia.com/gpu": 8},
            }
            env = {e["name"]: e["value"] for e in nccl_container["env"]}
            assert (env["JOBTREE_RANK_BASE"], env["JOBTREE_WORLD_SIZE"], env["NCCL_DEBUG"]) == (
                rank,
                "16",
                "INFO",
            )
            assert (
                nccl_container["args"] == want_nccl["args"]
                and nccl_container["volumeMounts"] == want_nccl["volumeMounts"]
            )
            assert pods[node]["metadata"]["labels"]["app.kubernetes.io/name"] == "nccl-tests"
        if spare is not None:
            assert pods[spare]["spec"]["tolerations"] == template["spec"]["tolerations"]
            assert "nvidia.com/gpu" not in str(pods[spare]["spec"]["containers"])
        assert set(pods) == {*workers, *([spare] if spare else [])}


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_simulating_twice_gives_identical_bytes(name: str) -> None:
    assert simulate_bytes(EXAMPLES / name) == simulate_bytes(EXAMPLES / name)


def test_anyone_can_replay_the_published_lottery_from_its_seed(lottery: dict[str, Any]) -> None:
    """Worked by hand from §4.6: the c2 reservation published seed 0x8d72a19d5040e04f; after c1's
    shrink the candidates are the groups of the runs in its conflict set that are still running:
    a1 #0 #1 and fill #0 (org:team-a), b1 #0..#3 (org:team-b), c1 #0 (org:team-c)."""
    res = lottery["checkpoints"]["T5"]["reservations"]["team-c/c2"]["status"]
    seed = res["seed"]
    assert seed == "0x" + hashlib.sha256(b"team-c/c2|2026-03-02T09:55:00Z").hexdigest()[:16]
    assert {c["run"] for c in res["conflictSet"]} == {"team-a/a1", "team-a/fill", "team-b/b1", "team-c/c1"}
    candidates = [
        ("org:team-a", "team-a/a1", 0),
        ("org:team-a", "team-a/a1", 1),
        ("org:team-a", "team-a/fill", 0),
    ]
    candidates += [("org:team-b", "team-b/b1", g) for g in range(4)] + [("org:team-c", "team-c/c1", 0)]

    def h(text: str) -> int:
        return int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)

    owners = ["org:team-a", "org:team-b", "org:team-c"]
    want_owner = owners[h(f"{seed}|0|owner") % 3]
    want_group = [f"team-b/b1#{g}" for g in range(4)][h(f"{seed}|0|group") % 4]
    assert (want_owner, want_group) == ("org:team-b", "team-b/b1#3")
    assert replay(seed, [candidates]) == [want_group]
    cut = {e["run"] for e in lottery["ledger"] if e["reason"] == f"RandomPreempt({seed})"}
    assert cut == {want_group.split("#")[0]}
